"""The role-and-content shape the chat dialects share (core/wire/chat.py), rule by rule:
its neutral items, its tool-call algebra (ids, gathering, closing, keeping results) and
which messages each chat dialect takes as they are. Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import thaw
from toolnexus.core.wire import chat as C

IMAGE = {"type": "image_url", "image_url": {"url": "https://x/a.png"}}


def test_the_blocks_and_roles_only_chat_completions_has():
    assert {"image_url", "input_audio", "file", "refusal"} == C.CHAT_BLOCKS
    assert {"system", "developer", "tool"} == C.CHAT_ROLES


@pytest.mark.parametrize("role", ["system", "developer"])
def test_a_system_message_reads_as_its_text_blocks_joined(role):
    blocks = [{"type": "text", "text": "a"}, {"type": "text"}, "x", {"type": "text", "text": "b"}]
    assert C.read({"role": role, "content": blocks}, {}) == [("system", "ab")]
    assert C.read({"role": role, "content": "s"}, {}) == [("system", "s")]


def test_results_read_with_their_ids_mapped_and_error_flag_and_the_rest_is_the_users():
    m = {
        "role": "user",
        "content": [
            {"type": "text", "text": "q"},
            {"type": "tool_result", "tool_use_id": "t", "content": "r", "is_error": 1},
            IMAGE,
        ],
    }
    (result, (kind, parts)) = C.read(m, {"t": "k"})
    assert result == ("result", "k", "r", True) and kind == "user"
    assert thaw(parts) == [
        {"type": "text", "text": "q"},
        {"type": "image", "url": "https://x/a.png"},
    ]
    only = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}],
    }
    assert C.read(only, {}) == [("result", "t", "r", False)]
    tool = {"role": "tool", "tool_call_id": "t", "content": "r"}
    assert C.read(tool, {"t": "k"}) == [("result", "k", "r", False)]
    assert C.read(tool, {"x": "k"}) == [("result", "t", "r", False)]
    assert C.read(only, {"x": "k"}) == [("result", "t", "r", False)]
    assert C.read({"role": "user", "content": "hi"}, {}) == [("user", "hi")]


def test_an_assistant_message_reads_as_text_calls_extras_and_its_own_fields():
    m = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "refusal", "refusal": "no"},
            {"type": "tool_use", "id": "u", "name": "g", "input": {"y": 1}},
            {"type": "tool_use", "id": "v", "input": {}},
            {"type": "thinking", "thinking": "t"},
            "junk",
            IMAGE,
        ],
        "reasoning_content": "r",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
                "extra_content": {"x": 1},
            },
            {"id": "d"},
        ],
    }
    ((kind, parts, calls, extras, own),) = C.read(m, {"c": "k", "u": "w"})
    assert kind == "assistant"
    assert thaw(parts) == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "no"},
        {"type": "image", "url": "https://x/a.png"},
    ]
    assert calls == [
        ("k", "f", "{}", {"extra_content": {"x": 1}}),
        ("d", "", None, {}),
        ("w", "g", {"y": 1}, {}),
        ("v", "", {}, {}),
    ]
    assert extras == [{"type": "thinking", "thinking": "t"}]
    assert own == {"reasoning_content": "r"}
    plain = C.read({"role": "assistant", "content": "hi"}, {})
    assert plain == [("assistant", [{"type": "text", "text": "hi"}], [], [], {})]


def test_call_ids_are_the_string_ids_of_calls_and_tool_use_blocks():
    blocks = [{"type": "tool_use", "id": "u"}, {"type": "tool_use", "id": 3}, {"type": "text"}]
    assert C.call_ids({"tool_calls": "bad", "content": blocks}) == ("u",)
    assert C.call_ids({"tool_calls": [{"id": "a"}, "x", {"id": None}]}) == ("a",)
    both = {"tool_calls": [{"id": "a"}], "content": [{"type": "tool_use", "id": "b"}]}
    assert C.call_ids(both) == ("a", "b")
    assert C.call_ids({"role": "assistant"}) == ()


def test_result_ids_and_gathering_by_role():
    assert C.result_ids({"role": "tool", "tool_call_id": "t"}) == ("t",)
    blocks = [
        {"type": "tool_result", "tool_use_id": "a"},
        {"type": "text"},
        {"type": "tool_result", "tool_use_id": "b"},
    ]
    assert C.result_ids({"role": "user", "content": blocks}) == ("a", "b")
    assert C.result_ids({"role": "assistant", "content": blocks}) == ()
    assert C.gathers({"role": "user"}) is True
    assert C.gathers({"role": "tool"}) is False


def test_calls_left_open_are_closed_in_each_shape():
    chat = {"role": "assistant", "tool_calls": [{"id": "a"}]}
    made, extra = C.close(chat, None, ["a", "b"], "err")
    assert made is None
    assert thaw(extra) == [
        {"role": "tool", "tool_call_id": "a", "content": "err"},
        {"role": "tool", "tool_call_id": "b", "content": "err"},
    ]
    blocks = {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]}
    made, extra = C.close(blocks, None, ["a"], "err")
    assert made is None
    error = {"type": "tool_result", "tool_use_id": "a", "content": "err", "is_error": True}
    assert thaw(extra) == [{"role": "user", "content": [error]}]
    gathered = {
        "role": "user",
        "content": [{"type": "text", "text": "note"}, {"type": "tool_result", "tool_use_id": "z"}],
    }
    made, extra = C.close(blocks, gathered, ["a"], "err")
    assert extra == []
    assert thaw(made) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "z"},
            error,
            {"type": "text", "text": "note"},
        ],
    }


def test_keep_results_keeps_the_wanted_ones_in_order_and_the_same_object_when_all():
    tool = {"role": "tool", "tool_call_id": "t"}
    assert C.keep_results(tool, lambda i: i == "t") is tool
    assert C.keep_results(tool, lambda i: False) is None
    asked = []
    m = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a"},
            {"type": "text", "text": "x"},
            {"type": "tool_result", "tool_use_id": "b"},
        ],
    }
    assert C.keep_results(m, lambda i: asked.append(i) or True) is m
    assert asked == ["a", "b"]
    kept = C.keep_results(m, lambda i: i == "b")
    assert thaw(kept) == {
        "role": "user",
        "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "b"}],
    }
    results_only = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}
    assert C.keep_results(results_only, lambda i: False) is None


@pytest.mark.parametrize(
    ("message", "native"),
    [
        ({"role": "assistant", "content": "x"}, True),
        ({"role": "assistant", "content": ""}, False),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "a"}]}, True),
        ({"role": "assistant", "content": None, "refusal": "no"}, True),
        ({"role": "assistant"}, False),
        ({"role": "user", "content": ""}, True),
        ({"role": "tool", "content": "x"}, True),
    ],
)
def test_native_chat(message, native):
    assert C.native_chat(message) is native


@pytest.mark.parametrize(
    ("message", "native"),
    [
        ({"role": "user", "content": "x"}, True),
        ({"role": "assistant", "content": "x"}, True),
        ({"role": "user", "content": ""}, False),
        ({"role": "system", "content": "x"}, False),
        ({"role": "user", "content": "x", "name": "n"}, False),
        ({"content": "x"}, False),
        ({"role": "user", "content": [{"type": "text", "text": "a"}]}, True),
        ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}, True),
        ({"role": "user", "content": [{"type": "text", "text": ""}]}, False),
        ({"role": "user", "content": [{"type": "text", "text": "a"}, "x"]}, False),
        ({"role": "user", "content": []}, False),
        ({"role": "user", "content": None}, False),
        ({"role": "user", "content": [IMAGE]}, False),
        ({"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}, False),
        ({"role": "user", "content": [{"type": "file", "file": {}}]}, False),
        ({"role": "user", "content": [{"type": "input_audio"}]}, False),
    ],
)
def test_native_blocks(message, native):
    assert C.native_blocks(message) is native
