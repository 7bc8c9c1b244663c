"""GenAI export and import, rule by rule: what `to_genai` writes for each neutral part
(empty text, media without a source, parts the format cannot name, empty results) and
how `from_genai` picks a media part's kind (modality first, then the MIME type), names
calls and results without ids, and carries reasoning. Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus import from_genai, to_genai
from toolnexus.core.frozen import thaw


def _result_of(blocks):
    """Return the GenAI response of one Anthropic tool result holding `blocks`."""
    t = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": blocks}],
        }
    ]
    (message,) = to_genai(t)
    assert message["role"] == "tool"
    return message["parts"][0]["response"]


def test_a_result_block_of_text_without_text_exports_empty_content():
    assert _result_of([{"type": "text"}]) == [{"type": "text", "content": ""}]


def test_media_without_data_or_url_exports_an_empty_uri():
    got = _result_of([{"type": "image", "source": {"type": "url"}}])
    assert got == [{"type": "uri", "modality": "image", "mime_type": None, "uri": ""}]


def test_a_part_the_format_cannot_name_exports_as_its_bare_type():
    assert _result_of([{"type": "weird"}]) == [{"type": "weird"}]


def test_a_part_without_a_type_exports_as_unknown():
    assert _result_of([{"text": "x"}, {}]) == [{"type": "unknown"}, {"type": "unknown"}]


def test_a_result_without_content_exports_an_empty_response():
    got = to_genai([{"role": "tool", "tool_call_id": "c1", "content": None}])
    assert got == [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": ""}]}
    ]


def test_empty_text_parts_of_a_prompt_are_dropped_and_the_rest_kept():
    t = [
        {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}]}
    ]
    assert to_genai(t) == [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]


def test_a_prompt_of_empty_text_only_is_not_exported():
    assert to_genai([{"role": "user", "content": [{"type": "text", "text": ""}]}]) == []
    assert to_genai([{"role": "user", "content": ""}]) == []


def test_an_assistant_turn_is_reasoning_then_text_and_refusal_then_calls():
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": raw}}
        for i, raw in (("c", ""), ("d", "{bad"), ("e", None), ("g", '{"x": [1]}'))
    ]
    t = [
        {
            "role": "assistant",
            "content": "ok ",
            "refusal": "no",
            "reasoning_content": "r",
            "tool_calls": calls,
        }
    ]
    (message,) = to_genai(t)
    assert message == {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "r"},
            {"type": "text", "content": "ok no"},
            {"type": "tool_call", "id": "c", "name": "f", "arguments": {}},
            {"type": "tool_call", "id": "d", "name": "f", "arguments": "{bad"},
            {"type": "tool_call", "id": "e", "name": "f", "arguments": {}},
            {"type": "tool_call", "id": "g", "name": "f", "arguments": {"x": [1]}},
        ],
    }


def test_an_empty_assistant_turn_is_not_exported():
    assert to_genai([{"role": "assistant", "content": ""}]) == []


def test_results_of_one_turn_share_one_tool_message_and_a_new_turn_starts_another():
    t = [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "c", "content": "3"},
    ]
    got = to_genai(t)
    assert [m["role"] for m in got] == ["tool", "user", "tool"]
    assert [p["id"] for p in got[0]["parts"]] == ["a", "b"]
    assert [p["id"] for p in got[2]["parts"]] == ["c"]


def _imported_kind(modality, mime):
    """Return the placeholder Anthropic writes for a blob it refuses (naming its kind)."""
    part = {"type": "blob", "modality": modality, "mime_type": mime, "content": "AAAA"}
    t = from_genai([{"role": "user", "parts": [part]}], "anthropic", on_unsupported_part="text")
    return t[0]["content"][0]["text"]


@pytest.mark.parametrize(
    ("modality", "mime", "said"),
    [
        ("video", "image/png", "[file (image/png) omitted"),  # the modality wins
        ("document", "audio/wav", "[file (audio/wav) omitted"),
        ("video", "video/mp4", "[file (video/mp4) omitted"),
        (None, "audio/wav", "[audio (audio/wav) omitted"),  # no modality: the MIME type
    ],
)
def test_a_media_part_is_typed_by_its_modality_then_its_mime_type(modality, mime, said):
    assert _imported_kind(modality, mime).startswith(said)


def test_an_image_blob_and_uri_import_as_image_parts_with_their_mime_type():
    parts = [
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
        {"type": "uri", "modality": "image", "mime_type": "image/jpeg", "uri": "https://x/y.jpg"},
    ]
    got = to_genai(from_genai([{"role": "user", "parts": parts}], "openai"))
    assert got == [
        {
            "role": "user",
            "parts": [
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
                {"type": "uri", "modality": "image", "mime_type": None, "uri": "https://x/y.jpg"},
            ],
        }
    ]  # an OpenAI image URL carries no MIME type


@pytest.mark.parametrize(
    ("part", "said"),
    [
        (
            {"type": "blob", "modality": "image", "mime_type": "image/png"},
            "message 0: a blob part needs a string ",
        ),
        ({"type": "uri", "modality": "image", "uri": 3}, "message 0: a uri part needs a string "),
        ({"type": "text", "content": None}, "message 0: a text part needs a string 'content'"),
        ({"type": "assistant_only"}, None),
    ],
)
def test_a_part_missing_its_value_is_refused_naming_it(part, said):
    if said is None:  # an unknown part type: refused by the dialect, as unsupported
        with pytest.raises(ValueError, match="assistant_only"):
            from_genai([{"role": "user", "parts": [part]}])
        return
    with pytest.raises(ValueError) as e:
        from_genai([{"role": "user", "parts": [part]}])
    assert str(e.value).startswith(said)


@pytest.mark.parametrize(
    ("part", "field"),
    [
        ({"type": "blob", "modality": "image", "mime_type": "image/png"}, "content"),
        ({"type": "uri", "modality": "image", "uri": 3}, "uri"),
    ],
)
def test_a_media_part_missing_its_value_is_refused_naming_its_genai_field(part, field):
    with pytest.raises(ValueError) as e:
        from_genai([{"role": "user", "parts": [part]}])
    assert str(e.value) == f"message 0: a {part['type']} part needs a string {field!r}"


def test_calls_and_results_without_ids_are_named_and_arguments_default_to_an_object():
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "go"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "th"},
                {"type": "reasoning", "content": "ink"},
                {"type": "text", "content": "a"},
                {"type": "tool_call", "name": "f"},
                {"type": "tool_call", "id": "k", "name": "g", "arguments": {"x": 1}},
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "response": {"a": 1}},
                {
                    "type": "tool_call_response",
                    "id": "k",
                    "response": [{"type": "text", "content": "r"}],
                },
            ],
        },
    ]
    t = from_genai(messages, "openai")
    turn = t[1]
    assert turn["reasoning_content"] == "think"
    assert turn["content"] == "a"
    assert [c["id"] for c in turn["tool_calls"]] == ["call_1_3", "k"]
    assert [c["function"]["arguments"] for c in turn["tool_calls"]] == ["{}", '{"x":1}']
    assert [dict(m) for m in t[2:]] == [
        {"role": "tool", "tool_call_id": "call", "content": '{"a": 1}'},
        {"role": "tool", "tool_call_id": "k", "content": t[3]["content"]},
    ]
    assert [dict(b) for b in t[3]["content"]] == [{"type": "text", "text": "r"}]


def test_reasoning_is_carried_in_each_dialects_own_shape():
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "q"}]},
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "hm"}, {"type": "text", "content": "a"}],
        },
    ]
    anthropic = from_genai(messages, "anthropic")[1]["content"]
    assert dict(anthropic[0]) == {"type": "thinking", "thinking": "hm"}
    responses = from_genai(messages, "responses")[1]["items"]
    assert responses[0]["type"] == "reasoning"
    assert [dict(s) for s in responses[0]["summary"]] == [{"type": "summary_text", "text": "hm"}]
    assert (
        "reasoning_content"
        not in from_genai(
            messages[:1] + [{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}],
            "openai",
        )[1]
    )


def test_a_system_message_joins_its_text_parts():
    messages = [
        {
            "role": "system",
            "parts": [{"type": "text", "content": "a"}, {"type": "text", "content": "b"}],
        },
        {"role": "user", "parts": [{"type": "text", "content": "q"}]},
    ]
    t = from_genai(messages, "openai")
    assert dict(t[0]) == {"role": "system", "content": "ab"}


def test_a_user_message_of_several_parts_stays_a_list_and_one_text_part_is_plain_text():
    two = [{"type": "text", "content": "a"}, {"type": "text", "content": "b"}]
    t = from_genai([{"role": "user", "parts": two}], "openai")
    assert [dict(p) for p in t[0]["content"]] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    one = from_genai([{"role": "user", "parts": two[:1]}], "openai")
    assert one[0]["content"] == "a"


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        (
            [{"role": "user", "parts": "x"}],
            "message 0: a GenAI message is an object with a 'role' and a 'parts' list",
        ),
        (["x"], "message 0: a GenAI message is an object with a 'role' and a 'parts' list"),
        (
            [{"role": "user", "parts": [{"type": "text", "content": "a"}, "b"]}],
            "message 0: every part is an object with a 'type'",
        ),
        (
            [{"role": "robot", "parts": []}],
            "message 0: role 'robot': expected system, user, assistant or tool",
        ),
        ("text", "GenAI messages are a list of {role, parts} objects"),
        ({"role": "user"}, "GenAI messages are a list of {role, parts} objects"),
    ],
)
def test_bad_messages_are_refused_with_a_message_saying_why(messages, said):
    with pytest.raises(ValueError) as e:
        from_genai(messages)
    assert str(e.value) == said


def test_an_unknown_style_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"^unknown style 'nope': expected one of \('openai'"):
        from_genai([], "nope")


def test_a_tool_message_without_results_or_parts_adds_nothing():
    assert list(from_genai([{"role": "tool", "parts": []}], "openai")) == []


def test_an_assistant_turn_joins_its_thinking_and_its_text_blocks():
    t = [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "a", "signature": "s"},
                {"type": "thinking", "thinking": "b", "signature": "s"},
                {"type": "text", "text": "x"},
                {"type": "text"},
                {"type": "text", "text": "y"},
            ],
        }
    ]
    assert to_genai(t) == [
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "ab"}, {"type": "text", "content": "xy"}],
        }
    ]


def test_a_gemini_calls_object_arguments_export_as_plain_json():
    call = {"functionCall": {"id": "k", "name": "f", "args": {"x": [1, {"y": [2]}]}}}
    t = [{"role": "assistant", "parts": [call]}]
    (message,) = to_genai(t)
    (call,) = message["parts"]
    assert call["type"] == "tool_call" and call["name"] == "f"
    assert call["arguments"] == {"x": [1, {"y": [2]}]}
    assert type(call["arguments"]) is dict and type(call["arguments"]["x"]) is list


@pytest.mark.parametrize(
    ("part", "said"),
    [
        (
            {"type": 3},
            {
                "type": "text",
                "text": "[unknown (unknown type) omitted: not supported by anthropic]",
            },
        ),
        (
            {"type": "weird"},
            {"type": "text", "text": "[weird (unknown type) omitted: not supported by anthropic]"},
        ),
        (
            {"type": "blob", "modality": "x", "mime_type": "text/plain", "content": "AA"},
            {"type": "text", "text": "[file (text/plain) omitted: not supported by anthropic]"},
        ),
        (
            {"type": "uri", "uri": "https://x/a"},
            {"type": "document", "source": {"type": "url", "url": "https://x/a"}},
        ),
        (
            {"type": "uri", "mime_type": "image/png", "uri": "https://x/a.png"},
            {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        ),
    ],
)
def test_an_imported_part_of_an_unknown_type_or_modality_is_typed_by_the_rules(part, said):
    t = from_genai([{"role": "user", "parts": [part]}], "anthropic", on_unsupported_part="text")
    (block,) = t[0]["content"]
    assert thaw(block) == said


def test_imported_results_keep_text_as_sent_drop_non_objects_and_are_not_errors():
    parts = [
        {"type": "tool_call_response", "id": "k", "response": "plain"},
        {
            "type": "tool_call_response",
            "id": "j",
            "response": [
                {"type": "blob", "modality": "audio", "mime_type": "audio/wav", "content": "AA"},
                "junk",
                {"type": "text", "content": "t"},
            ],
        },
    ]
    (message,) = from_genai([{"role": "tool", "parts": parts}], "anthropic")
    assert thaw(message) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "k", "content": "plain"},
            {
                "type": "tool_result",
                "tool_use_id": "j",
                "content": [
                    # a result's block the dialect cannot carry is always a placeholder
                    {
                        "type": "text",
                        "text": "[audio (audio/wav) omitted: not supported by anthropic]",
                    },
                    {"type": "text", "text": "t"},
                ],
            },
        ],
    }


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            {"role": "system", "parts": [{"type": "text", "content": 1}]},
            "message 1: a text part needs a string 'content'",
        ),
        (
            {"role": "assistant", "parts": [{"type": "reasoning"}]},
            "message 1: a reasoning part needs a string 'content'",
        ),
        (
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c"}]},
            "message 1: a tool_call part needs a string 'name'",
        ),
        (
            {"role": "assistant", "parts": [{"type": "text", "content": None}]},
            "message 1: a text part needs a string 'content'",
        ),
        (
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "response": [{"type": "text"}]}],
            },
            "message 1: a text part needs a string 'content'",
        ),
    ],
)
def test_a_bad_part_is_refused_naming_its_message(message, said):
    first = {"role": "user", "parts": [{"type": "text", "content": "q"}]}
    with pytest.raises(ValueError) as e:
        from_genai([first, message])
    assert str(e.value) == said


def test_media_an_assistant_turn_carries_follows_its_text():
    t = [
        {
            "role": "assistant",
            "parts": [{"text": "a"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}],
        }
    ]
    assert to_genai(t) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "a"},
                {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
            ],
        }
    ]
