"""The rules of core/steps.py no other test asserts: the initial state's every field, the
texts kept next to the messages (reused, encoded, a lone surrogate named), a hook's
rewrite, each turn's fields (a paused answer joined, a refusal said, the model kept),
each way a turn ends a run, the cap on calls at its edge and its message, a call's bad
name, the tool call records, what a run saves and replays, the RunResult's fields, and
what counts as a suspension request."""

from __future__ import annotations

import json

import pytest
from pyrsistent import pvector

from toolnexus.core import steps
from toolnexus.core.frozen import FrozenMap, keep_json
from toolnexus.core.tool import tool_result
from toolnexus.core.transcript import TranscriptFormatError
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.common import EMPTY_ANSWER, ZERO_USAGE, turn, usage
from toolnexus.core.wire.parts import UnsupportedPartError

USER = FrozenMap({"role": "user", "content": "old"})
ANSWER = FrozenMap({"role": "assistant", "content": "a"})


def _json(m) -> bytes:
    return json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()


def _turn(text="", calls=(), end=None, refusal=None, model="m1", finish="stop", use=(1, 2)):
    message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]  # fmt: skip
    return turn(message, text, calls, usage(*use), finish, model, end=end, refusal=refusal)


def _call(i, name="f", arguments='{"a": 1}'):
    return {"id": f"c{i}", "name": name, "arguments": arguments}


# ---- texts -------------------------------------------------------------------------------


def test_texts_of_reuses_kept_texts_and_encodes_the_rest():
    kept = FrozenMap({"role": "user", "content": "k"})
    keep_json(kept, b"KEPT")
    fresh = FrozenMap({"role": "user", "content": "é"})
    assert steps.texts_of([kept, fresh]) == pvector([b"KEPT", _json(fresh)])
    assert steps.texts_of([kept]) == pvector([b"KEPT"])
    assert steps.texts_of([]) == pvector()


def test_a_lone_surrogate_is_an_error_naming_what_holds_it():
    with pytest.raises(TranscriptFormatError) as e:
        steps.text_of({"role": "user", "content": "a\ud83d"}, "the prompt")
    assert str(e.value).startswith("the prompt holds a lone surrogate ('\\ud83d' at 27)")
    with pytest.raises(TranscriptFormatError, match="^a message holds"):
        steps.text_of({"content": "\ud83d"})
    assert steps.text_of({"content": "é"}) == '{"content":"é"}'.encode()


def test_a_prompt_with_a_lone_surrogate_is_named_the_prompt():
    with pytest.raises(TranscriptFormatError, match="^the prompt holds a lone surrogate"):
        steps.start("openai", [], "\ud83d", texts=[])


# ---- start -------------------------------------------------------------------------------


def test_the_initial_state_s_every_field():
    s = steps.start("openai", [USER], "hi")
    user = FrozenMap({"role": "user", "content": "hi"})
    assert s == {
        "dialect": "openai",
        "messages": pvector([USER, user]),
        "texts": None,
        "fresh": 1,
        "said": pvector(),
        "turns": 0,
        "tool_calls": pvector(),
        "usage": ZERO_USAGE,
        "text": "",
        "model": None,
        "status": None,
        "limit": None,
        "pending": None,
        "stop_reason": None,
        "refusal": None,
        "paused": False,
    }
    assert s["paused"] is False


def test_the_initial_texts_are_the_history_s_and_the_prompt_s():
    s = steps.start("openai", pvector([USER]), "hi", texts=[b"OLD"])
    assert s["texts"] == pvector([b"OLD", b'{"role":"user","content":"hi"}'])


def test_a_prompt_of_parts_follows_the_part_options():
    part = {"type": "file", "url": "https://x/a.pdf"}  # openai takes no file by URL
    with pytest.raises(UnsupportedPartError, match="^openai cannot carry the file"):
        steps.start("openai", [], [part])  # "error" by default
    s = steps.start("openai", [], [part], on_unsupported_part="text")
    assert s["messages"][-1]["content"][0]["type"] == "text"
    big = {"type": "image", "mimeType": "image/png", "data": "QUJD" * 10}
    with pytest.raises(ValueError, match="30"):
        steps.start("openai", [], [big], max_part_bytes=29)
    assert steps.start("openai", [], [big], max_part_bytes=30)["fresh"] == 1


