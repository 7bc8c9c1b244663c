"""The Messages stream (core/wire/anthropic_stream.py), rule by rule: the request asking
for a stream, each event logged with the deltas it shows, the usage counts and stop
reason kept, and the log folded into the response a stream amounts to. Pure, no I/O."""

from __future__ import annotations

import json

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.wire import anthropic_stream as S
from toolnexus.core.wire.anthropic_stream import AnthropicStream


def ev(name, data=None):
    if data is None:
        data = {"type": name}
    return {"event": name, "data": data if isinstance(data, str) else json.dumps(data)}


def fold(*events, acc=None):
    acc = acc or S.stream_start()
    shown = []
    for e in events:
        acc, deltas = S.stream_event(acc, e)
        assert type(deltas) is tuple
        shown.extend(dict(d) for d in deltas)
    return acc, shown


def start(index, block):
    return ev(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def delta(index, kind, **payload):
    return ev(
        "content_block_delta",
        {"type": "content_block_delta", "index": index, "delta": {"type": kind, **payload}},
    )


def test_stream_body_asks_for_a_stream():
    body = {"model": "m"}
    assert S.stream_body(body) == {"model": "m", "stream": True}
    assert body == {"model": "m"}


def test_a_stream_starts_empty():
    assert S.stream_start() == AnthropicStream(
        pvector(), None, None, None, None, False, (None, None), None, None
    )


def test_pings_unknown_events_and_empty_data_change_nothing():
    acc = S.stream_start()
    for e in [ev("ping"), ev("other", {"type": "message_stop"}), ev("message_stop", " \n")]:
        got, deltas = S.stream_event(acc, e)
        assert got is acc and deltas == ()
    got, _ = S.stream_event(acc, ev("message_other"))
    assert got is acc
    got, _ = S.stream_event(acc, ev("content_block_stop", {"type": "content_block_stop"}))
    assert got is acc


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (ev("error", {"type": "error", "error": {"message": "over"}}), "over"),
        (ev("error", "boom"), "error event in stream: boom"),
        (ev("message", {"type": "error", "error": {"message": "late"}}), "late"),
        (
            ev("message_start", "x"),
            "unreadable stream event (Expecting value: line 1 column 1 (char 0)): x",
        ),
        (start(0, "x"), "content_block is not an object"),
        (start(True, {"type": "text"}), "a stream event's index is not an integer"),
        (delta("1", "text_delta", text="a"), "a stream event's index is not an integer"),
        (
            ev("message_start", {"type": "message_start", "message": 5}),
            "malformed stream event: AttributeError",
        ),
    ],
)
def test_an_error_or_malformed_event_is_a_provider_error(event, message):
    with pytest.raises(ProviderError) as e:
        S.stream_event(S.stream_start(), event)
    assert str(e.value) == message


def test_message_start_and_delta_keep_the_model_stop_reason_and_latest_counts():
    acc, shown = fold(
        ev(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "model": "claude",
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": 5,
                        "output_tokens": 1,
                        "cache_read_input_tokens": 3,
                        "cache_creation_input_tokens": None,
                    },
                },
            },
        ),
        ev(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 7},
            },
        ),
        ev(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": ""},
                "usage": {"cache_creation_input_tokens": 2},
            },
        ),
    )
    assert acc == AnthropicStream(pvector(), "claude", "end_turn", 5, 7, False, (None, None), 3, 2)
    assert shown == []
    odd, _ = fold(
        ev(
            "message_start",
            {"type": "message_start", "message": {"model": 5, "stop_reason": 1, "usage": 3}},
        )
    )
    assert odd == S.stream_start()
    assert fold(ev("message_start", {"type": "message_start"}))[0] == S.stream_start()
    stopped, _ = fold(
        ev("message_start", {"type": "message_start", "message": {"stop_reason": "max_tokens"}})
    )
    assert stopped.stop_reason == "max_tokens"


def test_a_message_delta_without_changes_keeps_the_accumulator():
    acc = S.stream_start()._replace(stop_reason="end_turn")
    for data in [
        {"type": "message_delta"},
        {"type": "message_delta", "delta": None, "usage": 1},
        {"type": "message_delta", "delta": {"stop_reason": 5}},
    ]:
        got, _ = S.stream_event(acc, ev("message_delta", data))
        assert got is acc


def test_message_stop_ends_the_stream_and_the_type_field_names_the_event():
    acc, _ = fold(ev("message_stop"))
    assert acc.done is True
    by_name, _ = fold(ev("message_stop", {}))
    assert by_name.done is True
    by_type, _ = fold(ev("message", {"type": "message_stop"}))
    assert by_type.done is True


def test_usage_changes_are_the_given_counts():
    assert S._usage_changes(None) == {} and S._usage_changes([1]) == {}
    u = {
        "input_tokens": 1,
        "output_tokens": None,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 4,
        "other": 9,
    }
    assert S._usage_changes(u) == {"input_tokens": 1, "cache_read": 0, "cache_write": 4}


def test_block_starts_are_logged_and_show_tool_calls_and_initial_text():
    tool = {"type": "tool_use", "id": "a", "name": "f", "input": {}}
    acc, shown = fold(
        start(0, {"type": "text", "text": "hi"}),
        start(1, {"type": "thinking", "thinking": ""}),
        start(2, tool),
        start(3, {"type": "tool_use", "id": "b"}),
        start(4, {"type": "text", "text": ""}),
        ev("content_block_start", {"type": "content_block_start", "content_block": None}),
    )
    assert list(acc.log) == [
        (0, "start", {"type": "text", "text": "hi"}),
        (1, "start", {"type": "thinking", "thinking": ""}),
        (2, "start", tool),
        (3, "start", {"type": "tool_use", "id": "b"}),
        (4, "start", {"type": "text", "text": ""}),
        (0, "start", {}),
    ]
    assert acc.block == (0, None)
    assert shown == [
        {"type": "text", "delta": "hi"},
        {"type": "tool_call_start", "index": 2, "id": "a", "name": "f"},
        {"type": "tool_call_start", "index": 3, "id": "b", "name": ""},
    ]


