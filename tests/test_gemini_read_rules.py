"""Decoding Gemini's answers (core/wire/gemini_read.py), rule by rule: each finishReason's
end, usage, the ids of calls the API left without one, the parts kept, refusals and
blocked prompts, malformed answers, and the stream's accumulator event by event. Pure,
no I/O."""

from __future__ import annotations

import hashlib
import json

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import gemini_read as GR
from toolnexus.core.wire.common import MalformedResponse


def _answer(*parts, reason="STOP", **more):
    candidate = {"content": {"role": "model", "parts": list(parts)}, "finishReason": reason}
    return {"candidates": [candidate], **more}


FILTERED = (
    "SAFETY",
    "RECITATION",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "MODEL_ARMOR",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "JAILBREAK",
)


def test_the_ends_of_each_finish_reason():
    assert dict(GR.ENDS) == {
        "STOP": None,
        "MAX_TOKENS": "max_tokens",
        **{r: "refusal" for r in FILTERED},
    }
    assert GR._end(None) is None and GR._end("STOP") is None
    assert GR._end("MAX_TOKENS") == "max_tokens" and GR._end("SPII") == "refusal"
    assert GR._end("MALFORMED_FUNCTION_CALL") == "incomplete" and GR._end("OTHER") == "incomplete"


@pytest.mark.parametrize(
    ("reason", "end"),
    [("STOP", None), ("MAX_TOKENS", "max_tokens"), ("OTHER", "incomplete"), (None, None),
     (5, None)],
)  # fmt: skip
def test_an_answer_ends_by_its_finish_reason(reason, end):
    t = GR.parse_response(_answer({"text": "hi"}, reason=reason))
    assert (t["end"], t["finish"], t["refusal"]) == (end, reason if reason != 5 else None, None)


# ---- usage -----------------------------------------------------------------------------


def test_usage_counts_tool_prompts_as_input_and_thoughts_as_output():
    u = {
        "promptTokenCount": 10,
        "toolUsePromptTokenCount": 5,
        "candidatesTokenCount": 3,
        "thoughtsTokenCount": 2,
        "cachedContentTokenCount": 4,
    }
    assert dict(GR._usage(u)) == {
        "prompt_tokens": 15,
        "completion_tokens": 5,
        "total_tokens": 20,
        "cache_read_tokens": 4,
        "reasoning_tokens": 2,
    }
    junk = {"promptTokenCount": True, "toolUsePromptTokenCount": -2, "candidatesTokenCount": 1.5,
            "thoughtsTokenCount": 0}  # fmt: skip
    assert dict(GR._usage(junk)) == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert dict(GR._usage({"promptTokenCount": 1})) == {
        "prompt_tokens": 1,
        "completion_tokens": 0,
        "total_tokens": 1,
    }
    assert dict(GR._usage([1])) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    t = GR.parse_response(_answer({"text": "x"}, usageMetadata={"candidatesTokenCount": 7}))
    assert t["usage"]["completion_tokens"] == 7


def test_count_takes_positive_integers_only():
    assert GR._count(1) and GR._count(10**12)
    for x in (0, -1, True, 1.0, "3", None):
        assert not GR._count(x)


# ---- calls -----------------------------------------------------------------------------


def _digest(parts) -> str:
    text = json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.blake2b(text, digest_size=6).hexdigest()


def test_a_call_without_an_id_is_named_by_the_response_id_and_its_place():
    assert GR._call_id("r1", 0, set()) == "call_r1_0"
    assert GR._call_id("", 2, set()) == "call_2"
    taken = {"call_r_1"}
    assert GR._call_id("r", 1, taken) == "call_r_1_2" and "call_r_1_2" in taken
    long = GR._call_id("x" * 70, 3, set())
    assert long == ("call_" + "x" * 70)[:64] and len(long) == 64
    assert GR._call_id("x" * 70, 3, {long}) == long[:62] + "_2"


def test_the_seed_is_a_plain_response_id_else_a_hash_of_the_parts():
    parts = [{"functionCall": {"name": "f"}}]
    assert GR._seed({"responseId": "ab-c_D9"}, parts) == "ab-c_D9"
    assert GR._seed({"responseId": "r" * 50}, parts) == "r" * 40
    for rid in (None, "", "a b", "a/b", "-_", 5):
        assert GR._seed({"responseId": rid}, parts) == _digest(parts)
    assert len(_digest(parts)) == 12


