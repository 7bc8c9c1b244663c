"""The rules of `core/transcript.py`, each asserted where mutation testing found none
(tools/mutate.py: a survivor named behaviour no test checked): the stored text's exact
bytes, the refusal of a document without `version` or `messages`, trim's budget when a
system message leads, the size bound of `readable`, and the edges of the algebra."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.transcript import (
    INTERRUPTED,
    TranscriptFormatError,
    check_message,
    dangling,
    dumps,
    freeze_transcript,
    is_tool_result,
    json_text,
    loads,
    open_calls,
    readable,
    repair,
    safe_cuts,
    tool_call_ids,
    tool_result_ids,
    trim,
    trim_past,
    turn_groups,
)

SYS = {"role": "system", "content": "s"}


def user(text: str = "q") -> dict:
    return {"role": "user", "content": text}


def said(text: str = "a") -> dict:
    return {"role": "assistant", "content": text}


def calls(*ids: str) -> dict:
    function = {"name": "f", "arguments": "{}"}
    made = [{"id": i, "type": "function", "function": function} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": made}


def result(i: str, text: str = "r") -> dict:
    return {"role": "tool", "tool_call_id": i, "content": text}


# ---- the stored text ------------------------------------------------------------------


def test_the_stored_text_is_compact_and_keeps_non_ascii():
    assert json_text({"a": [1, 2], "b": {"c": "é 🎉"}}) == '{"a":[1,2],"b":{"c":"é 🎉"}}'
    assert json_text({"b": 1, "a": 2}) == '{"b":1,"a":2}'  # the author's order by default
    assert dumps([user("hi")]) == '{"version":1,"messages":[{"role":"user","content":"hi"}]}'


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=20))  # fmt: skip
def test_the_stored_text_is_json_without_a_byte_of_padding(value):
    text = json_text(value)
    assert json.loads(text) == value
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_what_no_reader_takes_back_is_refused():
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(TranscriptFormatError, match="^not JSON: Out of range float"):
            json_text({"n": bad})


# ---- reading a stored document --------------------------------------------------------


def test_a_document_is_read_in_every_known_version():
    assert loads('[{"role":"user","content":"q"}]') == [user()]  # version 0: a bare list
    assert loads(dumps([user(), said()])) == [user(), said()]
    assert loads(b'{"version":1,"messages":[]}') == pvector()
    assert isinstance(loads(dumps([user()])), PVector)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"messages": []}', "^not a transcript document \\(no 'version'\\)$"),
        ('"just text"', "no 'version'"),
        ("5", "no 'version'"),
        ('{"version": 1}', "^a transcript document has no 'messages' list$"),
        ('{"version": 1, "messages": null}', "no 'messages' list"),
        ('{"version": 2, "messages": []}',
         "^unknown transcript format version 2 \\(this toolnexus reads 0..1\\)$"),
        ('{"version": "1", "messages": []}', "unknown transcript format version '1'"),
        ('{"version": 1, "messages": [', "^not JSON: "),
        ('{"version": 1, "messages": ["x"]}', "not a message"),
    ],
)  # fmt: skip
def test_a_document_that_is_not_a_transcript_is_refused_clearly(text, message):
    with pytest.raises(TranscriptFormatError, match=message):
        loads(text)


def test_freeze_takes_any_sequence_of_messages_and_nothing_else():
    assert freeze_transcript(None) == pvector() and isinstance(freeze_transcript(None), PVector)
    frozen = freeze_transcript((user(), said()))
    assert isinstance(frozen, PVector) and frozen == [user(), said()]
    listed = freeze_transcript([FrozenMap(user())])  # a list of pmaps: frozen into a pvector
    assert isinstance(listed, PVector)
    for bad in ("text", b"bytes", 5, {"role": "user"}):
        with pytest.raises(TranscriptFormatError, match="^a transcript is a list of messages"):
            freeze_transcript(bad)


def test_a_message_is_a_map_with_a_string_role():
    check_message({"role": "user", "content": "q", "tool_calls": []})
    check_message({"role": "assistant", "tool_calls": None})
    for bad in ({"content": "q"}, {"role": 5}, ["role", "user"], None):
        with pytest.raises(TranscriptFormatError, match="^not a message"):
            check_message(bad)
    for bad in ("c1", b"c1", 5):
        with pytest.raises(TranscriptFormatError, match="tool_calls must be a list"):
            check_message({"role": "assistant", "tool_calls": bad})


# ---- trim: the budget counts what follows a leading system message ---------------------


def test_a_body_within_budget_is_kept_whole_even_without_a_turn_start_first():
    t = [SYS, said("left over"), user(), said()]
    assert trim(t, 3) == t
    assert trim_past(t, 3, 1) == t
    assert trim(t, 2) == [SYS, user(), said()]


def test_trim_keeps_only_the_system_message_when_no_turn_starts():
    assert trim([SYS, said(), said()], 1) == [SYS]
    assert trim([said(), said()], 1) == []


def test_trim_takes_the_longest_tail_that_fits():
    t = [user("1"), said(), user("2"), said(), user("3"), said()]
    assert trim(t, 4) == t[2:] and trim(t, 5) == t[2:] and trim(t, 6) == t
    assert trim(t, 0) == t[4:]  # none fits: the most recent turn (safety over size)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_trim_budgets_are_integers_from_zero(bad):
    with pytest.raises(ValueError, match="^max_messages must be an integer >= 0"):
        trim([user()], bad)


def test_trim_past_keeps_at_most_its_budget():
    t = [user(str(i)) for i in range(4)]
    assert trim_past(t, 4, 4) == t and trim_past(t, 3, 1) == t[3:] and trim_past(t, 3, 2) == t[2:]
    assert trim_past(t, 3, 0) == t[3:]  # keep=0: the most recent turn, as trim(t, 0)
    for bad in (5, -1, True, 1.0):
        with pytest.raises(ValueError, match="^keep must be an integer from 0 to 4"):
            trim_past(t, 4, bad)


# ---- the algebra's edges --------------------------------------------------------------


def test_call_and_result_ids_read_only_what_is_there():
    odd = {"role": "assistant", "content": None, "tool_calls": "c1"}
    assert tool_call_ids(odd) == ()
    blocks = [{"type": "tool_use", "id": "t1"}, "junk", {"type": "tool_use", "id": 5}]
    mixed = {"role": "assistant", "content": blocks,
             "tool_calls": [{"id": "c1"}, "junk", {"id": None}]}  # fmt: skip
    assert tool_call_ids(mixed) == ("c1", "t1")
    assert tool_call_ids({"role": "user", "tool_calls": [{"id": "c1"}]}) == ()
    assert tool_result_ids({"role": "assistant", "tool_call_id": "c1"}) == ()
    assert tool_result_ids({"role": "user", "content": [{"type": "text", "text": "x"}]}) == ()


def test_a_tool_message_of_two_keys_still_answers_a_call():
    bare = {"role": "tool", "content": "r"}  # no tool_call_id: answers a call of id None
    assert is_tool_result(bare) and dangling([bare])["orphaned"] == (None,)
    assert safe_cuts([user(), bare]) == (0,)


def test_turn_groups_keep_a_leading_system_message_apart():
    t = [SYS, user("1"), calls("c"), result("c"), said(), user("2")]
    assert [len(g) for g in turn_groups(t)] == [1, 4, 1]
    assert [len(g) for g in turn_groups([said(), user()])] == [1, 1]
    assert turn_groups([SYS, said(), user()]) == ([SYS], [said()], [user()])
    assert turn_groups([]) == ()


def test_repair_answers_open_calls_in_the_callers_dialect():
    anthropic = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f",
                                                   "input": {}}]}  # fmt: skip
    fixed = repair([user(), anthropic])
    assert fixed[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": INTERRUPTED, "is_error": True}
        ],
    }
    fixed = repair([user(), calls("a", "b"), result("b")])
    assert [m.get("tool_call_id") for m in fixed[2:]] == ["b", "a"]
    assert fixed[-1]["content"] == INTERRUPTED


def test_repair_merges_synthesized_results_before_the_users_text():
    anthropic = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
        ],
    }
    answer = {
        "role": "user",
        "content": [
            {"type": "text", "text": "also"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
        ],
    }
    for after in ([], [said()]):  # closed at the end, or when the next message comes
        fixed = repair([user(), anthropic, answer, *after])
        assert len(fixed) == 3 + len(after) and fixed[2]["role"] == "user"
        assert [b.get("tool_use_id", b["type"]) for b in fixed[2]["content"]] == [
            "t1", "t2", "text"]  # fmt: skip
        assert fixed[3:] == after


def test_repair_merges_into_a_responses_turns_results_message():
    def call(i):
        return {"type": "function_call", "call_id": i, "name": "w", "arguments": "{}"}

    def output(i, text):
        return {"type": "function_call_output", "call_id": i, "output": text}

    turn = {"role": "assistant", "items": [call("c1"), call("c2")]}
    answered = {"role": "tool", "items": [output("c1", "sunny")]}
    for after in ([], [said()]):
        fixed = repair([user(), turn, answered, *after])
        merged = [output("c1", "sunny"), output("c2", INTERRUPTED)]
        assert fixed[2] == {"role": "tool", "items": merged}
        assert fixed[3:] == after and len(fixed) == 3 + len(after)


def test_repair_drops_results_of_calls_not_just_made():
    t = [user(), calls("a"), result("a"), result("a"), said()]
    assert repair(t) == [user(), calls("a"), result("a"), said()]
    orphan = {"type": "tool_result", "tool_use_id": "zz", "content": "x"}
    kept = {"role": "user", "content": [orphan, {"type": "text", "text": "hi"}]}
    assert repair([kept]) == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    fine = freeze_transcript([user(), calls("a"), result("a"), said()])
    assert repair(fine) is fine


def test_open_calls_reads_the_last_turn():
    assert open_calls([]) == ()
    assert open_calls([user(), calls("a", "b"), result("a")]) == ("b",)
    assert open_calls([calls("x"), result("x"), user(), calls("y")]) == ("y",)
    assert open_calls([calls("a", "b"), result("a"), result("z")]) == ("b",)


def test_dangling_names_both_kinds():
    d = dangling([calls("a", "b"), result("b"), result("z"), user(), calls("c")])
    assert d == {"unanswered": ("a", "c"), "orphaned": ("z",)}


# ---- readable: what a store reads back ------------------------------------------------


def test_readable_bounds_the_utf8_size():
    assert readable("a" * 10, bound=10) == "a" * 10
    with pytest.raises(TranscriptFormatError, match="^a message is 11 bytes as JSON, over the 10"):
        readable("a" * 11, bound=10)
    assert readable("é" * 5, bound=10) == "é" * 5  # 10 bytes in UTF-8
    with pytest.raises(TranscriptFormatError, match="is 12 bytes"):
        readable("é" * 6, bound=10)
    assert readable(b"x" * 10, bound=10) == b"x" * 10
    with pytest.raises(TranscriptFormatError, match="^a turn is 1,001 bytes as JSON"):
        readable(b"x" * 1001, "a turn", bound=1000)


def test_readable_names_a_lone_surrogate_and_where_it_is():
    with pytest.raises(TranscriptFormatError,
                       match=r"^a reply holds a lone surrogate \('\\ud800' at 2\)"):  # fmt: skip
        readable("ab\ud800", "a reply")


def test_a_pvector_of_plain_dicts_is_frozen_to_pmaps():
    """freeze_transcript returns pmaps inside, also when handed a pvector of dicts."""
    from pyrsistent import pvector

    from toolnexus.core.frozen import FrozenMap
    from toolnexus.core.transcript import freeze_transcript

    t = freeze_transcript(pvector([{"role": "user", "content": "hi"}]))
    assert type(t[0]) is not dict and isinstance(t[0], FrozenMap)
    assert t[0] == {"role": "user", "content": "hi"}