def test_deltas_are_logged_by_field_and_text_shows_only_for_text_blocks():
    acc, shown = fold(
        start(0, {"type": "thinking", "thinking": ""}),
        delta(0, "thinking_delta", thinking="hm"),
        delta(0, "signature_delta", signature="sig"),
        delta(0, "text_delta", text="not text"),
        start(1, {"type": "text", "text": ""}),
        delta(1, "text_delta", text="a"),
        delta(1, "citations_delta", citation={"type": "char_location"}),
        delta(0, "text_delta", text="late"),
        delta(2, "text_delta", text="b"),
        delta(1, "text_delta", text=""),
        delta(1, "text_delta", text=5),
        delta(3, "input_json_delta", partial_json='{"x":'),
        delta(3, "thinking_delta", thinking=""),
    )
    assert list(acc.log)[1:4] == [
        (0, "thinking", "hm"),
        (0, "signature", "sig"),
        (0, "text", "not text"),
    ]
    assert list(acc.log)[5:] == [
        (1, "text", "a"),
        (1, "citations", {"type": "char_location"}),
        (0, "text", "late"),
        (2, "text", "b"),
        (1, "text", ""),
        (1, "text", ""),
        (3, "input", '{"x":'),
        (3, "thinking", ""),
    ]
    assert shown == [
        {"type": "thinking", "delta": "hm"},
        {"type": "text", "delta": "a"},
        {"type": "text", "delta": "b"},
    ]


def test_a_delta_of_an_unknown_type_changes_nothing():
    acc = S.stream_start()
    for d in [delta(0, "new_delta", text="x"), delta(0, 5), ev("content_block_delta", {})]:
        got, deltas = S.stream_event(acc, d)
        assert got is acc and deltas == ()
    got, _ = S.stream_event(
        acc, ev("content_block_delta", {"delta": {"type": "text_delta", "text": "x"}})
    )
    assert list(got.log) == [(0, "text", "x")]


def test_block_type_reads_the_latest_block_else_the_logged_start():
    acc = AnthropicStream(
        log=pvector([(0, "start", {"type": "thinking"}), (1, "text", "x")]), block=(2, "text")
    )
    assert S._block_type(acc, 2) == "text"
    assert S._block_type(acc, 0) == "thinking"
    assert S._block_type(acc, 1) is None


def test_input_of_reads_an_object_else_keeps_the_raw_text():
    assert S._input_of("", {"a": 1}) == ({"a": 1}, None)
    assert S._input_of(" ", None) == ({}, None)
    assert S._input_of('{"x": 1}', {"a": 1}) == ({"x": 1}, None)
    assert S._input_of('{"x": ', {}) == ({}, '{"x": ')
    assert S._input_of("[1]", {}) == ({}, "[1]")


def test_the_log_folds_into_blocks_by_index():
    log = pvector(
        [
            (2, "input", '{"x"'),
            (0, "start", {"type": "text", "text": "a", "citations": [{"n": 0}]}),
            (0, "text", "b"),
            (0, "citations", {"n": 1}),
            (0, "text", "c"),
            (1, "thinking", "t"),
            (1, "signature", "s"),
            (2, "input", ": 1}"),
            (3, "start", {"type": "tool_use", "id": "u", "input": {"y": 2}}),
            (4, "input", "{bad"),
            (5, "citations", {"n": 2}),
            (6, "start", {"type": "redacted_thinking", "data": "d"}),
        ]
    )
    assert S._blocks(log) == [
        ({"type": "text", "text": "abc", "citations": [{"n": 0}, {"n": 1}]}, None),
        ({"type": "thinking", "thinking": "t", "signature": "s"}, None),
        ({"type": "tool_use", "input": {"x": 1}}, None),
        ({"type": "tool_use", "id": "u", "input": {"y": 2}}, None),
        ({"type": "tool_use", "input": {}}, "{bad"),
        ({"type": "text", "citations": [{"n": 2}]}, None),
        ({"type": "redacted_thinking", "data": "d"}, None),
    ]
    assert S._blocks(pvector([(0, "start", {"type": "text", "text": None}), (0, "text", "x")])) == [
        ({"type": "text", "text": "x"}, None)
    ]
    assert S._blocks(pvector([(0, "signature", "s")])) == [
        ({"type": "thinking", "signature": "s"}, None)
    ]
    given = {"type": "tool_use", "id": "u", "input": {"y": 2}}
    assert S._blocks(pvector([(0, "start", given), (0, "input", ""), (0, "input", " ")])) == [
        (given, None)
    ]


def test_stream_response_is_the_response_and_the_raw_input_of_each_tool_use():
    acc = AnthropicStream(
        log=pvector([(0, "text", "hi"), (1, "input", "{cut"), (2, "input", "{}")]),
        model="m",
        stop_reason="max_tokens",
        input_tokens=1,
        output_tokens=2,
        done=True,
        cache_read=3,
        cache_write=4,
    )
    assert S.stream_response(acc) == (
        {
            "model": "m",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_use", "input": {}},
                {"type": "tool_use", "input": {}},
            ],
            "stop_reason": "max_tokens",
            "usage": {
                "input_tokens": 1,
                "output_tokens": 2,
                "cache_read_input_tokens": 3,
                "cache_creation_input_tokens": 4,
            },
        },
        ["{cut", None],
    )