# ---- a hook's rewrite ----------------------------------------------------------------------


def test_with_messages_replaces_messages_texts_and_what_no_longer_holds():
    s = {**steps.start("openai", [USER, ANSWER], "hi", texts=[b"1", b"2"]), "facts": 1, "made": 2}
    s = {**s, "fresh": 2}
    out = steps.with_messages(s, pvector([USER, EMPTY_ANSWER]))
    assert out["messages"] == pvector([USER])  # made replayable: the empty answer goes
    assert out["texts"] == pvector([_json(USER)])
    assert out["fresh"] == 1 and out["facts"] is None and out["made"] is None
    assert out["dialect"] == "openai" and s["fresh"] == 2  # the input untouched
    kept = steps.with_messages(s, pvector([USER, ANSWER, USER]))
    assert kept["fresh"] == 2
    assert steps.with_messages({**s, "texts": None}, pvector([USER]))["texts"] is None


# ---- request -----------------------------------------------------------------------------


def test_request_is_the_dialect_s_body_and_its_bytes():
    s = steps.start("openai", [], "hi", texts=[])
    body = steps.request(s, "gpt", [], "be brief", {"temperature": 0})
    assert body == DIALECTS["openai"].body("gpt", s["messages"], [], "be brief", {"temperature": 0})
    assert json.loads(steps.request_content(s, body)) == json.loads(json.dumps(body))
    wire = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = steps.request(s, "gpt", wire, "", {})
    assert body["tools"] == wire
    tools = FrozenMap({"tools": ("X", b'"T"')})
    assert b'"tools":"T"' in steps.request_content(s, {**body, "tools": "X"}, tools)


def test_request_content_reuses_the_state_s_texts():
    s = steps.start("openai", [], "hi", texts=[])
    spaced = b'{"role": "user", "content": "hi"}'  # the same JSON, other bytes: reused
    s = {**s, "texts": pvector([spaced])}
    body = steps.request(s, "gpt", [], "", {})
    assert spaced in steps.request_content(s, body)


# ---- on_turn ------------------------------------------------------------------------------


def test_a_turn_s_fields():
    s = steps.start("openai", [], "hi", texts=[])
    t = _turn("done", end=None, finish="stop", use=(3, 4))
    out, calls = steps.on_turn(s, t)
    assert calls == ()
    assert out["messages"] == s["messages"].append(t["message"])
    assert out["texts"] == s["texts"].append(_json(t["message"]))
    assert out["fresh"] == 2 and out["turns"] == 1
    assert out["usage"] == usage(3, 4) and out["text"] == "done"
    assert out["said"] == pvector(["done"]) and out["model"] == "m1"
    assert out["stop_reason"] == "stop" and out["refusal"] is None
    assert out["paused"] is False and out["status"] == "done" and out["limit"] is None


def test_a_turn_without_a_model_keeps_the_last_one():
    s = {**steps.start("openai", [], "hi"), "model": "before"}
    assert steps.on_turn(s, _turn("x", model=None))[0]["model"] == "before"
    assert steps.on_turn(s, _turn("x", model="now"))[0]["model"] == "now"


def test_calls_are_parsed_and_the_run_goes_on():
    s = steps.start("openai", [], "hi")
    out, calls = steps.on_turn(s, _turn("", [_call(1), _call(2, arguments="{bad")]))
    assert calls[0] == {"id": "c1", "name": "f", "args": {"a": 1}, "error": None}
    assert calls[1]["args"] is None and calls[1]["error"]
    assert out["status"] is None and out["said"] == pvector()


@pytest.mark.parametrize(
    "name, shown, why",
    [
        (5, "5", "tool name must be a string, got int"),
        ("", '""', "tool name is empty"),
        (b"ab", "\"b'ab'\"", "tool name must be a string, got bytes"),  # not JSON: its str
        (
            {"n": "x" * 200},
            json.dumps({"n": "x" * 200})[:100],
            "tool name must be a string, got FrozenMap",
        ),
    ],
)
def test_a_call_s_bad_name_is_shown_as_json_cut_to_100(name, shown, why):
    _, calls = steps.on_turn(steps.start("openai", [], "hi"), _turn("", [_call(1, name)]))
    assert calls[0]["name"] == shown and calls[0]["error"] == why
    assert calls[0]["args"] == {"a": 1}