def test_calls_are_read_with_ids_names_and_arguments():
    parts = [
        {"functionCall": {"name": "f", "args": {"a": 1}}},
        {"functionCall": {"id": "", "name": ["g"]}},
        {"functionCall": {"id": "d", "name": "h", "args": None}},
        {
            "functionCall": {"id": "d", "name": "h", "args": "not an object"},
            "thoughtSignature": "s",
        },
        {"functionCall": {"id": "e", "name": "k", "args": {}}},
    ]
    t = GR.parse_response(_answer(*parts, responseId="resp"))
    assert thaw(t["tool_calls"]) == [
        {"id": "call_resp_0", "name": "f", "arguments": {"a": 1}},
        {"id": "call_resp_1", "name": '["g"]', "arguments": {}},
        {"id": "d", "name": "h", "arguments": {}},
        {"id": "d_2", "name": "h", "arguments": "not an object"},
        {"id": "e", "name": "k", "arguments": {}},
    ]
    kept = thaw(t["message"]["parts"])
    assert kept == [
        {"functionCall": {"name": "f", "args": {"a": 1}, "id": "call_resp_0"}},
        {"functionCall": {"id": "call_resp_1", "name": '["g"]', "args": {}}},
        {"functionCall": {"id": "d", "name": "h", "args": {}}},
        {"functionCall": {"id": "d_2", "name": "h", "args": {}}, "thoughtSignature": "s"},
        parts[4],
    ]


def test_calls_without_ids_and_without_a_response_id_share_one_hash():
    parts = [{"functionCall": {"name": "f"}}, {"functionCall": {"name": "f"}}]
    t = GR.parse_response(_answer(*parts))
    seed = _digest(parts)
    assert [c["id"] for c in t["tool_calls"]] == [f"call_{seed}_0", f"call_{seed}_1"]
    assert thaw(t["message"]["parts"][0]) == {"functionCall": {"name": "f", "id": f"call_{seed}_0",
                                                               "args": {}}}  # fmt: skip


def test_a_long_given_id_stays_64_characters_when_made_unique():
    call = {"functionCall": {"id": "x" * 64, "name": "f"}}
    _, _, calls = GR._read_parts({}, [call, call])
    assert [c["id"] for c in calls] == ["x" * 64, "x" * 62 + "_2"]


def test_a_call_without_args_is_kept_as_it_came():
    part = {"functionCall": {"id": "a", "name": "f"}}
    kept, _, calls = GR._read_parts({}, [part])
    assert kept[0] is part and calls == [{"id": "a", "name": "f", "arguments": {}}]


def test_a_kept_part_is_the_same_object_when_nothing_changes():
    part = {"functionCall": {"id": "a", "name": "f", "args": {"x": 1}}}
    kept, text, calls = GR._read_parts({}, [part, {"text": "a"}, {"text": "b", "thought": True},
                                            {"text": "c", "thought": False}])  # fmt: skip
    assert kept[0] is part and text == "ac" and calls == [{"id": "a", "name": "f",
                                                           "arguments": {"x": 1}}]  # fmt: skip


# ---- answers, refusals, blocked prompts ------------------------------------------------


def test_an_answer_reads_as_its_text_parts_and_model():
    parts = [{"text": "think", "thought": True}, {"text": "a"}, {"text": "b"}, {"inlineData": {}}]
    t = GR.parse_response(_answer(*parts, modelVersion="gemini-x"))
    assert t["text"] == "ab" and t["model"] == "gemini-x" and t["finish"] == "STOP"
    assert thaw(t["message"]) == {"role": "assistant", "parts": parts}
    assert GR.parse_response(_answer({"text": "a"}, modelVersion=3))["model"] is None


def test_an_answer_without_parts_is_the_empty_answer():
    for data in ({}, {"candidates": []}, {"candidates": None}, {"candidates": [{}]},
                 {"candidates": [{"content": "x"}]}, _answer()):  # fmt: skip
        t = GR.parse_response(data)
        assert dict(t["message"]) == {"role": "assistant", "content": ""} and t["text"] == ""


@pytest.mark.parametrize("reason", FILTERED)
def test_a_filtered_answer_is_a_refusal(reason):
    t = GR.parse_response(_answer(reason=reason))
    assert (t["refusal"], t["end"], t["finish"]) == (f"blocked by Gemini: {reason}", None, reason)


def test_a_refusal_says_the_text_else_the_finish_message_else_the_reason():
    t = GR.parse_response(_answer({"text": "sorry"}, reason="SAFETY"))
    assert t["refusal"] == "sorry" and t["text"] == "sorry"
    data = _answer(reason="RECITATION")
    data["candidates"][0]["finishMessage"] = "quoted"
    assert GR.parse_response(data)["refusal"] == "quoted"
    data["candidates"][0]["finishMessage"] = 5
    assert GR.parse_response(data)["refusal"] == "blocked by Gemini: RECITATION"
    data["candidates"][0]["finishMessage"] = "quoted"
    data["candidates"][0]["finishReason"] = "STOP"
    assert GR.parse_response(data)["refusal"] is None


