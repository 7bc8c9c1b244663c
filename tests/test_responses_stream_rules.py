"""Streaming of the Responses dialect (core/wire/responses_stream.py), rule by rule: the
accumulator after each kind of event, the deltas each gives, the output index of an
event that names none, and the response a finished stream stands for. Pure, no I/O."""

from __future__ import annotations

import json

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.wire import responses_stream as RS
from toolnexus.core.wire.common import MalformedResponse


def _event(data, event=None) -> dict:
    out = {"data": data if isinstance(data, str) else json.dumps(data)}
    return {**out, "event": event} if event else out


def _feed(acc, *datas):
    deltas = []
    for d in datas:
        acc, more = RS.stream_event(acc, _event(d))
        deltas += [dict(x) for x in more]
    return acc, deltas


def test_stream_body_asks_for_a_stream_in_a_copy():
    body = {"model": "m", "stream": False}
    made = RS.stream_body(body)
    assert made == {"model": "m", "stream": True} and body["stream"] is False


def test_a_stream_starts_empty():
    acc = RS.stream_start()
    assert acc == RS.ResponsesStream()
    assert (dict(acc.items), dict(acc.args), dict(acc.text), acc.final, acc.model) == (
        {}, {}, {}, None, None)  # fmt: skip
    assert isinstance(acc.items, FrozenMap)


def test_done_events_and_events_about_nothing_change_nothing():
    acc = RS.stream_start()
    for data in ("[DONE]", " [DONE]\n"):
        got, d = RS.stream_event(acc, {"data": data})
        assert got is acc and d == ()
    for data in ({"type": "response.content_part.added"}, {"type": "response.output_text.done"},
                 {"type": "response.output_text.delta", "delta": ""},
                 {"type": "response.output_text.delta", "delta": 5},
                 {"type": "response.refusal.delta", "delta": 5},
                 {"type": "response.reasoning_text.delta"},
                 {"type": "response.function_call_arguments.delta", "delta": None},
                 {}):  # fmt: skip
        got, d = RS.stream_event(acc, _event(data))
        assert got is acc and d == ()


def test_text_refusal_and_thinking_deltas():
    acc, deltas = _feed(
        RS.stream_start(),
        {"type": "response.output_text.delta", "output_index": 1, "delta": "he"},
        {"type": "response.output_text.delta", "output_index": 1, "delta": "y"},
        {"type": "response.refusal.delta", "delta": "no"},
        {"type": "response.reasoning_summary_text.delta", "delta": "s"},
        {"type": "response.reasoning_text.delta", "delta": "r"},
    )
    assert deltas == [
        {"type": "text", "delta": "he"},
        {"type": "text", "delta": "y"},
        {"type": "refusal", "delta": "no"},
        {"type": "thinking", "delta": "s"},
        {"type": "thinking", "delta": "r"},
    ]
    assert thaw(acc.text) == {1: ["he", "y"]} and dict(acc.items) == {}


def test_the_kind_comes_from_the_event_name_when_the_data_has_no_type():
    acc, d = RS.stream_event(
        RS.stream_start(), _event({"delta": "x"}, "response.output_text.delta")
    )
    assert [dict(x) for x in d] == [{"type": "text", "delta": "x"}]


def test_an_error_event_and_a_failed_response_are_provider_errors():
    cases = [
        _event({"type": "error", "message": "bad", "code": "server_error"}),
        _event({"message": "bad"}, "error"),
        _event({"type": "x", "message": "bad"}, "error"),
        _event({"type": "response.failed", "response": {"error": {"message": "bad"}}}),
    ]
    for event in cases:
        with pytest.raises(ProviderError) as e:
            RS.stream_event(RS.stream_start(), event)
        assert str(e.value) == "bad"
    event = _event({"type": "response.failed", "error": {"message": "worse"}})
    with pytest.raises(ProviderError) as e:
        RS.stream_event(RS.stream_start(), event)
    assert str(e.value) == "worse"


def test_the_closing_event_holds_the_response():
    for kind in ("response.completed", "response.incomplete"):
        acc, d = RS.stream_event(RS.stream_start(), _event({"type": kind, "response": {"id": "r"}}))
        assert acc.final == {"id": "r"} and d == ()
        acc, _ = RS.stream_event(RS.stream_start(), _event({"type": kind}))
        assert acc.final == {}
        with pytest.raises(MalformedResponse) as e:
            RS.stream_event(RS.stream_start(), _event({"type": kind, "response": []}))
        assert str(e.value) == f"{kind} holds no response object"