def test_a_refusal_is_said_where_the_turn_has_no_text():
    s = steps.start("openai", [], "hi")
    out, _ = steps.on_turn(s, _turn("", refusal="I can't"))
    assert out["said"] == pvector(["I can't"]) and out["refusal"] == "I can't"
    out, _ = steps.on_turn(s, _turn("words", refusal="no"))
    assert out["said"] == pvector(["words"])
    assert steps.on_turn(s, _turn(""))[0]["said"] == pvector()


@pytest.mark.parametrize(
    "end, status, limit",
    [
        (None, "done", None),
        ("max_tokens", "incomplete", "max_tokens"),
        ("content_filter", "incomplete", "content_filter"),
        ("incomplete", "incomplete", None),
        ("other", "done", None),
    ],
)
def test_how_a_turn_without_calls_ends_the_run(end, status, limit):
    out, _ = steps.on_turn(steps.start("openai", [], "hi"), _turn("x", end=end))
    assert (out["status"], out["limit"], out["paused"]) == (status, limit, False)


def test_a_paused_turn_goes_on_joined_until_the_turns_run_out():
    s = steps.start("openai", [], "hi")
    one, _ = steps.on_turn(s, _turn("Hel", end="pause"), max_turns=3)
    assert one["paused"] is True and one["status"] is None and one["text"] == "Hel"
    two, _ = steps.on_turn(one, _turn("lo", end="pause"), max_turns=3)
    assert (
        two["text"] == "Hello" and two["status"] is None and two["said"] == pvector(["Hel", "lo"])
    )
    three, _ = steps.on_turn(two, _turn("!", end="pause"), max_turns=3)
    assert (three["status"], three["limit"], three["text"]) == ("incomplete", "max_turns", "Hello!")
    assert steps.on_turn(two, _turn("!", end="pause"))[0]["status"] is None  # no bound
    after, _ = steps.on_turn(one, _turn(" there"))
    assert after["text"] == "Hel there" and after["paused"] is False
    fresh, _ = steps.on_turn(after, _turn("new"))
    assert fresh["text"] == "new"


def test_a_pausing_turn_with_calls_is_not_paused():
    out, calls = steps.on_turn(steps.start("openai", [], "hi"), _turn("", [_call(1)], end="pause"))
    assert out["paused"] is False and len(calls) == 1


def test_calls_past_the_cap_are_marked_not_to_run():
    s = steps.start("openai", [], "hi")
    _, calls = steps.on_turn(s, _turn("", [_call(1), _call(2), _call(3)]), max_calls=2)
    why = "not run: a model turn may call at most 2 tool(s)"
    assert [c["error"] for c in calls] == [None, None, why]
    assert calls[2]["capped"] is True and "capped" not in calls[1]
    _, calls = steps.on_turn(s, _turn("", [_call(1), _call(2)]), max_calls=2)
    assert all(c["error"] is None and "capped" not in c for c in calls)
    calls = ({"error": None},)
    assert steps.capped(calls, 1) is calls and steps.capped(calls, None) is calls


def test_the_result_of_a_call_that_is_not_run():
    capped = {"name": "f", "error": "not run: X", "capped": True}
    assert steps.invalid_result(capped) == tool_result("Tool call 'f' not run: X", True)
    bad = {"name": "f", "error": "a: bad"}
    assert steps.invalid_result(bad) == tool_result("Invalid arguments for tool 'f': a: bad", True)
    assert steps.invalid_result({**bad, "capped": False})["output"].startswith("Invalid")


# ---- on_results -----------------------------------------------------------------------------


def test_the_records_of_a_turn_s_calls():
    s = steps.start("openai", [], "hi", texts=[])
    s, calls = steps.on_turn(s, _turn("", [_call(1), _call(2, arguments="{bad")]))
    results = [tool_result("r1", metadata={"k": 1}), FrozenMap({"output": "r2", "is_error": True})]
    out = steps.on_results(s, calls, results, max_turns=5)
    assert list(out["tool_calls"]) == [
        {"id": "c1", "name": "f", "args": {"a": 1}, "output": "r1", "is_error": False,
         "metadata": {"k": 1}},
        {"id": "c2", "name": "f", "args": {}, "output": "r2", "is_error": True, "metadata": {}},
    ]  # fmt: skip
    assert all(type(r["args"]) is FrozenMap and type(r) is FrozenMap for r in out["tool_calls"])
    messages = DIALECTS["openai"].tool_result_messages(calls, results)
    assert out["messages"] == s["messages"].extend(messages)
    assert out["texts"] == s["texts"].extend(map(_json, messages))
    assert out["fresh"] == s["fresh"] + 2 and out["status"] is None