def test_a_blocked_prompt_is_a_refusal_naming_its_block_reason():
    t = GR.parse_response({"promptFeedback": {"blockReason": "OTHER"}})
    assert (t["refusal"], t["end"], t["finish"]) == ("blocked by Gemini: OTHER", None, "OTHER")
    t = GR.parse_response({**_answer({"text": "x"}), "promptFeedback": {"blockReason": "SAFETY"}})
    assert (t["refusal"], t["finish"]) == ("x", "SAFETY")
    for feedback in ({"blockReason": ""}, {"blockReason": 3}, "SAFETY", {}):
        assert GR._blocked({"promptFeedback": feedback}) is None
    assert GR._blocked({}) is None


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"candidates": {}}, "candidates is not an array"),
        ({"candidates": ["x"]}, "candidates[0] is not an object"),
        ({"candidates": [{"content": {"parts": {}}}]}, "content.parts is not an array"),
        (_answer("x"), "parts[0] is a JSON str, not an object"),
        (_answer({"text": "a"}, 3), "parts[1] is a JSON int, not an object"),
        ("[]", "response is a JSON list, not an object"),
        ({"candidates": [{"content": {"parts": [{"functionCall": {"name": {1, 2}}}]}}]},
         "malformed response: TypeError"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_refused_naming_what(data, said):
    with pytest.raises(MalformedResponse) as e:
        GR.parse_response(data)
    assert str(e.value) == said


def test_an_answer_is_read_from_its_json_text_and_tuples_are_arrays():
    raw = json.dumps(_answer({"text": "hi"})).encode()
    assert GR.parse_response(raw)["text"] == "hi"
    data = {"candidates": ({"content": {"parts": ({"text": "t"},)}, "finishReason": "STOP"},)}
    assert GR.parse_response(data)["text"] == "t"
    data = {"candidates": pvector([{"content": {"parts": pvector([{"text": "p"}])}}])}
    assert GR.parse_response(data)["text"] == "p"


def test_an_error_envelope_is_the_providers_error():
    with pytest.raises(ProviderError) as e:
        GR.parse_response({"error": {"code": 404, "message": "no model", "status": "NOT_FOUND"}})
    assert str(e.value) == "no model" and e.value.status == 404


# ---- streaming -------------------------------------------------------------------------


def _event(data) -> dict:
    return {"data": data if isinstance(data, str) else json.dumps(data)}


def _chunk(*parts, **more):
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)}, **more}]}


def test_a_stream_starts_empty():
    acc = GR.stream_start()
    assert acc == GR.GeminiStream()
    assert (acc.parts, dict(acc.last), acc.reason, acc.finish_message) == (pvector(), {}, None,
                                                                            None)  # fmt: skip


@pytest.mark.parametrize(
    ("last", "p", "joins"),
    [
        ({"text": "a"}, {"text": "b"}, True),
        ({"text": "a", "thought": True}, {"text": "b", "thought": True}, True),
        ({"text": "a", "thoughtSignature": "s"}, {"text": "b"}, True),
        ({"text": "a"}, {"text": "b", "thoughtSignature": "s"}, False),
        ({"text": "a"}, {"text": "b", "thought": True}, False),
        ({"text": "a", "thought": True}, {"text": "b"}, False),
        ({"text": "a", "thought": False}, {"text": "b"}, True),
        (
            {"text": "a", "thought": True, "thoughtSignature": "s"},
            {"text": "b", "thought": True},
            True,
        ),
        (
            {"text": "a", "thought": True},
            {"text": "b", "thought": True, "thoughtSignature": ""},
            True,
        ),
        ({"text": "a"}, {"text": 3}, False),
        ({"text": 3}, {"text": "b"}, False),
        ({"functionCall": {}}, {"text": "b"}, False),
        ({"text": "a", "x": 1}, {"text": "b"}, False),
        ({"text": "a"}, {"text": "b", "x": 1}, False),
    ],
)
def test_a_streamed_text_part_joins_the_one_before_it(last, p, joins):
    assert GR._joins(last, p) is joins


