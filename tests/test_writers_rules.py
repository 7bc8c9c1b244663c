"""Neutral items written in each dialect's messages (core/wire/writers.py), rule by rule:
system texts kept or lifted, results grouped, media of tool results, calls and their
arguments, another provider's reasoning and server tools dropped, what cannot be carried
as the policy says. Pure, no I/O: each writer is called with literal items."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.wire import writers as W
from toolnexus.core.wire.parts import UnsupportedPartError

PNG = {"type": "image", "mimeType": "image/png", "data": "aGk=", "name": "c.png"}
WAV = {"type": "audio", "mimeType": "audio/wav", "data": "aGk=", "name": "a.wav"}
BLOCK_IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": "aGk="}}  # fmt: skip
BLOCK_AUDIO = {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}}
THINKING = {"type": "thinking", "thinking": "hm", "signature": "s"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
GEMINI_OWN = {"type": "gemini_parts", "parts": []}
SERVER = {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
ODD = {"type": "odd_block", "x": 1}


def assistant(parts=(), calls=(), extras=(), own=None):
    return ("assistant", list(parts), list(calls), list(extras), FrozenMap(own or {}))


def text(t):
    return FrozenMap({"type": "text", "text": t})


# ---- the small helpers ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, server",
    [
        ("server_tool_use", True),
        ("mcp_tool_use", True),
        ("container_upload", True),
        ("web_search_tool_result", True),
        ("mcp_tool_result", True),
        ("tool_use", False),
        ("tool_result_x", False),
        ("text", False),
        (None, False),
        (3, False),
    ],
)
def test_a_server_tool_s_block_is_its_use_or_a_tool_result_in_an_assistant_turn(kind, server):
    assert W._server_side({"type": kind}) is server


def test_arguments_are_an_object_for_tool_use_and_broken_json_is_kept_as_text():
    assert W._args_input({"a": 1}) == {"a": 1}
    assert W._args_input('{"a": [1]}') == {"a": [1]}
    assert W._args_input("") == {} and W._args_input("  ") == {} and W._args_input(None) == {}
    assert W._args_input(5) == {}
    assert W._args_input("[1]") == {"INVALID_JSON": "[1]"}
    assert W._args_input("{bad") == {"INVALID_JSON": "{bad"}
    assert W._args_input("null") == {"INVALID_JSON": "null"}


def test_arguments_as_text_are_the_text_given_or_compact_json():
    assert W.args_text('{"a": 1}') == '{"a": 1}'
    assert W.args_text({"a": 1, "b": [1, 2]}) == '{"a":1,"b":[1,2]}'
    assert W.args_text(FrozenMap()) == "{}"


def test_a_block_is_read_by_whichever_reader_knows_it_and_an_unknown_one_is_bare():
    assert W.part_of({"type": "text", "text": "x"}, "openai") == {"type": "text", "text": "x"}
    assert W.part_of(BLOCK_IMAGE, "openai") == {
        "type": "image",
        "mimeType": "image/png",
        "data": "aGk=",
    }
    url = {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    assert W.part_of(url, "anthropic") == {"type": "image", "url": "https://x/a.png"}
    assert W.part_of({"type": "input_text", "text": "t"}, "anthropic") == {
        "type": "text",
        "text": "t",
    }
    assert W.part_of({"type": "odd"}, "anthropic") == {"type": "odd"}
    assert W.part_of({"x": 1}, "anthropic") == {"type": "unknown"}
    assert W.part_of({"type": ""}, "openai") == {"type": "unknown"}


# ---- chat completions ---------------------------------------------------------------


def test_chat_keeps_system_messages_in_place_and_lifts_nothing():
    items = [("system", "s"), ("user", "u"), ("system", "t")]
    messages, system = W.write_openai(items, "error")
    assert thaw(messages) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "system", "content": "t"},
    ]
    assert system == []


def test_chat_user_parts_drop_empty_text_and_an_empty_user_message_is_left_out():
    items = [("user", [text(""), text("a"), FrozenMap(PNG)]), ("user", ""), ("user", [text("")])]
    messages, _ = W.write_openai(items, "error")
    assert thaw(messages) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            ],
        }
    ]


def test_a_part_no_dialect_has_follows_the_policy():
    odd = FrozenMap({"type": "hologram"})
    with pytest.raises(UnsupportedPartError) as e:
        W.write_openai([("user", [odd])], "error")
    assert (
        str(e.value)
        == "openai cannot carry the hologram (unknown type) part: no such content there"
    )
    messages, _ = W.write_openai([("user", [odd])], "text")
    assert thaw(messages) == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "[hologram (unknown type) omitted: not supported by openai]",
                }
            ],
        }
    ]


def test_chat_results_are_tool_messages_text_kept_and_none_empty():
    items = [
        ("result", "c1", "4", False),
        ("result", "c2", None, True),
        ("result", "c3", "", False),
    ]
    messages, _ = W.write_openai(items, "error")
    assert thaw(messages) == [
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {"role": "tool", "tool_call_id": "c3", "content": ""},
    ]


def test_chat_result_parts_stay_text_parts_and_audio_there_follows_the_policy():
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": ""}, "junk"]
    messages, _ = W.write_openai([("result", "c", blocks, False)], "error")
    assert thaw(messages) == [
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "a"}]}
    ]
    audio = [{"type": "text", "text": "a"}, BLOCK_AUDIO]
    with pytest.raises(UnsupportedPartError) as e:
        W.write_openai([("result", "c", audio, False)], "error")
    assert str(e.value) == "openai cannot carry the audio (audio/wav) part: in a tool result"
    messages, _ = W.write_openai([("result", "c", audio, False)], "text")
    assert thaw(messages)[0]["content"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "[audio (audio/wav) omitted: not supported by openai]"},
    ]


def test_chat_result_media_goes_in_one_user_message_after_the_turn_s_results():
    shot = [{"type": "text", "text": "see"}, BLOCK_IMAGE, {"type": "odd"}]
    items = [
        ("result", "c1", shot, False),
        ("result", "c2", "ok", False),
        ("user", "next"),
    ]
    messages, _ = W.write_openai(items, "error")
    media = {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}
    assert thaw(messages) == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "see\n[image (image/png): attached below]",
        },
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Attached by the tools above:"}, media],
        },
        {"role": "user", "content": "next"},
    ]
    # at the end of the items too, and only once
    messages, _ = W.write_openai([("result", "c1", shot, False)], "error")
    assert [m["role"] for m in messages] == ["tool", "user"]
    assert W._media_message([]) == []


def test_chat_result_audio_alone_is_no_media_but_goes_along_with_an_image():
    audio = [{"type": "text", "text": "a"}, BLOCK_AUDIO]
    messages, _ = W.write_openai([("result", "c", audio, False)], "text")
    assert [m["role"] for m in messages] == ["tool"]
    both = [BLOCK_AUDIO, BLOCK_IMAGE]
    messages, _ = W.write_openai([("result", "c", both, False)], "error")
    assert thaw(messages)[0]["content"] == (
        "[audio (audio/wav): attached below]\n[image (image/png): attached below]"
    )
    note, audio_part, image_part = thaw(messages)[1]["content"]
    assert audio_part == {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}}
    assert image_part["type"] == "image_url"


def test_chat_assistant_text_calls_and_own_fields():
    calls = [("c1", "f", {"a": 1}, FrozenMap({"extra_content": {"k": 1}})), ("c2", "g", "{}", {})]
    own = {"reasoning_content": "r"}
    (m,) = W.write_openai([assistant([text("a"), text("b")], calls, own=own)], "error")[0]
    assert thaw(m) == {
        "reasoning_content": "r",
        "role": "assistant",
        "content": "ab",
        "tool_calls": [
            {"extra_content": {"k": 1}, "id": "c1", "type": "function",
             "function": {"name": "f", "arguments": '{"a":1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }  # fmt: skip
    (m,) = W.write_openai([assistant([], calls[1:])], "error")[0]
    assert m["content"] is None and "tool_calls" in m
    (m,) = W.write_openai([assistant([text("x")])], "error")[0]
    assert thaw(m) == {"role": "assistant", "content": "x"}


def test_chat_assistant_with_nothing_to_say_is_left_out_but_a_refusal_is_kept():
    assert W.write_openai([assistant()], "error")[0] == []
    assert W.write_openai([assistant([text("")])], "error")[0] == []
    (m,) = W.write_openai([assistant(own={"refusal": "no"})], "error")[0]
    assert thaw(m) == {"refusal": "no", "role": "assistant", "content": None}


def test_chat_drops_every_provider_s_reasoning_and_server_tools_and_places_the_rest():
    extras = [THINKING, REASONING, GEMINI_OWN, {"type": "redacted_thinking"}, SERVER]
    assert W.write_openai([assistant([text("a")], extras=extras)], "error")[0] == [
        {"role": "assistant", "content": "a"}
    ]
    with pytest.raises(UnsupportedPartError) as e:
        W.write_openai([assistant([text("a")], extras=[ODD])], "error")
    assert str(e.value).startswith("openai cannot carry the odd_block (unknown type) part")
    (m,) = W.write_openai([assistant([text("a")], extras=[ODD, {"x": 1}])], "text")[0]
    assert m["content"] == (
        "a[odd_block (unknown type) omitted: not supported by openai]"
        "[unknown (unknown type) omitted: not supported by openai]"
    )


# ---- messages (system lifted, results grouped) -------------------------------------


def test_messages_lift_system_texts_out_and_skip_empty_ones():
    items = [("system", "s"), ("user", "u"), ("system", ""), ("system", "t")]
    messages, system = W.write_anthropic(items, "error")
    assert thaw(messages) == [{"role": "user", "content": "u"}] and system == ["s", "t"]


def test_messages_results_of_a_turn_go_in_one_user_message_the_error_flagged():
    items = [
        ("user", "q"),
        ("result", "a", "1", False),
        ("result", "b", None, True),
        ("user", [text("more"), text("")]),
        ("result", "c", [{"type": "text", "text": "x"}, BLOCK_IMAGE, {"type": "odd"}], False),
    ]
    with pytest.raises(UnsupportedPartError, match="anthropic cannot carry the odd"):
        W.write_anthropic(items, "error")
    messages, system = W.write_anthropic(items, "text")
    assert system == []
    assert thaw(messages) == [
        {"role": "user", "content": "q"},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "b", "content": "", "is_error": True},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "more"}]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c",
                    "content": [
                        {"type": "text", "text": "x"},
                        BLOCK_IMAGE,
                        {"type": "text",
                         "text": "[odd (unknown type) omitted: not supported by anthropic]"},
                    ],
                }
            ],
        },
    ]  # fmt: skip
    assert W.write_anthropic([("user", [text("")]), ("user", "")], "error") == ([], [])


def test_messages_assistant_keeps_its_thinking_and_places_calls_last():
    calls = [("c1", "f", '{"a": 1}', {}), ("c2", "g", "{bad", {})]
    extras = [THINKING, REASONING, GEMINI_OWN]
    (m,) = W.write_anthropic([assistant([text("a"), text("")], calls, extras)], "error")[0]
    assert thaw(m) == {
        "role": "assistant",
        "content": [
            THINKING,
            {"type": "text", "text": "a"},
            {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
            {"type": "tool_use", "id": "c2", "name": "g", "input": {"INVALID_JSON": "{bad"}},
        ],
    }
    assert W.write_anthropic([assistant(extras=[REASONING, GEMINI_OWN])], "error") == ([], [])


def test_messages_a_refusal_is_the_answer_s_text():
    (m,) = W.write_anthropic([assistant([text("a")], own={"refusal": "no"})], "error")[0]
    assert thaw(m["content"]) == [{"type": "text", "text": "a"}, {"type": "text", "text": "no"}]
    assert W.write_anthropic([assistant(own={"refusal": ""})], "error") == ([], [])
    assert W.write_anthropic([assistant(own={"refusal": 1})], "error") == ([], [])


# ---- Responses -------------------------------------------------------------------------


def test_responses_keeps_system_messages_and_groups_a_turn_s_outputs():
    items = [
        ("system", "s"),
        ("system", ""),
        ("user", "u"),
        ("result", "a", "1", False),
        ("result", "b", None, True),
        ("user", [text("x"), text("")]),
        ("user", ""),
    ]
    messages, system = W.write_responses(items, "error")
    assert system == []
    assert thaw(messages) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "tool",
            "items": [
                {"type": "function_call_output", "call_id": "a", "output": "1"},
                {"type": "function_call_output", "call_id": "b", "output": ""},
            ],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "x"}]},
    ]


def test_responses_result_parts_are_input_parts_and_none_left_is_empty_text():
    blocks = [{"type": "text", "text": "x"}, BLOCK_IMAGE]
    (m,) = W.write_responses([("result", "c", blocks, False)], "error")[0]
    assert thaw(m["items"][0]["output"]) == [
        {"type": "input_text", "text": "x"},
        {"type": "input_image", "image_url": "data:image/png;base64,aGk=", "detail": "auto"},
    ]
    (m,) = W.write_responses([("result", "c", [{"type": "text", "text": ""}], False)], "error")[0]
    assert m["items"][0]["output"] == ""
    (m,) = W.write_responses([("result", "c", "", False)], "error")[0]
    assert m["items"][0]["output"] == ""


def test_responses_assistant_text_alone_is_a_plain_message():
    (m,) = W.write_responses([assistant([text("a"), text("b")])], "error")[0]
    assert thaw(m) == {"role": "assistant", "content": "ab"}
    assert W.write_responses([assistant()], "error") == ([], [])
    (m,) = W.write_responses([assistant(own={"refusal": "no"})], "error")[0]
    assert thaw(m) == {"role": "assistant", "content": "no"}
    assert W.write_responses([assistant(own={"refusal": ""})], "error") == ([], [])
    assert W.write_responses([assistant(own={"refusal": 1})], "error") == ([], [])


def test_responses_assistant_items_its_own_reasoning_first_then_text_then_calls():
    calls = [("c1", "f", {"a": 1}, {}), ("c2", "g", "{}", {})]
    extras = [THINKING, REASONING, GEMINI_OWN, SERVER]
    (m,) = W.write_responses([assistant([text("a")], calls, extras)], "error")[0]
    assert thaw(m) == {
        "role": "assistant",
        "items": [
            REASONING,
            {"role": "assistant", "content": "a"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        ],
    }
    (m,) = W.write_responses([assistant(extras=[REASONING])], "error")[0]
    assert thaw(m) == {"role": "assistant", "items": [REASONING]}
    (m,) = W.write_responses([assistant(calls=calls[1:])], "error")[0]
    assert [i["type"] for i in m["items"]] == ["function_call"]


def test_responses_assistant_places_another_provider_s_block_as_the_policy_says():
    with pytest.raises(UnsupportedPartError, match="^responses cannot carry the odd_block"):
        W.write_responses([assistant([text("a")], extras=[ODD])], "error")
    (m,) = W.write_responses([assistant([text("a")], extras=[ODD])], "text")[0]
    assert m["content"] == "a[odd_block (unknown type) omitted: not supported by responses]"


# ---- what an assistant or a result holds that the dialect cannot carry -----------------

PDF_URL = FrozenMap({"type": "file", "url": "https://x/d.pdf"})
BLOCK_PDF_URL = {"type": "document", "source": {"type": "url", "url": "https://x/d.pdf"}}


def test_chat_result_media_chat_cannot_carry_is_a_placeholder_in_the_user_message():
    messages, _ = W.write_openai([("result", "c", [BLOCK_PDF_URL, BLOCK_IMAGE], False)], "error")
    note, placeholder, image = thaw(messages)[1]["content"]
    assert placeholder == {
        "type": "text",
        "text": "[file https://x/d.pdf (unknown type) omitted: not supported by openai]",
    }
    assert image["type"] == "image_url"


@pytest.mark.parametrize("write", [W.write_openai, W.write_responses])
def test_an_assistant_s_media_follows_the_policy_where_its_turns_carry_text_alone(write):
    # It was dropped in silence: the answer said "a" and the image was gone.
    with pytest.raises(UnsupportedPartError) as e:
        write([assistant([text("a"), FrozenMap(PNG)])], "error")
    assert str(e.value).endswith(
        "cannot carry the image c.png (image/png) part: an assistant turn there carries text only"
    )
    (m,) = write([assistant([text("a"), FrozenMap(PNG)])], "text")[0]
    assert m["content"] == "a[image c.png (image/png) omitted: not supported by " + (
        "openai]" if write is W.write_openai else "responses]"
    )


def test_an_empty_text_part_says_nothing_in_the_text_of_an_answer():
    (m,) = W.write_responses([assistant([text(""), text("a")])], "error")[0]
    assert m["content"] == "a"


def test_an_assistant_s_part_the_dialect_cannot_carry_follows_the_policy():
    with pytest.raises(UnsupportedPartError, match="^openai cannot carry the file"):
        W.write_openai([assistant([text("a"), PDF_URL])], "error")
    (m,) = W.write_openai([assistant([text("a"), PDF_URL])], "text")[0]
    assert m["content"] == "a[file https://x/d.pdf (unknown type) omitted: not supported by openai]"
    with pytest.raises(UnsupportedPartError, match="^anthropic cannot carry the audio"):
        W.write_anthropic([assistant([FrozenMap(WAV)])], "error")
    (m,) = W.write_anthropic([assistant([FrozenMap(WAV)])], "text")[0]
    assert thaw(m["content"]) == [
        {"type": "text", "text": "[audio a.wav (audio/wav) omitted: not supported by anthropic]"}
    ]


def test_responses_result_parts_it_cannot_carry_follow_the_policy():
    blocks = [{"type": "text", "text": "x"}, BLOCK_AUDIO]
    with pytest.raises(UnsupportedPartError, match="^responses cannot carry the audio"):
        W.write_responses([("result", "c", blocks, False)], "error")
    (m,) = W.write_responses([("result", "c", blocks, False)], "text")[0]
    assert thaw(m["items"][0]["output"])[1] == {
        "type": "input_text",
        "text": "[audio (audio/wav) omitted: not supported by responses]",
    }


def test_a_user_s_part_the_dialect_cannot_carry_follows_the_policy():
    with pytest.raises(UnsupportedPartError, match="^anthropic cannot carry the audio"):
        W.write_anthropic([("user", [FrozenMap(WAV)])], "error")
    with pytest.raises(UnsupportedPartError, match="^responses cannot carry the audio"):
        W.write_responses([("user", [FrozenMap(WAV)])], "error")
    (m,) = W.write_responses([("user", [FrozenMap(WAV)])], "text")[0]
    assert thaw(m["content"]) == [
        {
            "type": "input_text",
            "text": "[audio a.wav (audio/wav) omitted: not supported by responses]",
        }
    ]
