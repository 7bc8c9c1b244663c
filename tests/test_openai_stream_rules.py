"""The chat completions stream (core/wire/openai_stream.py), rule by rule: the request
asking for a stream, each chunk folded into the accumulator with the deltas it shows,
tool call fragments placed by index or id, and the response a stream amounts to. Pure,
no I/O."""

from __future__ import annotations

import json

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.wire import openai_stream as S
from toolnexus.core.wire.common import MalformedResponse
from toolnexus.core.wire.openai_stream import OpenAIStream, StreamCall


def ev(data, event="message"):
    return {"event": event, "data": data if isinstance(data, str) else json.dumps(data)}


def chunk(delta=None, finish=None, index=0, **more):
    choice = {"index": index, "delta": delta or {}, "finish_reason": finish}
    return {"choices": [choice], **more}


def fold(*chunks, acc=None):
    """Return the accumulator after `chunks` and every delta, as plain dicts."""
    acc = acc or S.stream_start()
    shown = []
    for c in chunks:
        acc, deltas = S.stream_event(acc, ev(c))
        assert type(deltas) is tuple
        shown.extend(dict(d) for d in deltas)
    return acc, shown


def frag(index=None, id=None, name=None, args=None, **more):
    out = {**more}
    if index is not None:
        out["index"] = index
    if id is not None:
        out["id"] = id
    fn = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    if fn:
        out["function"] = fn
    return out


def calls(*fragments):
    return fold(*(chunk({"tool_calls": [f]}) for f in fragments))


def test_stream_body_asks_for_a_stream_ending_in_usage_and_keeps_given_options():
    body = {"model": "m", "stream_options": {"x": 1}}
    assert S.stream_body(body) == {
        "model": "m",
        "stream": True,
        "stream_options": {"x": 1, "include_usage": True},
    }
    assert body == {"model": "m", "stream_options": {"x": 1}}
    given = {"model": "m", "stream_options": {"include_usage": False}, "stream": False}
    assert S.stream_body(given)["stream_options"] == {"include_usage": True}
    assert S.stream_body({"stream_options": None})["stream_options"] == {"include_usage": True}


def test_a_stream_starts_empty():
    acc = S.stream_start()
    assert acc == OpenAIStream(pvector(), pvector(), pvector(), None, None, None, False, None)
    assert StreamCall(0, "a", "f", pvector()) == (0, "a", "f", pvector(), None, None)


def test_done_and_empty_events():
    acc = S.stream_start()
    assert S.stream_event(acc, ev("[DONE]")) == (acc._replace(done=True), ())
    assert S.stream_event(acc, ev(" [DONE]\n"))[0].done is True
    assert S.stream_event(acc, ev("")) == (acc, ())
    assert S.stream_event(acc, ev("  \n"))[0] is acc


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"error": {"message": "boom"}}, "boom"),
        ({"object": "error", "message": "m"}, "m"),
        ({"type": "error", "message": "t"}, "t"),
        ("x", "unreadable stream event (Expecting value: line 1 column 1 (char 0)): x"),
        ({"choices": "x"}, "choices is a JSON str, not an array"),
        ({"choices": [1]}, "choice is a JSON int, not an object"),
        ({"choices": [{"delta": 1}]}, "delta is a JSON int, not an object"),
        (chunk({"content": 5}), "delta.content is a JSON int, not text"),
        (chunk({"refusal": 5}), "delta.refusal is a JSON int, not text"),
        (chunk({"tool_calls": "x"}), "delta.tool_calls is a JSON str, not an array"),
        (chunk({"tool_calls": [1]}), "tool call fragment is a JSON int, not an object"),
        (chunk({"tool_calls": [{"index": "x"}]}), "malformed stream event: ValueError"),
    ],
)
def test_an_error_or_malformed_chunk_is_a_provider_error(data, message):
    with pytest.raises(ProviderError) as e:
        S.stream_event(S.stream_start(), ev(data))
    assert str(e.value) == message


def test_an_error_event_raises_its_message_and_a_null_error_field_does_not():
    with pytest.raises(ProviderError, match="^ev$"):
        S.stream_event(S.stream_start(), ev({"message": "ev"}, event="error"))
    with pytest.raises(ProviderError, match="^error event in stream: boom$"):
        S.stream_event(S.stream_start(), ev("boom", event="error"))
    acc, _ = fold({"error": None, "object": "chat.completion.chunk", "type": None, **chunk()})
    assert acc == S.stream_start()
    assert issubclass(MalformedResponse, ProviderError)


