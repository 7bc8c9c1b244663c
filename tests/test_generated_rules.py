"""The rules of core/wire/generated.py: an in-process `generate` result read into a turn
(text, calls with their ids made and made distinct, arguments as JSON text, usage and
model kept) and each refusal's message."""

from __future__ import annotations

import pytest
from pyrsistent import pmap

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.wire.generated import parse_generated


def test_a_text_answer():
    t = parse_generated(
        {"content": "hi", "model": "m", "usage": {"prompt_tokens": 2, "completion_tokens": 3}}, 0
    )
    assert t["text"] == "hi" and t["tool_calls"] == [] and t["finish"] == "stop"
    assert t["model"] == "m" and t["usage"]["total_tokens"] == 5
    assert t["message"] == {"role": "assistant", "content": "hi"}


def test_an_empty_answer_and_no_usage():
    t = parse_generated(pmap({"content": None, "tool_calls": None}), 1)
    assert t["text"] == "" and t["finish"] == "stop" and t["model"] is None
    assert t["usage"]["total_tokens"] == 0


def test_calls_get_ids_made_distinct_and_arguments_as_text():
    out = {
        "tool_calls": (
            {"name": "a", "arguments": {"x": 1}},
            {"id": "k", "name": "b", "arguments": '{"y": 2}'},
            {"id": "k", "name": "c"},
            {"id": "", "name": "d", "arguments": FrozenMap({"é": [1]})},
        ),
        "content": "calling",
    }
    t = parse_generated(out, 3)
    assert [dict(c) for c in t["tool_calls"]] == [
        {"id": "call_3_0", "name": "a", "arguments": '{"x":1}'},
        {"id": "k", "name": "b", "arguments": '{"y": 2}'},
        {"id": "k_2", "name": "c", "arguments": "{}"},
        {"id": "call_3_3", "name": "d", "arguments": '{"é":[1]}'},
    ]
    assert t["finish"] == "tool_calls" and t["text"] == "calling"
    assert [c["id"] for c in t["message"]["tool_calls"]] == ["call_3_0", "k", "k_2", "call_3_3"]


@pytest.mark.parametrize(
    "out, message",
    [
        (["x"], "generate must return a mapping, got list: ['x']"),
        ("a" * 200, f"generate must return a mapping, got str: {'a' * 200!r:.100}"),
        (
            {"tool_calls": {"name": "a"}},
            "generate's 'tool_calls' must be a list, got {'name': 'a'}",
        ),
        (
            {"tool_calls": "x" * 200},
            f"generate's 'tool_calls' must be a list, got {'x' * 200!r:.100}",
        ),
        ({"content": 5}, "generate's 'content' must be a string, got 5"),
        (
            {"content": ["a"] * 50},
            f"generate's 'content' must be a string, got {['a'] * 50!r:.100}",
        ),
        ({"tool_calls": [{"name": "a"}, "b"]}, "generate's tool call 1 needs a string 'name': 'b'"),
        (
            {"tool_calls": [{"name": ""}]},
            "generate's tool call 0 needs a string 'name': {'name': ''}",
        ),
        (
            {"tool_calls": [{"name": 5}]},
            "generate's tool call 0 needs a string 'name': {'name': 5}",
        ),
        (
            {"tool_calls": [{"arguments": "{}"}]},
            "generate's tool call 0 needs a string 'name': {'arguments': '{}'}",
        ),
        (
            {"tool_calls": [{"name": "a", "id": 7}]},
            "generate's tool call 0 has a non-string 'id': 7",
        ),
        (
            {"tool_calls": [{"name": "a", "id": ["i"] * 30}]},
            f"generate's tool call 0 has a non-string 'id': {['i'] * 30!r:.60}",
        ),
        (
            {"tool_calls": [{"name": "a", "arguments": [1]}]},
            "generate's tool call 0 'arguments' must be a map or JSON text",
        ),
    ],
)
def test_each_refusal_says_what_is_wrong(out, message):
    with pytest.raises(ValueError) as e:
        parse_generated(out, 0)
    assert str(e.value) == message


def test_a_long_call_is_cut_in_the_message():
    c = {"name": 5, "pad": "p" * 200}
    with pytest.raises(ValueError) as e:
        parse_generated({"tool_calls": [c]}, 0)
    assert str(e.value) == f"generate's tool call 0 needs a string 'name': {c!r:.100}"