def test_the_model_comes_from_the_opening_events():
    acc, _ = _feed(RS.stream_start(), {"type": "response.created", "response": {"model": "m1"}})
    assert acc.model == "m1"
    acc, _ = _feed(acc, {"type": "response.in_progress", "response": {"model": 5}})
    assert acc.model == "m1"
    acc, _ = _feed(acc, {"type": "response.in_progress", "response": {"model": "m2"}})
    assert acc.model == "m2"
    for data in ({"type": "response.created"}, {"type": "response.created", "response": "x"}):
        assert _feed(acc, data)[0].model == "m2"


def test_items_added_and_done_and_argument_fragments():
    call = {"type": "function_call", "call_id": "c", "name": "f", "id": "fc"}
    acc, deltas = _feed(
        RS.stream_start(),
        {"type": "response.output_item.added", "output_index": 0, "item": call},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a"'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": ":1}"},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "function_call", "name": ["g"]}},
        {"type": "response.output_item.added", "output_index": 2, "item": {"type": "message"}},
    )  # fmt: skip
    assert deltas == [
        {"type": "tool_call_start", "index": 0, "id": "c", "name": "f"},
        {"type": "tool_call_start", "index": 1, "id": None, "name": '["g"]'},
    ]
    assert thaw(acc.args) == {0: ['{"a"', ":1}"]}
    done = {"type": "function_call", "arguments": '{"a":1}', "status": "completed"}
    acc, deltas = _feed(acc, {"type": "response.output_item.done", "output_index": 0, "item": done})
    assert deltas == [] and acc.items[0] == {**call, **done}
    for kind in ("response.output_item.added", "response.output_item.done"):
        with pytest.raises(MalformedResponse) as e:
            _feed(acc, {"type": kind, "output_index": 0, "item": "x"})
        assert str(e.value) == f"{kind} holds no item"


def test_an_event_without_an_output_index_finds_its_item():
    acc = RS.stream_start()
    add = "response.output_item.added"
    acc, _ = _feed(acc, {"type": add, "item": {"type": "reasoning", "id": "rs"}})
    acc, _ = _feed(acc, {"type": add, "output_index": True, "item": {"type": "message",
                                                                     "id": "m"}})  # fmt: skip
    acc, _ = _feed(acc, {"type": add, "item": {"type": "function_call", "id": "fc",
                                               "call_id": "c"}})  # fmt: skip
    assert sorted(acc.items) == [0, 1, 2] and acc.items[1]["id"] == "m"
    # deltas: by item_id, id or call_id, else the latest item
    acc, _ = _feed(
        acc,
        {"type": "response.output_text.delta", "item_id": "m", "delta": "a"},
        {"type": "response.function_call_arguments.delta", "call_id": "c", "delta": "{"},
        {"type": "response.function_call_arguments.delta", "id": "fc", "delta": "}"},
        {"type": "response.output_text.delta", "item_id": "zz", "delta": "b"},
        {"type": "response.output_text.delta", "delta": "c"},
    )
    assert thaw(acc.text) == {1: ["a"], 2: ["b", "c"]} and thaw(acc.args) == {2: ["{", "}"]}
    # a done item: the item its ids name, else the latest of its type, else a new one
    done = "response.output_item.done"
    acc, _ = _feed(acc, {"type": done, "item": {"type": "message", "id": "m", "status": "x"}})
    assert acc.items[1] == {"type": "message", "id": "m", "status": "x"}
    acc, _ = _feed(acc, {"type": done, "item": {"type": "reasoning", "summary": []}})
    assert acc.items[0] == {"type": "reasoning", "id": "rs", "summary": []}
    acc, _ = _feed(acc, {"type": done, "item": {"type": "web_search_call"}})
    assert acc.items[3] == {"type": "web_search_call"}
    acc, _ = _feed(acc, {"type": done, "item": {"type": "message", "id": "m2"}})
    assert acc.items[1]["id"] == "m2" and len(acc.items) == 4