def test_text_refusal_and_their_deltas():
    parts = [{"type": "text", "text": "b"}, {"type": "image_url"}]
    acc, shown = fold(
        chunk({"role": "assistant", "content": "a"}),
        chunk({"content": parts}),
        chunk({"content": ""}),
        chunk({"content": [{"type": "image_url"}]}),
        chunk({"refusal": "no"}),
        chunk({"refusal": ""}),
    )
    assert list(acc.text) == ["a", "b"] and list(acc.refusal) == ["no"]
    assert shown == [
        {"type": "text", "delta": "a"},
        {"type": "text", "delta": "b"},
        {"type": "refusal", "delta": "no"},
    ]
    assert acc.extra is None


def test_only_the_first_choice_is_read():
    acc, shown = fold(chunk({"content": "x"}, index=1, finish="stop"))
    assert acc == S.stream_start() and shown == []
    acc, _ = fold({"choices": [{"delta": {"content": "y"}}]})
    assert list(acc.text) == ["y"]
    both = {"choices": [{"index": 1, "delta": {"content": "x"}}, {"delta": {"content": "z"}}]}
    assert list(fold(both)[0].text) == ["z"]


def test_the_first_model_the_last_usage_and_the_last_finish_reason_are_kept():
    acc, _ = fold(
        chunk(model=5),
        chunk(model="m1"),
        chunk(model="m2", finish="tool_calls"),
        chunk(finish=None, usage={"prompt_tokens": 1}),
        chunk(finish=3, usage=None),
        {"choices": [], "usage": [1]},
    )
    assert acc.model == "m1" and acc.finish == "tool_calls"
    assert acc.usage == {"prompt_tokens": 1}
    acc, _ = fold({"choices": [], "usage": {"prompt_tokens": 2}}, acc=acc)
    assert acc.usage == {"prompt_tokens": 2}


def test_other_delta_fields_accumulate_and_reasoning_shows_as_thinking():
    acc, shown = fold(
        chunk({"role": "assistant", "reasoning_content": "Let "}),
        chunk({"reasoning_content": "me"}),
        chunk({"reasoning": "r", "annotations": []}),
        chunk({"reasoning_content": ""}),
        chunk({"other": 5}),
        chunk({"annotations": None}),
    )
    assert acc.extra == {"reasoning_content": "Let me", "reasoning": "r", "other": 5}
    assert shown == [
        {"type": "thinking", "delta": "Let "},
        {"type": "thinking", "delta": "me"},
        {"type": "thinking", "delta": "r"},
    ]
    acc, shown = fold(chunk({"reasoning_content": ""}))
    assert acc.extra == {"reasoning_content": ""} and shown == []
    acc, shown = fold(chunk({"reasoning": 5, "function_call": {"name": "f"}}))
    assert acc.extra == {"reasoning": 5} and shown == []
    before = {"reasoning": "a"}
    assert S._more(before, {"reasoning": "b"}, []) == {"reasoning": "ab"}
    assert before == {"reasoning": "a"}


def test_fragments_by_index_build_each_call():
    acc, shown = calls(
        frag(0, "a", "f", ""),
        frag(0, args='{"x"'),
        frag(1, "b", "g", {"y": 1}),
        frag(0, args=":1}"),
    )
    assert list(acc.calls) == [
        StreamCall(0, "a", "f", pvector(['{"x"', ":1}"]), None, 0),
        StreamCall(1, "b", "g", pvector(['{"y":1}']), None, 1),
    ]
    assert shown == [
        {"type": "tool_call_start", "index": 0, "id": "a", "name": "f"},
        {"type": "tool_call_start", "index": 1, "id": "b", "name": "g"},
    ]
    assert acc.extra is None and acc.text == pvector()


def test_position_gives_our_index_and_the_calls_place_or_minus_one():
    a = StreamCall(5, "a", "f", pvector(), None, 0)
    b = StreamCall(6, "b", "g", pvector(), None, 1)
    c = StreamCall(7, "c", "h", pvector(), None, 2)
    three = pvector([a, b, c])
    assert S._position(pvector(), {"index": 0}) == (0, -1)
    assert S._position(pvector([a]), {"index": 0}) == (5, 0)
    assert S._position(three, {"index": 2}) == (7, 2)
    assert S._position(three, {"index": 1}) == (6, 1)
    assert S._position(three, {"index": 0}) == (5, 0)
    assert S._position(three, {"index": 0, "id": "a"}) == (5, 0)
    assert S._position(three, {"index": 0, "id": "z"}) == (8, -1)
    assert S._position(three, {"index": 3}) == (3, -1)
    assert S._position(three, {"index": 5}) == (8, -1)  # our 5 is taken
    loose = pvector([a._replace(wire=None), b._replace(wire=None)])
    assert S._position(loose, {"id": "a"}) == (5, 0)
    assert S._position(loose, {"id": "z"}) == (7, -1)
    assert S._position(loose, {}) == (6, 1)
    assert S._position(pvector(), {}) == (0, -1)