def test_a_result_missing_for_a_call_is_an_error_not_a_lost_record():
    s = steps.start("openai", [], "hi")
    s, calls = steps.on_turn(s, _turn("", [_call(1), _call(2)]))
    with pytest.raises(ValueError, match="zip"):
        steps.on_results(s, calls, [tool_result("r")], max_turns=5)


def test_the_turns_end_the_run_at_their_bound():
    s = steps.start("openai", [], "hi")
    s, calls = steps.on_turn(s, _turn("", [_call(1)]))
    r = [tool_result("r")]
    assert steps.on_results(s, calls, r, max_turns=2)["status"] is None
    out = steps.on_results(s, calls, r, max_turns=1)
    assert (out["status"], out["limit"]) == ("incomplete", "max_turns")
    assert steps.is_finished(out) and not steps.is_finished(s)


# ---- what is saved and replayed ----------------------------------------------------------------


def test_replayable_history_leaves_out_an_empty_final_answer_only():
    s = steps.start("openai", [USER, EMPTY_ANSWER], "hi", texts=[b"1", b"2"])
    messages, texts = steps.replayable_history(s)
    assert messages is s["messages"] and texts is s["texts"]  # nothing to clean
    done, _ = steps.on_turn(s, turn(EMPTY_ANSWER, "", [], ZERO_USAGE, "stop", "m"))
    messages, texts = steps.replayable_history(done)
    assert messages == s["messages"] and texts == s["texts"]
    messages, texts = steps.replayable_history({**done, "texts": None})
    assert messages == s["messages"] and texts is None


def test_kept_messages_leave_out_a_refused_exchange_unless_asked():
    s = steps.start("openai", [USER], "hi")
    s, _ = steps.on_turn(s, _turn("no", refusal="no"))
    assert steps.kept_messages(s) == (pvector([USER]), pvector())
    saved, added = steps.kept_messages(s, keep_refused=True)
    assert saved is s["messages"] and added == s["messages"][1:]
    fine = {**s, "refusal": None}
    assert steps.kept_messages(fine) == (s["messages"], s["messages"][1:])
    assert steps.fresh_messages(s) == s["messages"][1:]


def test_the_run_result_s_fields():
    s = {**steps.start("openai", [], "hi"), "status": "done", "output": {"x": 1},
         "stop_reason": "stop", "refusal": "r", "served_by": "b", "pending": "p"}  # fmt: skip
    s = {**s, "tool_calls": pvector([1, 2]), "turns": 3, "text": "t", "limit": "l"}
    r = steps.result(s, "fallback")
    assert dict(r) == {
        "text": "t", "messages": s["messages"], "tool_calls": pvector([1, 2]),
        "tool_call_count": 2, "turns": 3, "usage": ZERO_USAGE, "model": "fallback",
        "status": "done", "limit": "l", "pending": "p", "output": {"x": 1},
        "stop_reason": "stop", "refusal": "r", "served_by": "b",
    }  # fmt: skip
    assert steps.result({**s, "model": "m"}, "fallback")["model"] == "m"
    bare = dict(steps.start("openai", [], "hi"))
    for key in ("output", "stop_reason", "refusal", "served_by"):
        bare.pop(key, None)
    r = steps.result({**bare, "status": "done"}, "x")
    assert r["output"] is None and r["served_by"] is None and r["stop_reason"] is None


@pytest.mark.parametrize(
    "metadata, pending",
    [
        (None, None),
        ({}, None),
        ({"pending": "p"}, None),
        ({"pending": {"id": None}}, None),
        ({"pending": {"kind": "x"}}, None),
        ({"pending": {"id": 0}}, {"id": 0}),
        ({"pending": {"id": "q", "data": 1}}, {"id": "q", "data": 1}),
    ],
)
def test_what_counts_as_a_suspension_request(metadata, pending):
    assert steps.pending_request({"metadata": metadata}) == pending
    assert steps.pending_request({}) is None