def test_the_first_item_of_a_stream_without_indexes_is_0():
    acc = RS.stream_start()
    assert RS._index(acc, {}) == 0
    assert RS._index(acc, {}, adding=True) == 0
    assert RS._index(acc, {"item": {"type": "message"}}, adding=True, done=True) == 0
    acc = acc._replace(items=FrozenMap({3: {"type": "message"}, 5: {"type": "x", "id": "i"}}))
    assert RS._index(acc, {"item": "x"}, adding=True) == 6
    assert RS._index(acc, {"item": {"type": "message"}}, adding=True, done=True) == 3
    assert RS._index(acc, {"item": {"type": "y", "call_id": "i"}}, adding=True, done=True) == 5
    assert RS._index(acc, {"item": {"type": "y"}}, adding=True, done=True) == 6
    assert RS._index(acc, {"item": {"type": "message"}}, adding=True) == 6
    assert RS._index(acc, {"output_index": 9}, adding=True, done=True) == 9
    assert RS._index(acc, {"item_id": "i"}) == 5 and RS._index(acc, {"id": "none"}) == 5
    assert RS._index(acc, {"output_index": True}) == 5  # not an index: the latest item
    assert RS._index(acc, {"output_index": "3"}) == 5
    more = acc._replace(items=acc.items.set(3, {"type": "m", "id": "i3"}).set(4, {"call_id": "k"}))
    assert RS._index(more, {"id": "i3"}) == 3 and RS._index(more, {"item_id": "k"}) == 4
    assert RS._index(more, {"call_id": "k"}) == 4 and RS._index(more, {"call_id": "i3"}) == 3
    assert RS._named(acc, {}) is None
    two = acc._replace(items=FrozenMap({1: {"id": "i"}, 0: {"call_id": "i"}}))
    assert RS._named(two, {"item_id": "i"}) == 1


def test_final_response_is_the_closing_events_else_the_items_assembled():
    with pytest.raises(ProviderError) as e:
        RS.final_response(RS.stream_start())
    assert str(e.value) == (
        "the stream ended before its final event (no response.completed or response.incomplete)"
    )
    assert e.value.network is True
    given = [{"type": "message", "content": []}]
    acc = RS.ResponsesStream(items=FrozenMap({0: {"type": "x"}}), final={"output": given,
                                                                         "model": "f"},
                             model="m")  # fmt: skip
    assert RS.final_response(acc) == {"output": given, "model": "f"}
    assert RS.final_response(acc._replace(final={"output": [], "model": ""}))["model"] == "m"
    assert "model" not in RS.final_response(acc._replace(final={}, model=None))


def test_the_items_assembled_from_their_fragments():
    items = FrozenMap({
        0: {"type": "function_call", "call_id": "c"},
        1: {"type": "function_call", "call_id": "d", "arguments": "{}"},
        2: {"type": "message", "role": "assistant"},
        4: {"type": "message", "content": [{"type": "output_text", "text": "kept"}]},
        5: {"type": "reasoning"},
    })  # fmt: skip
    args = FrozenMap({0: pvector(['{"a"', ":1}"]), 1: pvector(["x"]), 5: pvector(["y"])})
    text = FrozenMap({2: pvector(["h", "i"]), 3: pvector(["t"]), 4: pvector(["lost"]),
                      0: pvector(["z"])})  # fmt: skip
    acc = RS.ResponsesStream(items=items, args=args, text=text, final={"id": "r"})
    out = RS.final_response(acc)
    assert out == {"id": "r", "output": [
        {"type": "function_call", "call_id": "c", "arguments": '{"a":1}'},
        {"type": "function_call", "call_id": "d", "arguments": "{}"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "t", "annotations": []}]},
        {"type": "message", "content": [{"type": "output_text", "text": "kept"}]},
        {"type": "reasoning"},
    ]}  # fmt: skip
    assert RS._assembled(RS.stream_start()) == []


def test_a_malformed_event_is_a_provider_error():
    with pytest.raises(MalformedResponse) as e:
        RS.stream_event(RS.stream_start(), {})
    assert str(e.value) == "malformed stream event: KeyError"
    with pytest.raises(ProviderError) as e:
        RS.stream_event(RS.stream_start(), {"data": "[1]"})
    assert str(e.value) == "unreadable stream event: [1]"