def test_a_later_fragment_fills_a_missing_id_and_name_but_never_replaces_them():
    acc, shown = calls(frag(0), frag(0, args="x"), frag(0, "a", "f"), frag(0, "a", "g"))
    assert list(acc.calls) == [StreamCall(0, "a", "f", pvector(["x"]), None, 0)]
    assert shown == [{"type": "tool_call_start", "index": 0, "id": None, "name": ""}]
    acc, _ = calls(frag("2", "a", "f"))
    assert list(acc.calls) == [StreamCall(2, "a", "f", pvector(), None, 2)]


def test_a_repeated_index_with_a_new_id_is_another_call():
    acc, shown = calls(frag(0, "a", "f", "1"), frag(0, "b", "g", "2"), frag(0, args="3"))
    assert list(acc.calls) == [
        StreamCall(0, "a", "f", pvector(["1"]), None, 0),
        StreamCall(1, "b", "g", pvector(["2", "3"]), None, 0),
    ]
    assert [d["index"] for d in shown] == [0, 1]


def test_fragments_of_an_earlier_index_reach_its_latest_call():
    acc, _ = calls(frag(0, "a", "f"), frag(1, "b", "g"), frag(0, args="x"), frag(1, "b", args="y"))
    assert [list(c.args) for c in acc.calls] == [["x"], ["y"]]
    acc, _ = calls(frag(1, "a", "f"), frag(0, "b", "g"), frag(1, args="x"))
    assert [(c.index, list(c.args)) for c in acc.calls] == [(1, ["x"]), (0, [])]


def test_fragments_without_an_index_are_placed_by_id():
    acc, shown = calls(
        frag(id="a", name="f", args="1"),
        frag(id="b", name="g", args="2"),
        frag(args="3"),
        frag(id="a", args="4"),
        frag(id="", args="5"),
    )
    assert list(acc.calls) == [
        StreamCall(0, "a", "f", pvector(["1", "4"]), None, None),
        StreamCall(1, "b", "g", pvector(["2", "3", "5"]), None, None),
    ]
    assert [d["index"] for d in shown] == [0, 1]
    acc, _ = calls(frag(args="x"))
    assert list(acc.calls) == [StreamCall(0, None, "", pvector(["x"]), None, None)]


def test_an_index_already_taken_by_a_call_without_one_opens_the_next():
    acc, _ = calls(frag(id="a", name="f"), frag(0, "b", "g"), frag(0, args="x"))
    assert list(acc.calls) == [
        StreamCall(0, "a", "f", pvector(), None, None),
        StreamCall(1, "b", "g", pvector(["x"]), None, 0),
    ]


def test_a_calls_unread_fields_are_kept_the_latest_value_winning():
    acc, _ = calls(
        frag(0, "a", "f", type="function", extra_content={"g": {"s": "1"}}, note="x"),
        frag(0, extra_content={"h": 2}, note="y"),
        frag(0, args="z"),
    )
    (call,) = acc.calls
    assert call.extra == {"extra_content": {"g": {"s": "1"}, "h": 2}, "note": "y"}
    assert list(call.args) == ["z"]
    acc, _ = calls(frag(0, "a", "f", type="function"))
    assert acc.calls[0].extra is None


def test_stream_response_is_the_response_a_stream_amounts_to():
    empty = S.stream_response(S.stream_start())
    assert empty == {
        "model": None,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": None}
        ],
        "usage": None,
    }
    acc = OpenAIStream(
        text=pvector(["a", "b"]),
        refusal=pvector(["n", "o"]),
        calls=pvector(
            [
                StreamCall(1, "b", "g", pvector(["{", "}"]), {"extra_content": 1, "id": "x"}),
                StreamCall(0, "a", "f", pvector()),
            ]
        ),
        usage={"prompt_tokens": 1},
        finish="stop",
        model="m",
        extra={"reasoning_content": "r", "role": "x", "content": "y"},
    )
    assert S.stream_response(acc) == {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "reasoning_content": "r",
                    "role": "assistant",
                    "content": "ab",
                    "tool_calls": [
                        {
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        },
                        {
                            "extra_content": 1,
                            "id": "b",
                            "type": "function",
                            "function": {"name": "g", "arguments": "{}"},
                        },
                    ],
                    "refusal": "no",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1},
    }
