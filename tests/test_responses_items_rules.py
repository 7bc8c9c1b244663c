"""Responses messages and the neutral view (core/wire/responses_items.py), rule by rule:
which messages are right for Responses as they are, what a turn and its results read
as, and the error outputs closing calls left open. Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import thaw
from toolnexus.core.wire import responses_items as RI


def _user(*blocks):
    return {"role": "user", "content": list(blocks)}


@pytest.mark.parametrize(
    ("message", "native"),
    [
        ({"role": "assistant", "items": []}, True),  # its own turn shape
        ({"role": "user", "content": "x"}, True),
        ({"role": "assistant", "content": "x"}, True),
        ({"role": "system", "content": "x"}, True),
        ({"role": "developer", "content": "x"}, True),
        ({"role": "user", "content": ""}, False),
        ({"role": "tool", "content": "x"}, False),
        ({"content": "x"}, False),
        ({"role": "user", "content": "x", "name": "n"}, False),
        ({"role": "user", "content": None}, False),
        (_user({"type": "input_text", "text": "a"}), True),
        (_user({"type": "input_image", "image_url": "https://x/a.png"}), True),
        (_user({"type": "input_file", "file_id": "f"}), True),
        (_user({"type": "input_text", "text": "a"}, {"type": "input_file", "file_id": "f"}), True),
        (_user({"type": "output_text", "text": "a"}), False),
        (_user({"type": "text", "text": "a"}), False),
        (_user({"type": "input_text", "text": "a"}, "x"), False),
        (_user(), False),
        ({"role": "assistant", "content": [{"type": "input_text", "text": "a"}]}, False),
        ({"role": "system", "content": [{"type": "input_text", "text": "a"}]}, False),
    ],
)
def test_a_message_is_native_when_responses_takes_it_as_it_is(message, native):
    assert RI.native(message) is native


def test_the_blocks_only_responses_has():
    assert {"input_text", "input_image", "input_file", "output_text"} == RI.RESPONSES_BLOCKS


def test_a_turn_reads_as_its_text_calls_reasoning_and_refusal_apart():
    reasoning = {"type": "reasoning", "summary": []}
    said = {
        "type": "message",
        "content": [
            {"type": "output_text", "text": "a"},
            {"type": "refusal", "refusal": "no"},
            {"type": "refusal"},
            "junk",
            {"type": "zzz"},
        ],
    }
    m = {
        "role": "assistant",
        "items": [
            reasoning,
            said,
            {"role": "assistant", "content": "plain"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "arguments": "{}"},
            "junk",
            {"type": "other"},
        ],
    }
    ((kind, parts, calls, extras, own),) = RI.read(m, {"c1": "k1"})
    assert kind == "assistant"
    assert thaw(parts) == [{"type": "text", "text": "a"}, {"type": "text", "text": "plain"}]
    assert calls == [("k1", "f", "{}", {}), ("c2", "", "{}", {})]
    assert extras == [reasoning]
    assert own == {"refusal": "no"}


def test_a_turn_without_a_refusal_has_no_own_fields():
    m = {
        "role": "assistant",
        "items": [{"type": "message", "content": [{"type": "output_text", "text": "a"}]}],
    }
    assert RI.read(m, {}) == [("assistant", [{"type": "text", "text": "a"}], [], [], {})]
    assert RI.read({"role": "assistant", "items": []}, {}) == [("assistant", [], [], [], {})]
    user_said = {"role": "assistant", "items": [{"role": "user", "content": "x"}]}
    assert RI.read(user_said, {}) == [("assistant", [], [], [], {})]


def test_results_read_as_their_outputs_ids_mapped():
    m = {
        "role": "tool",
        "items": [
            {"type": "function_call_output", "call_id": "c1", "output": "o"},
            {"type": "x", "call_id": "c2"},
            "junk",
            {"type": "function_call_output", "call_id": "c3", "output": "p"},
        ],
    }
    assert RI.read(m, {"c1": "k"}) == [("result", "k", "o", False), ("result", "c3", "p", False)]
    assert RI.read({"role": "tool"}, {}) == []


def test_calls_left_open_are_closed_in_a_new_results_message_or_the_turns_own():
    assert RI.gathers({}) is True
    made, extra = RI.close({}, None, ["a", "b"], "err")
    assert made is None
    assert thaw(extra) == [
        {
            "role": "tool",
            "items": [
                {"type": "function_call_output", "call_id": "a", "output": "err"},
                {"type": "function_call_output", "call_id": "b", "output": "err"},
            ],
        }
    ]
    old = {"type": "function_call_output", "call_id": "z", "output": "o"}
    made, extra = RI.close({}, {"role": "tool", "items": [old]}, ["a"], "err")
    assert extra == []
    assert thaw(made) == {
        "role": "tool",
        "items": [old, {"type": "function_call_output", "call_id": "a", "output": "err"}],
    }


def test_a_said_message_without_content_reads_as_no_parts():
    m = {"role": "assistant", "items": [{"type": "message", "content": None}]}
    assert RI.read(m, {}) == [("assistant", [], [], [], {})]