def test_stream_events_give_deltas_and_join_parts():
    acc = GR.stream_start()
    acc, d = GR.stream_event(acc, _event(_chunk({"text": "th", "thought": True})))
    assert [dict(x) for x in d] == [{"type": "thinking", "delta": "th"}]
    acc, d = GR.stream_event(acc, _event(_chunk({"text": "ink", "thought": True}, {"text": "a"})))
    assert [dict(x) for x in d] == [{"type": "thinking", "delta": "ink"},
                                    {"type": "text", "delta": "a"}]  # fmt: skip
    acc, d = GR.stream_event(acc, _event(_chunk({"text": ""}, {"text": "b"})))
    assert [dict(x) for x in d] == [{"type": "text", "delta": "b"}]
    call = {"functionCall": {"id": "c", "name": "f", "args": {}}}
    acc, d = GR.stream_event(acc, _event(_chunk(call, {"functionCall": {"name": ["g"]}})))
    assert [dict(x) for x in d] == [
        {"type": "tool_call_start", "index": 0, "id": "c", "name": "f"},
        {"type": "tool_call_start", "index": 1, "id": None, "name": '["g"]'},
    ]
    acc, d = GR.stream_event(acc, _event(_chunk({"text": "", "thoughtSignature": "s"})))
    assert d == ()
    assert thaw(acc.parts) == [{"text": "think", "thought": True}, {"text": "ab"}, call,
                               {"functionCall": {"name": ["g"]}},
                               {"text": "", "thoughtSignature": "s"}]  # fmt: skip
    assert acc.reason is None


def test_a_stream_keeps_the_latest_chunk_its_reason_and_finish_message():
    acc = GR.stream_start()
    first = {**_chunk({"text": "a"}, finishMessage="m1"), "modelVersion": "v"}
    acc, _ = GR.stream_event(acc, _event(first))
    assert acc.last == first and acc.finish_message == "m1" and acc.reason is None
    acc, _ = GR.stream_event(acc, _event(_chunk(finishReason="STOP", finishMessage=3)))
    assert acc.reason == "STOP" and acc.finish_message == "m1"
    acc, _ = GR.stream_event(acc, _event(_chunk(finishReason=5)))
    assert acc.reason == "STOP"
    acc, _ = GR.stream_event(acc, _event({"promptFeedback": {"blockReason": "SAFETY"}}))
    assert acc.reason == "SAFETY"
    acc, d = GR.stream_event(acc, _event({"candidates": "x"}))
    assert d == () and acc.last == {"candidates": "x"}
    acc, d = GR.stream_event(acc, _event({"candidates": [{"content": "x"}]}))
    assert d == ()


def test_empty_and_done_events_change_nothing():
    acc = GR.stream_start()._replace(reason="STOP")
    for raw in ("", "  \n", "[DONE]", " [DONE] "):
        got, d = GR.stream_event(acc, {"data": raw})
        assert got is acc and d == ()


def test_an_error_chunk_is_a_provider_error_and_a_bad_part_is_malformed():
    error = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    with pytest.raises(ProviderError) as e:
        GR.stream_event(GR.stream_start(), _event(error))
    assert str(e.value) == "quota" and e.value.status == 429
    with pytest.raises(MalformedResponse) as e:
        GR.stream_event(GR.stream_start(), _event(_chunk("x")))
    assert str(e.value) == "a streamed part is not an object"
    with pytest.raises(MalformedResponse) as e:
        GR.stream_event(GR.stream_start(), {})
    assert str(e.value) == "malformed stream event: KeyError"


def test_stream_turn_is_the_answer_the_stream_stands_for():
    with pytest.raises(ProviderError) as e:
        GR.stream_turn(GR.stream_start())
    assert str(e.value) == "the stream ended before its final event (no finishReason)"
    assert e.value.network is True
    acc = GR.GeminiStream(parts=pvector([{"text": "hi"}]), last={"modelVersion": "v",
                                                                 "candidates": "old"},
                          reason="MAX_TOKENS")  # fmt: skip
    t = GR.stream_turn(acc)
    assert (t["text"], t["model"], t["end"], t["finish"]) == ("hi", "v", "max_tokens", "MAX_TOKENS")
    said = GR.stream_turn(acc._replace(reason="SAFETY", finish_message="why"))
    assert said["refusal"] == "hi"
    said = GR.stream_turn(acc._replace(parts=pvector(), reason="SAFETY", finish_message="why"))
    assert said["refusal"] == "why"
    blocked = acc._replace(parts=pvector(), last={"promptFeedback": {"blockReason": "OTHER"}},
                           reason="OTHER")  # fmt: skip
    t = GR.stream_turn(blocked)
    assert (t["refusal"], t["finish"], t["end"]) == ("blocked by Gemini: OTHER", "OTHER", None)
    # a blocked prompt's reason is not the candidate's: a candidate reason would win as finish
    t = GR.stream_turn(blocked._replace(reason="STOP"))
    assert t["finish"] == "OTHER"
