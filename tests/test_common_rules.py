"""The rules of core/wire/common.py no other test asserts: the malformed-response boundary
and its messages, text and names read from content, token counts from junk, usage sums,
the compact JSON of frozen values, message texts kept and reused in a request body
(moved messages found within reach, `known` values only while they are the same), the
turn's fields, a refusal's words, merging streamed fields, empty answers and blocks,
cleaning a transcript for replay, forced tool choices, and distinct call ids."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap, known_json
from toolnexus.core.wire.common import (
    DETAILS,
    EMPTY_ANSWER,
    MALFORMED,
    ZERO_USAGE,
    MalformedResponse,
    add_usage,
    encode_body,
    is_empty_answer,
    is_empty_text_block,
    is_forced_choice,
    malformed,
    merge_extra,
    message_json,
    message_text,
    name_text,
    refusal_text,
    replayable_with,
    response_object,
    stream_cut,
    text_of,
    to_json,
    turn,
    unique_id,
    usage,
)
from toolnexus.core.wire.inband import InBandError

PVECTOR = type(pvector())


# ---- the malformed-response boundary -------------------------------------------------------


def test_what_counts_as_malformed():
    assert MALFORMED == (
        TypeError,
        AttributeError,
        KeyError,
        IndexError,
        ValueError,
        OverflowError,
        RecursionError,
    )
    assert issubclass(MalformedResponse, ProviderError) and issubclass(
        MalformedResponse, ValueError
    )


def test_malformed_names_the_exception_s_type_only():
    e = malformed(KeyError("sk-secret"))
    assert type(e) is MalformedResponse and str(e) == "malformed response: KeyError"
    assert str(malformed(IndexError(), "stream event")) == "malformed stream event: IndexError"
    already = ProviderError("x")
    assert malformed(already) is already


@pytest.mark.parametrize("data", [b'{"a": 1}', bytearray(b'{"a": 1}'), '{"a": 1}'])
def test_a_response_body_is_read_as_json(data):
    assert response_object(data) == {"a": 1}


def test_a_response_object_is_its_own_value():
    obj = {"a": 1}
    assert response_object(obj) is obj


def test_a_response_that_is_not_an_object_says_why():
    with pytest.raises(MalformedResponse) as e:
        response_object(b"{")
    assert str(e.value).startswith("response is not readable JSON (Expecting")
    assert e.value.__cause__ is None and e.value.__suppress_context__
    for data, kind in ((b"[1]", "list"), ([1], "list"), (5, "int"), (b"null", "NoneType")):
        with pytest.raises(MalformedResponse) as e:
            response_object(data)
        assert str(e.value) == f"response is a JSON {kind}, not an object"


def test_an_error_envelope_in_a_response_is_its_error():
    with pytest.raises(InBandError) as e:
        response_object(b'{"error": {"message": "down", "code": 502}}')
    assert str(e.value) == "down" and e.value.status == 502


# ---- text, names, usage ---------------------------------------------------------------------


def test_text_of_each_shape_of_content():
    assert text_of("hi") == "hi" and text_of(None) == ""
    parts = [
        "a",
        {"type": "text", "text": "b"},
        {"type": "output_text", "text": "c"},
        {"type": "text", "text": 5},
        {"type": "image", "text": "x"},
        {"text": "y"},
        7,
    ]
    assert text_of(parts) == "abc"
    assert text_of(tuple(parts)) == "abc" and text_of(pvector(parts)) == "abc"
    assert text_of([]) == ""


@pytest.mark.parametrize("content, kind", [(5, "int"), ({"text": "a"}, "dict"), (b"x", "bytes")])
def test_content_that_is_not_text_is_malformed(content, kind):
    with pytest.raises(MalformedResponse) as e:
        text_of(content, "choices[0].message.content")
    assert str(e.value) == f"choices[0].message.content is a JSON {kind}, not text"
    with pytest.raises(MalformedResponse, match=f"^content is a JSON {kind}, not text$"):
        text_of(content)


def test_a_name_as_text():
    assert name_text("add") == "add" and name_text(None) == "" and name_text("") == ""
    assert name_text({"a": ["é"]}) == '{"a":["é"]}' and name_text(5) == "5"


@pytest.mark.parametrize(
    "raw, count",
    [
        (3, 3),
        (0, 0),
        (-4, 0),
        (True, 0),
        (False, 0),
        (2.9, 2),
        (-1.5, 0),
        (float("nan"), 0),
        (float("inf"), 0),
        ("12", 0),
        ([1], 0),
        (None, 0),
    ],
)
def test_a_token_count_from_junk_is_zero(raw, count):
    assert usage(raw, 0)["prompt_tokens"] == count
    assert usage(0, raw)["completion_tokens"] == count
    if raw is not None:  # None: not reported, no detail
        assert usage(0, 0, cache_read=raw)["cache_read_tokens"] == count


def test_usage_s_details_only_where_reported():
    assert DETAILS == ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    assert (
        usage(None, None)
        == ZERO_USAGE
        == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    )
    u = usage(5, 2, cache_write=1)
    assert u == {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "total_tokens": 7,
        "cache_write_tokens": 1,
    }
    assert type(u) is FrozenMap and type(usage(1, 1)) is FrozenMap
    assert list(usage(1, 1, reasoning=3, cache_read=4)) == [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cache_read_tokens",
        "reasoning_tokens",
    ]


def test_adding_usage_sums_each_detail_either_reports():
    a = usage(1, 2, cache_read=3)
    b = usage(10, 20, reasoning=5)
    total = add_usage(a, b)
    assert total == {
        "prompt_tokens": 11,
        "completion_tokens": 22,
        "total_tokens": 33,
        "cache_read_tokens": 3,
        "reasoning_tokens": 5,
    }
    assert type(total) is FrozenMap
    assert add_usage({}, {}) == ZERO_USAGE
    assert add_usage({"total_tokens": 99}, {})["total_tokens"] == 0  # recomputed


# ---- JSON ------------------------------------------------------------------------------------


def test_to_json_is_compact_utf8_of_frozen_and_read_only_values():
    value = {
        "v": pvector([1, ("é", None)]),
        "m": MappingProxyType({"b": 1, "a": 2}),
        "f": FrozenMap({"x": 1.5}),
    }
    assert to_json(value) == '{"v":[1,["é",null]],"m":{"b":1,"a":2},"f":{"x":1.5}}'.encode()
    assert message_text(value) == to_json(value).decode()
    with pytest.raises(TypeError) as e:
        to_json({"s": {1}})
    assert str(e.value) == "set is not JSON serializable"
    with pytest.raises(TypeError):  # a key JSON cannot write is an error, never dropped
        to_json({(1, 2): "x"})


def test_a_frozen_message_keeps_its_json_and_a_dict_does_not():
    m = FrozenMap({"role": "user", "content": "é"})
    text = message_json(m)
    assert text == '{"role":"user","content":"é"}'.encode() and known_json(m) is text
    assert message_json(m) is text
    assert message_json({"role": "user"}) == b'{"role":"user"}'
    with pytest.raises(UnicodeEncodeError):
        message_json({"content": "\ud83d"})


def _m(i: int) -> FrozenMap:
    return FrozenMap({"role": "user", "content": str(i)})


def _spaced(m) -> bytes:
    return json.dumps(m).encode()  # the same JSON with spaces: tells a reused text apart


def test_a_body_reuses_the_texts_of_the_state_s_own_messages():
    msgs = pvector([_m(1), _m(2)])
    texts = [_spaced(m) for m in msgs]
    body = {"model": "x", "messages": msgs, "n": 1}
    out = encode_body(body, msgs, texts)
    assert out == b'{"model":"x","messages":[' + b",".join(texts) + b'],"n":1}'
    assert json.loads(out) == json.loads(to_json(body))
    plain = encode_body(body)
    one, two = b'{"role":"user","content":"1"}', b'{"role":"user","content":"2"}'
    assert plain == b'{"model":"x","messages":[' + one + b"," + two + b'],"n":1}'
    assert encode_body(body, msgs, None) == plain
    assert encode_body(body, None, texts) == plain


def test_a_body_with_a_system_message_first_reuses_the_rest():
    msgs = pvector([_m(1), _m(2)])
    texts = [_spaced(m) for m in msgs]
    system = FrozenMap({"role": "system", "content": "s"})
    out = encode_body({"messages": [system, *msgs]}, msgs, texts)
    assert out == b'{"messages":[{"role":"system","content":"s"},' + b",".join(texts) + b"]}"


def test_moved_messages_are_found_within_reach():
    msgs = [_m(i) for i in range(12)]
    texts = [_spaced(m) for m in msgs]
    # the body keeps message 0, drops 1..7 and keeps 8: 8 past it, within reach
    out = encode_body({"messages": [msgs[0], msgs[8]]}, msgs, texts)
    assert out == b'{"messages":[' + texts[0] + b"," + texts[8] + b"]}"
    # 9 is 9 past message 0: out of reach, encoded again (the same JSON, compact)
    out = encode_body({"messages": [msgs[0], msgs[9], msgs[10]]}, msgs, texts)
    again = message_json(msgs[9]) + b"," + message_json(msgs[10])
    assert out == b'{"messages":[' + texts[0] + b"," + again + b"]}"
    other = _m(99)
    out = encode_body({"messages": [other, msgs[1], msgs[0]]}, msgs, texts)
    assert (
        out
        == b'{"messages":['
        + message_json(other)
        + b","
        + texts[1]
        + b","
        + message_json(msgs[0])
        + b"]}"
    )


def test_an_empty_message_list_and_other_keys():
    assert encode_body({"messages": []}, [], []) == b'{"messages":[]}'
    assert (
        encode_body({"a": 1, "messages": pvector(), "b": 2}, pvector(), [])
        == b'{"a":1,"messages":[],"b":2}'
    )
    assert encode_body({"messages": "text"}, [], []) == b'{"messages":"text"}'
    assert encode_body({}) == b"{}"
    assert encode_body({"a": 1, "b": [2], "c": None}) == b'{"a":1,"b":[2],"c":null}'
    m = pvector([_m(1)])
    body = {"a": 1, "b": 2, "messages": m, "c": 3, "d": 4}
    assert encode_body(body, m, [b"T"]) == b'{"a":1,"b":2,"messages":[T],"c":3,"d":4}'
    assert encode_body({"é": "ü"}) == '{"é":"ü"}'.encode()


def test_known_values_are_reused_only_while_they_are_the_same():
    tools = pvector([FrozenMap({"name": "t"})])
    known = {"tools": (tools, b'["KNOWN"]'), "other": (1, '"STR"')}
    assert encode_body({"tools": tools}, known=known) == b'{"tools":["KNOWN"]}'
    assert (
        encode_body({"tools": pvector([FrozenMap({"name": "t"})])}, known=known)
        == b'{"tools":[{"name":"t"}]}'
    )
    assert encode_body({"other": 1}, known=known) == b'{"other":"STR"}'
    assert encode_body({"tools": tools}, known={}) == b'{"tools":[{"name":"t"}]}'


# ---- turns and errors ----------------------------------------------------------------------


def test_a_turn_s_fields():
    calls = [{"id": "c", "name": "f", "arguments": "{}"}]
    t = turn(
        {"role": "assistant", "content": ["x"]},
        "x",
        calls,
        ZERO_USAGE,
        "stop",
        "m",
        end="pause",
        refusal="r",
    )
    assert list(t) == [
        "message",
        "text",
        "tool_calls",
        "usage",
        "finish",
        "model",
        "end",
        "refusal",
    ]
    assert type(t["message"]) is FrozenMap and type(t["message"]["content"]) is PVECTOR
    assert type(t["tool_calls"]) is PVECTOR and type(t["tool_calls"][0]) is FrozenMap
    assert (t["text"], t["finish"], t["model"], t["end"], t["refusal"]) == (
        "x",
        "stop",
        "m",
        "pause",
        "r",
    )
    assert t["usage"] is ZERO_USAGE
    frozen = pvector([FrozenMap(calls[0])])
    assert turn({}, "", frozen, ZERO_USAGE, None, None)["tool_calls"] is frozen
    assert turn({}, "", (c for c in calls), ZERO_USAGE, None, None)["tool_calls"] == calls
    bare = turn({}, "", [], ZERO_USAGE, None, None)
    assert bare["end"] is None and bare["refusal"] is None


def test_a_refusal_s_words_are_a_400_s_body_and_message():
    e = ProviderError("Bad Thing", status=400, body='{"Error": "Too BIG"}')
    assert refusal_text(e) == '{"error": "too big"} bad thing'
    assert refusal_text(ProviderError(" X ", status=400)) == "x"
    assert refusal_text(ProviderError("x", status=413)) is None
    assert refusal_text(ProviderError("x")) is None
    assert refusal_text(ValueError("x")) is None


def test_a_cut_stream_is_a_network_error():
    e = stream_cut("message_stop")
    assert type(e) is ProviderError and e.network is True
    assert str(e) == "the stream ended before its final event (message_stop)"


# ---- merging streamed fields ----------------------------------------------------------------


def test_merge_extra_of_plain_values():
    assert merge_extra("a", None) == "a" and merge_extra(None, "b") == "b"
    assert merge_extra("a", "b") == "ab" and merge_extra("a", "b", concat=False) == "b"
    assert merge_extra({"a": 1}, 5) == 5 and merge_extra(5, {"a": 1}) == {"a": 1}
    assert merge_extra("s", {"a": 1}) == {"a": 1}
    assert merge_extra(1, 2) == 2 and merge_extra("a", 5) == 5 and merge_extra([1], "x") == "x"


def test_merge_extra_of_lists_merges_fragments_of_one_index():
    old = [{"index": 0, "type": "t", "text": "a", "id": "x"}]
    new = [
        {"index": 0, "text": "b", "id": "x", "signature": None},
        {"index": 1, "text": "c"},
        {"index": 1, "text": "d"},
        {"text": "e"},
        {"text": "f"},
        "g",
    ]
    assert merge_extra(old, new) == [
        {"index": 0, "type": "t", "text": "ab", "id": "x", "signature": None},
        {"index": 1, "text": "cd"},
        {"text": "e"},
        {"text": "f"},
        "g",
    ]
    assert old == [{"index": 0, "type": "t", "text": "a", "id": "x"}]  # not changed
    assert merge_extra((1,), pvector([2])) == [1, 2] and merge_extra([], [{"index": 0}]) == [
        {"index": 0}
    ]
    assert merge_extra(["s"], [{"index": 0}]) == ["s", {"index": 0}]


def test_merge_extra_of_maps_joins_only_text_like_fields():
    old = {
        "id": "r1",
        "text": "a",
        "summary": "s",
        "data": "d",
        "content": "c",
        "thinking": "t",
        "transcript": "x",
        "n": 1,
    }
    new = {
        "id": "r1",
        "text": "b",
        "summary": "2",
        "data": "3",
        "content": "4",
        "thinking": "5",
        "transcript": "6",
        "n": None,
        "new": "k",
    }
    assert merge_extra(old, new) == {
        "id": "r1",
        "text": "ab",
        "summary": "s2",
        "data": "d3",
        "content": "c4",
        "thinking": "t5",
        "transcript": "x6",
        "n": 1,
        "new": "k",
    }


# ---- empty answers and replay ---------------------------------------------------------------


def test_the_empty_answer():
    assert EMPTY_ANSWER == {"role": "assistant", "content": ""} and type(EMPTY_ANSWER) is FrozenMap


@pytest.mark.parametrize(
    "message, empty",
    [
        ({"role": "assistant", "content": ""}, True),
        ({"role": "assistant", "content": None}, True),
        ({"role": "assistant"}, True),
        ({"role": "assistant", "content": []}, True),
        ({"role": "assistant", "content": ({"type": "text", "text": " "},)}, True),
        ({"role": "assistant", "content": pvector([{"type": "text"}])}, True),
        ({"role": "assistant", "content": "x"}, False),
        ({"role": "assistant", "content": [{"type": "text", "text": "x"}]}, False),
        ({"role": "assistant", "content": [{"type": "thinking", "thinking": ""}]}, False),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}, False),
        ({"role": "assistant", "content": "", "tool_calls": []}, True),
        ({"role": "user", "content": ""}, False),
        ({"role": "assistant", "content": {"text": ""}}, False),
    ],
)
def test_what_is_an_empty_answer(message, empty):
    assert is_empty_answer(message) is empty


@pytest.mark.parametrize(
    "block, empty",
    [
        ({"type": "text", "text": ""}, True),
        ({"type": "text"}, True),
        ({"type": "text", "text": " \n\t"}, True),
        ({"type": "text", "text": None}, True),
        ({"type": "text", "text": "x"}, False),
        ({"type": "text", "text": 5}, False),
        ({"type": "image", "text": ""}, False),
        ("", False),
        (None, False),
    ],
)
def test_what_is_an_empty_text_block(block, empty):
    assert is_empty_text_block(block) is empty


def _needs(m) -> bool:
    return m.get("role") == "assistant" and (
        is_empty_answer(m) or any(map(is_empty_text_block, m.get("content") or []))
    )


def test_replay_cleaning_keeps_the_same_object_when_nothing_needs_it():
    msgs = [FrozenMap({"role": "user", "content": "a"})]
    assert replayable_with(msgs, _needs) is msgs


def test_replay_cleaning_drops_empty_answers_and_empty_blocks():
    user = FrozenMap({"role": "user", "content": "a"})
    blocks = FrozenMap(
        {
            "role": "assistant",
            "content": pvector([{"type": "text", "text": " "}, {"type": "text", "text": "b"}]),
        }
    )
    only_empty = FrozenMap(
        {"role": "assistant", "content": ({"type": "text", "text": ""}, {"type": "x"})}
    )
    out = replayable_with([user, EMPTY_ANSWER, blocks, only_empty, EMPTY_ANSWER], _needs)
    assert out == [
        user,
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "x"}]},
    ]
    assert type(out[1]) is FrozenMap and type(out[1]["content"]) is PVECTOR


def test_replay_cleaning_with_a_block_fix_and_a_message_fix():
    m = FrozenMap(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": ""}, {"type": "keep"}, {"type": "drop"}],
        }
    )

    def fix_block(b):
        return None if b["type"] == "drop" else {**b, "fixed": [1]}

    out = replayable_with([m], _needs, fix_block=fix_block)
    assert out == [{"role": "assistant", "content": [{"type": "keep", "fixed": [1]}]}]
    assert (
        type(out[0]["content"][0]) is FrozenMap and type(out[0]["content"][0]["fixed"]) is PVECTOR
    )
    gone = FrozenMap(
        {"role": "assistant", "content": [{"type": "text", "text": ""}, {"type": "drop"}]}
    )
    assert replayable_with([gone], _needs, fix_block=fix_block) == [gone]  # nothing left: kept
    refusal = FrozenMap({"role": "assistant", "content": ""})
    shaped = FrozenMap({"role": "assistant", "content": "I can't"})
    out = replayable_with(
        [refusal, EMPTY_ANSWER], _needs, fix_message=lambda x: shaped if x is refusal else None
    )
    assert out == [shaped]


def test_replay_cleaning_leaves_a_message_of_another_shape():
    odd = FrozenMap({"role": "assistant", "content": {"text": ""}})
    assert replayable_with([odd], lambda m: True) == [odd]


# ---- choices and ids --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice, forced",
    [
        (None, False),
        ("auto", False),
        ("none", False),
        ("required", True),
        ("any", True),
        ({"type": "auto"}, False),
        ({"type": "none"}, False),
        ({"type": "tool", "name": "x"}, True),
        ({"type": "function", "function": {"name": "x"}}, True),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "required"}}, True),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto"}}, False),
        ({"type": "allowed_tools"}, False),
    ],
)
def test_what_forces_a_tool_call(choice, forced):
    assert is_forced_choice(choice) is forced


def test_unique_ids_are_cut_to_their_limit():
    taken: set = set()
    assert unique_id("c", taken) == "c" and unique_id("c", taken) == "c_2"
    assert taken == {"c", "c_2"}
    long = "x" * 40
    taken = {long}
    assert unique_id(long, taken) == "x" * 38 + "_2"
    assert unique_id("abcdef", {"abcdef"}, limit=5) == "abc_2"
    taken = {"a", "a_2", "a_3"}
    assert unique_id("a", taken) == "a_4" and "a_4" in taken
    ten = {"i"} | {f"i_{n}" for n in range(2, 10)}
    assert unique_id("i" * 5, {"i" * 5, "iii_2"}, limit=5) == "iii_3"
    assert unique_id("i", ten) == "i_10"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_infinity_are_refused_not_written_bare(bad):
    # json writes them as NaN / Infinity, which is not JSON: no provider parses it.
    with pytest.raises(ValueError) as e:
        to_json({"temperature": bad})
    assert str(e.value).startswith("not JSON: a value is NaN or Infinity (Out of range float")
    with pytest.raises(ValueError, match="^not JSON: a value is NaN or Infinity"):
        message_json(FrozenMap({"role": "user", "score": pvector([bad])}))
