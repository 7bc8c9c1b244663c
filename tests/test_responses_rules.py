"""The Responses codec (core/wire/responses.py), rule by rule: tool entries, the request
body and its input items, what a request leaves out, server state, the transcript
algebra, content parts, tool results and decoding an answer. Pure, no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import responses as R
from toolnexus.core.wire.common import MalformedResponse
from toolnexus.core.wire.parts import UnsupportedPartError, placeholder
from toolnexus.core.wire.responses_stream import ResponsesStream

ENC = "reasoning.encrypted_content"


def test_the_module_constants():
    assert dict(R.STATELESS) == {"store": False, "include": (ENC,)}
    assert R.KEY_ENV == ("OPENAI_API_KEY", "OPENROUTER_API_KEY")
    assert R.OWNED_PARAMS == ("model", "input", "tools", "stream", "instructions")
    assert R._ENDS == {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


# ---- tools and url ---------------------------------------------------------------------


TOOL = {"name": "add", "description": "adds", "input_schema": {"type": "object"}}
ENTRY = {
    "type": "function",
    "name": "add",
    "description": "adds",
    "parameters": {"type": "object"},
    "strict": False,
}


def test_a_tool_entry_is_a_non_strict_function():
    assert thaw(R.tool_entry(TOOL)) == ENTRY


def test_encode_tools_uses_the_built_entries_else_builds_them():
    assert R.encode_tools(None) == () and R.encode_tools({}) == ()
    built = ("built",)
    assert R.encode_tools({"wire": {"responses": built}, "tools": [TOOL]}) is built
    for toolkit in ({"wire": {"other": 1}, "tools": [TOOL]}, {"wire": None, "tools": [TOOL]}):
        made = R.encode_tools(toolkit)
        assert isinstance(made, type(pvector())) and thaw(made) == [ENTRY]


def test_url_strips_every_trailing_slash():
    assert R.url("https://h/v1//") == "https://h/v1/responses"
    assert R.url("https://h/v1") == "https://h/v1/responses"
    assert R.url("https://h/X") == "https://h/X/responses"  # only slashes go


# ---- input items -----------------------------------------------------------------------


def _assistant(*items, **more):
    return {"role": "assistant", "items": list(items), **more}


def _said(*parts, **more):
    return {"type": "message", "role": "assistant", "content": list(parts), **more}


def test_an_output_message_with_an_id_gets_its_schema_fields():
    item = _said(
        {"type": "output_text", "text": "hi"},
        {"type": "output_text", "text": ""},
        {"type": "output_text", "text": "yo", "annotations": ["a"]},
        {"type": "refusal", "refusal": "no"},
        "junk",
        id="msg_1",
    )
    (out,) = R.input_items([_assistant(item)])
    assert out == {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [
            {"annotations": [], "logprobs": [], "type": "output_text", "text": "hi"},
            {"annotations": ["a"], "logprobs": [], "type": "output_text", "text": "yo"},
            {"type": "refusal", "refusal": "no"},
        ],
    }
    (out,) = R.input_items([_assistant({**item, "status": "incomplete"})])
    assert out["status"] == "incomplete"


def test_an_output_message_without_an_id_goes_as_its_text():
    item = _said({"type": "output_text", "text": "a"}, {"type": "refusal", "refusal": "b"})
    assert R.input_items([_assistant(item)]) == [{"role": "assistant", "content": "ab"}]
    for bad_id in (None, 3):
        item = _said({"type": "output_text", "text": "a"}, id=bad_id)
        assert R.input_items([_assistant(item)]) == [{"role": "assistant", "content": "a"}]
    # nothing to say: no text and no refusal, or no part at all
    assert R.input_items([_assistant(_said({"type": "refusal"}))]) == []
    assert R.input_items([_assistant(_said({"type": "output_text", "text": ""}, id="m"))]) == []
    assert R.input_items([_assistant({"type": "message", "role": "assistant", "id": "m"})]) == []


def test_a_message_item_of_another_role_goes_as_it_is():
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ""}]}
    assert R.input_items([_assistant(item, {"type": "function_call", "call_id": "c"})])[0] is item


def test_reasoning_is_replayed_encrypted_or_by_id_where_stored():
    enc = {"type": "reasoning", "id": "rs", "encrypted_content": "E"}
    by_id = {"type": "reasoning", "id": "rs2", "summary": []}
    no_id = {"type": "reasoning", "summary": []}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    m = _assistant(enc, by_id, no_id, call)
    assert R.input_items([m]) == [enc, call]
    assert R.input_items([m], stored=True) == [enc, by_id, call]
    assert R.input_items([m], True)[0] is enc  # an item without nulls is the same object


def test_items_lose_their_null_fields_and_non_objects():
    call = {"type": "function_call", "call_id": "c", "async": None, "namespace": None}
    assert R.input_items([_assistant(call, "junk", 3)]) == [{"type": "function_call",
                                                             "call_id": "c"}]  # fmt: skip
    plain = {"type": "function_call", "call_id": "c"}
    assert R._without_nulls(plain) is plain


def test_reasoning_ending_an_assistant_turn_is_left_out():
    enc = {"type": "reasoning", "id": "rs", "encrypted_content": "E"}
    call = {"type": "function_call", "call_id": "c"}
    assert R.input_items([_assistant(call, enc, enc)]) == [call]
    assert R.input_items([_assistant(enc)]) == []
    # only an assistant turn: another message's items stay, and a later turn never cuts them
    out = {"type": "function_call_output", "call_id": "c", "output": "x"}
    tool = {"role": "tool", "items": [out, enc]}
    assert R.input_items([tool]) == [out, enc]
    assert R.input_items([tool, _assistant()]) == [out, enc]
    assert R.input_items([tool, _assistant(enc)]) == [out, enc]


def test_messages_without_items_go_as_they_are_but_empty_answers():
    user = {"role": "user", "content": ""}
    answer = {"role": "assistant", "content": "yes"}
    got = R.input_items([user, {"role": "assistant", "content": ""}, {"role": "assistant"},
                         answer])  # fmt: skip
    assert got == [user, answer] and got[0] is user and got[1] is answer


def test_the_body_fields():
    msgs = [{"role": "user", "content": "hi"}]
    assert R.body("o4-mini", msgs, (), "", {}) == {
        "model": "o4-mini",
        "input": msgs,
        "store": False,
        "include": [ENC],
    }
    assert R.body("gpt-4o", msgs, ["t"], "be brief", None) == {
        "model": "gpt-4o",
        "input": msgs,
        "instructions": "be brief",
        "tools": ["t"],
        "store": False,
    }
    got = R.body("o4-mini", msgs, (), "", {"store": True, "temperature": 0})
    assert got["store"] is True and got["temperature"] == 0


def test_the_body_replays_reasoning_by_id_when_params_store():
    by_id = {"type": "reasoning", "id": "rs", "summary": []}
    call = {"type": "function_call", "call_id": "c"}
    msgs = [_assistant(by_id, call)]
    assert R.body("m", msgs, (), "", {"store": True})["input"] == [by_id, call]
    assert R.body("m", msgs, (), "", {"store": False})["input"] == [call]
    assert R.body("m", msgs, (), "", {"x": 1})["input"] == [call]
    assert R.body("m", msgs, (), "", {})["input"] == [call]


# ---- what a request leaves out ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "left_out"),
    [
        ("gpt-4o", True),
        ("gpt-4o-mini", True),
        ("openai/gpt-4o", True),
        ("ft:gpt-4o:org:x", True),
        ("GPT-4.1", True),
        ("gpt-4.5-preview", True),
        ("gpt-4", True),
        ("gpt-4-turbo", True),
        ("gpt-3.5-turbo", True),
        ("chatgpt-4o-latest", True),
        ("gpt-4ox", False),
        ("my-gpt-4o", False),
        ("gpt-5", False),
        ("o4-mini", False),
        ("o3", False),
    ],
)
def test_omissions_leave_out_encrypted_reasoning_for_models_that_do_not_reason(model, left_out):
    assert R.omissions(model) == (frozenset({"encrypted_content"}) if left_out else frozenset())


def test_refused_part_reads_a_400_about_encrypted_content():
    said = "Encrypted content is not supported with this model."
    assert R.refused_part(ProviderError(said, status=400)) == "encrypted_content"
    assert R.refused_part(ProviderError("x", status=400, body=said)) == "encrypted_content"
    assert R.refused_part(ProviderError("other", status=400)) is None
    assert R.refused_part(ProviderError(said, status=500)) is None


def test_omit_drops_only_the_encrypted_reasoning_from_include():
    names = frozenset({"encrypted_content"})
    both = {"model": "m", "include": [ENC, "x"]}
    assert R.omit(both, names) == {"model": "m", "include": ["x"]}
    assert R.omit({"model": "m", "include": [ENC]}, names) == {"model": "m"}
    for body in ({"model": "m"}, {"include": []}, {"include": ["x"]}):
        assert R.omit(body, names) is body
    assert R.omit(both, frozenset({"other"})) is both


def test_stored_asks_the_server_to_keep_the_response():
    assert R.stored({"model": "m", "store": False}) == {"model": "m", "store": True}


def test_server_state_names_the_latest_answer_with_an_id():
    body = {"model": "m", "input": ["all"]}
    by_id = {"type": "reasoning", "id": "rs", "summary": []}
    call = {"type": "function_call", "call_id": "c"}
    msgs = [
        _assistant(response_id="r1"),
        {"role": "user", "content": "a"},
        _assistant(by_id, call, response_id="r2"),
        {"role": "tool", "items": [by_id], "response_id": "r3"},  # not an answer
        _assistant(response_id=""),
        _assistant(response_id=7),
        {"role": "user", "content": "b"},
    ]
    got = R.server_state_body(body, msgs)
    assert got == {
        "model": "m",
        "input": [by_id, {"role": "user", "content": "b"}],
        "store": True,
        "previous_response_id": "r2",
    }
    assert R.server_state_body(body, msgs[:2]) == {**body, "store": True,
                                                   "previous_response_id": "r1",
                                                   "input": [{"role": "user",
                                                              "content": "a"}]}  # fmt: skip
    assert R.server_state_body(body, msgs[1:2]) == {**body, "store": True}
    # the very last message may be the answer: nothing after it goes
    got = R.server_state_body(body, msgs[:3])
    assert got == {**body, "store": True, "previous_response_id": "r2", "input": []}
    assert R.server_state_body(body, []) == {**body, "store": True}


@pytest.mark.parametrize(
    ("error", "gone"),
    [
        (ProviderError("previous_response_id not found", status=400), True),
        (ProviderError("Previous response rs was deleted", status=404), True),
        (ProviderError("bad", status=404, body="no such previous_response"), True),
        (ProviderError("previous_response_id not found", status=500), False),
        (ProviderError("some other trouble", status=400), False),
        (ValueError("previous response"), False),
    ],
)
def test_forgotten_reads_a_400_or_404_about_the_previous_response(error, gone):
    assert R.forgotten(error) is gone


def test_cache_body_carries_the_conversation_as_prompt_cache_key():
    assert R.cache_body({"model": "m"}, "conv") == {"model": "m", "prompt_cache_key": "conv"}
    body = {"model": "m"}
    assert R.cache_body(body, None) is body


def test_with_output_asks_for_a_json_schema_text_format():
    spec = {"name": "n", "schema": {"type": "object"}, "strict": True}
    fmt = {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": True}
    assert thaw(R.with_output({"x": 1}, spec)) == {"x": 1, "text": {"format": fmt}}
    got = R.with_output({"text": {"verbosity": "low", "format": "old"}}, spec)
    assert thaw(got) == {"text": {"verbosity": "low", "format": fmt}}
    assert thaw(R.with_output({}, spec)) == {"text": {"format": fmt}}


def test_replayable_drops_empty_answers_and_turns_with_nothing_left():
    msgs = [{"role": "user", "content": ""}, _assistant({"type": "function_call", "call_id": "c"})]
    assert R.replayable(msgs) is msgs
    by_id = {"type": "reasoning", "id": "rs"}
    keep = [msgs[0], {"role": "assistant", "content": "x"}, msgs[1]]
    drop = [
        {"role": "assistant", "content": ""},
        {"role": "assistant"},
        _assistant(),
        _assistant(by_id),  # kept by id where stored, but it ends its turn
        _assistant(_said({"type": "output_text", "text": ""}, id="m")),
    ]
    got = R.replayable([drop[0], keep[0], drop[1], keep[1], drop[2], drop[3], keep[2], drop[4]])
    assert got == keep


# ---- the transcript algebra ------------------------------------------------------------


def test_call_ids_are_the_function_calls_of_an_assistant_turn():
    m = _assistant(
        {"type": "function_call", "call_id": "a"},
        {"type": "function_call", "call_id": 3},
        {"type": "function_call_output", "call_id": "x"},
        "junk",
        {"type": "function_call", "call_id": "b"},
    )
    assert R.call_ids(m) == ("a", "b")
    assert R.call_ids({**m, "role": "tool"}) == ()
    assert R.call_ids({"role": "assistant"}) == ()


def test_result_ids_are_the_outputs_of_a_results_message():
    m = {
        "role": "tool",
        "items": [
            {"type": "function_call_output", "call_id": "a"},
            {"type": "function_call", "call_id": "x"},
            "junk",
            {"type": "function_call_output"},
        ],
    }
    assert R.result_ids(m) == ("a", None)
    assert R.result_ids({**m, "role": "assistant"}) == ()
    assert R.result_ids({"role": "tool", "content": "x"}) == ()


def test_owns_result_items_and_the_results_message():
    for items in ([], (), pvector()):
        assert R.owns({"items": items}) is True
    for m in ({}, {"items": None}, {"items": "x"}):
        assert R.owns(m) is False
    assert R.result_items({"items": ["a"]}) == ["a"]
    assert R.result_items({"items": None}) == () and R.result_items({}) == ()
    item = R.output_item("c", "out")
    assert dict(item) == {"type": "function_call_output", "call_id": "c", "output": "out"}
    made = R.results_message([item])
    assert thaw(made) == {"role": "tool", "items": [thaw(item)]}
    assert isinstance(made["items"], type(pvector()))


def test_valid_call_id_is_1_to_64_characters():
    assert not R.valid_call_id("")
    assert R.valid_call_id("a") and R.valid_call_id("a" * 64)
    assert not R.valid_call_id("a" * 65)


# ---- tool results and content parts -----------------------------------------------------


def test_tool_results_go_as_one_message_of_outputs_in_call_order():
    calls = [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}]
    image = {"type": "image", "url": "https://x/a.png"}
    results = [
        {"output": "text"},
        {"output": {"k": "é", "n": [1, 2]}},
        {"output": [{"type": "text", "text": "see"}, {"type": "text", "text": " \n"}, image]},
        {"output": [{"type": "text", "text": "  "}]},
    ]
    (m,) = R.tool_result_messages(calls, results)
    assert thaw(m) == {
        "role": "tool",
        "items": [
            {"type": "function_call_output", "call_id": "a", "output": "text"},
            {"type": "function_call_output", "call_id": "b", "output": '{"k":"é","n":[1,2]}'},
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": [
                    {"type": "input_text", "text": "see"},
                    {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"},
                ],
            },
            {"type": "function_call_output", "call_id": "d", "output": "(no output)"},
        ],
    }
    with pytest.raises(ValueError):
        R.tool_result_messages(calls, results[:1])


def test_an_audio_part_in_a_tool_result_goes_as_its_placeholder_text():
    audio = {"type": "audio", "mimeType": "audio/wav", "data": "aGk="}
    (m,) = R.tool_result_messages([{"id": "a"}], [{"output": [audio]}])
    text = placeholder(audio, "responses")
    assert thaw(m["items"][0]["output"]) == [{"type": "input_text", "text": text}]


def test_to_part_for_each_kind():
    assert dict(R.to_part({"type": "text", "text": "hi"})) == {"type": "input_text", "text": "hi"}
    assert dict(R.to_part({"type": "image", "url": "https://x/a.png", "data": "Zg=="})) == {
        "type": "input_image",
        "image_url": "https://x/a.png",
        "detail": "auto",
    }
    image = {"type": "image", "mimeType": "image/png", "data": "aGk="}
    assert R.to_part(image)["image_url"] == "data:image/png;base64,aGk="
    file = {"type": "file", "mimeType": "application/pdf", "data": "aGk=", "name": "a.pdf"}
    assert dict(R.to_part(file)) == {
        "type": "input_file",
        "file_data": "data:application/pdf;base64,aGk=",
        "filename": "a.pdf",
    }
    assert R.to_part({**file, "name": None})["filename"] == "file"
    assert R.to_part({**file, "name": ""})["filename"] == "file"
    assert dict(R.to_part({"type": "file", "url": "https://x/a.pdf"})) == {
        "type": "input_file",
        "file_url": "https://x/a.pdf",
    }
    assert dict(R.to_part({"type": "file", "url": "https://x/a.pdf", "data": None})) == {
        "type": "input_file",
        "file_url": "https://x/a.pdf",
    }


def test_audio_is_refused_or_goes_as_input_text():
    audio = {"type": "audio", "mimeType": "audio/wav", "data": "aGk="}
    with pytest.raises(UnsupportedPartError) as e:
        R.to_part(audio)
    assert str(e.value) == "responses cannot carry the audio (audio/wav) part: no audio input"
    got = R.to_part(audio, "text")
    assert dict(got) == {"type": "input_text", "text": placeholder(audio, "responses")}
    with pytest.raises(UnsupportedPartError):
        R.user_message_parts([audio])
    made = R.user_message_parts([audio], "text")
    assert thaw(made["content"]) == [
        {"type": "input_text", "text": placeholder(audio, "responses")}
    ]


def test_user_message_parts_checks_and_converts_each_part():
    made = R.user_message_parts([{"type": "text", "text": "hi"}])
    assert thaw(made) == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert isinstance(made["content"], type(pvector()))
    image = {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="}
    with pytest.raises(ValueError, match="image part of 5 bytes exceeds max_part_bytes=4"):
        R.user_message_parts([image], max_part_bytes=4)
    assert R.user_message_parts([image], max_part_bytes=5)["content"][0]["type"] == "input_image"


@pytest.mark.parametrize(
    ("block", "part"),
    [
        ({"type": "input_text", "text": "a"}, {"type": "text", "text": "a"}),
        ({"type": "output_text", "text": "b"}, {"type": "text", "text": "b"}),
        ({"type": "output_text", "text": None}, {"type": "text", "text": ""}),
        ({"type": "refusal", "refusal": "no"}, {"type": "text", "text": "no"}),
        ({"type": "refusal"}, {"type": "text", "text": ""}),
        (
            {"type": "input_image", "image_url": "data:image/png;base64,aGk="},
            {"type": "image", "mimeType": "image/png", "data": "aGk="},
        ),
        ({"type": "input_image", "image_url": "https://x/a.png"}, {"type": "image",
                                                                    "url": "https://x/a.png"}),
        ({"type": "input_image", "image_url": {"url": "x"}}, None),
        (
            {"type": "input_file", "file_data": "data:application/pdf;base64,aGk=",
             "filename": "a.pdf"},
            {"type": "file", "mimeType": "application/pdf", "data": "aGk=", "name": "a.pdf"},
        ),
        (
            {"type": "input_file", "file_data": "plain", "file_url": "https://x/f",
             "filename": "f"},
            {"type": "file", "url": "https://x/f", "name": "f"},
        ),
        ({"type": "input_file", "file_url": "https://x/f"}, {"type": "file", "url": "https://x/f"}),
        ({"type": "input_file", "file_data": "plain"}, None),
        ({"type": "input_file", "file_id": "file-1"}, None),
        ({"type": "input_audio"}, None),
    ],
)  # fmt: skip
def test_from_part(block, part):
    got = R.from_part(block)
    assert (None if got is None else dict(got)) == part


# ---- decoding an answer ----------------------------------------------------------------


def _answer(*output, **more):
    return {"status": "completed", "output": list(output), **more}


def test_an_answer_reads_as_text_refusal_calls_and_items():
    output = [
        {"type": "reasoning", "id": "rs", "encrypted_content": "E", "summary": None},
        _said(
            {"type": "output_text", "text": "a"},
            {"type": "output_text", "text": 5},
            {"type": "refusal", "refusal": "no"},
            {"type": "refusal", "refusal": None},
            {"type": "output_text", "text": "b"},
            "junk",
        ),
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"x":1}'},
    ]
    t = R.parse_response(_answer(*output, id="resp_1", model="gpt-x"))
    assert t["text"] == "ab" and t["refusal"] == "no"
    assert thaw(t["tool_calls"]) == [{"id": "c", "name": "f", "arguments": '{"x":1}'}]
    assert thaw(t["message"]) == {
        "role": "assistant",
        "items": [{"type": "reasoning", "id": "rs", "encrypted_content": "E"}, output[1],
                  output[2]],
        "response_id": "resp_1",
    }  # fmt: skip
    assert t["model"] == "gpt-x" and t["finish"] == "completed" and t["end"] is None
    assert dict(t["usage"]) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_an_answer_without_items_is_the_empty_answer_and_no_refusal():
    t = R.parse_response({"status": "completed", "id": "r", "model": 3})
    assert dict(t["message"]) == {"role": "assistant", "content": ""}
    assert t["refusal"] is None and t["text"] == "" and t["model"] is None
    assert thaw(t["tool_calls"]) == []
    t = R.parse_response(_answer(_said({"type": "output_text", "text": "x"}), id=5))
    assert "response_id" not in t["message"]


def test_calls_get_unique_ids_string_names_and_json_arguments():
    output = [
        {"type": "function_call", "name": "f", "arguments": {"a": 1}},
        {"type": "function_call", "call_id": "", "name": ["g"], "arguments": None},
        {"type": "function_call", "call_id": "d", "name": "h", "arguments": "{}"},
        {"type": "function_call", "call_id": "d", "name": "h", "arguments": "{}"},
    ]
    t = R.parse_response(_answer(*output))
    assert thaw(t["tool_calls"]) == [
        {"id": "call_0", "name": "f", "arguments": '{"a":1}'},
        {"id": "call_1", "name": '["g"]', "arguments": "{}"},
        {"id": "d", "name": "h", "arguments": "{}"},
        {"id": "d_2", "name": "h", "arguments": "{}"},
    ]
    items = thaw(t["message"]["items"])
    assert items[0] == {**output[0], "call_id": "call_0"}
    assert items[1] == {"type": "function_call", "call_id": "call_1", "name": '["g"]'}
    assert items[2] == output[2] and items[3] == {**output[3], "call_id": "d_2"}


def test_reasoning_ending_an_answer_is_cut():
    rs = {"type": "reasoning", "id": "rs", "summary": []}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    t = R.parse_response(_answer(rs, call, rs, rs))
    assert thaw(t["message"]["items"]) == [rs, call]
    assert dict(R.parse_response(_answer(rs))["message"]) == {"role": "assistant", "content": ""}


def test_usage_reads_its_details():
    u = {
        "input_tokens": 10,
        "output_tokens": 4,
        "input_tokens_details": {"cached_tokens": 3},
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    assert dict(R.parse_response(_answer(usage=u))["usage"]) == {
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "total_tokens": 14,
        "cache_read_tokens": 3,
        "reasoning_tokens": 2,
    }
    u = {"input_tokens": 1, "input_tokens_details": 5, "output_tokens_details": "x"}
    assert dict(R.parse_response(_answer(usage=u))["usage"]) == {
        "prompt_tokens": 1,
        "completion_tokens": 0,
        "total_tokens": 1,
    }
    assert R.parse_response(_answer(usage=[1]))["usage"]["total_tokens"] == 0


@pytest.mark.parametrize(
    ("status", "details", "finish", "end"),
    [
        ("incomplete", {"reason": "max_output_tokens"}, "max_output_tokens", "max_tokens"),
        ("incomplete", {"reason": "content_filter"}, "content_filter", "content_filter"),
        ("incomplete", {"reason": "other"}, "other", "incomplete"),
        ("incomplete", None, "incomplete", "incomplete"),
        ("incomplete", {"reason": 3}, "incomplete", "incomplete"),
        ("completed", {"reason": "max_output_tokens"}, "max_output_tokens", None),
        (7, None, None, None),
    ],
)
def test_an_incomplete_answer_ends_with_its_reason(status, details, finish, end):
    t = R.parse_response({"status": status, "incomplete_details": details, "output": []})
    assert (t["finish"], t["end"]) == (finish, end)


def test_a_failed_answer_is_a_provider_error_with_its_message():
    for data in ({"status": "failed"}, {"status": "failed", "error": ""}):
        with pytest.raises(R.FailedResponse) as e:
            R.parse_response(data)
        assert str(e.value) == "the response failed" and isinstance(e.value, ProviderError)
        assert isinstance(e.value, ValueError)
    # an error map is an error envelope (common.response_object) before it is read here
    cases = [
        ({"status": "completed", "error": {"message": "boom"}}, "boom"),
        ({"error": {"message": ""}}, "the response failed"),
        ({"error": {"message": 5}}, "the response failed"),
        ({"error": {}}, "the response failed"),
        ({"status": "failed", "error": "x"}, "the response failed"),
    ]
    for data, said in cases:
        with pytest.raises(R.FailedResponse) as e:
            R._failed(data)
        assert str(e.value) == said
    for data in ({"status": "completed", "error": "x"}, {"status": "completed", "error": None}):
        assert R._failed(data) is None
    assert R.parse_response({"status": "completed", "error": ""})["finish"] == "completed"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"output": {}}, "output is a JSON dict, not an array"),
        ({"output": ["x"]}, "output[0] is a JSON str, not an object"),
        ({"output": [{"type": "x"}, 3]}, "output[1] is a JSON int, not an object"),
        ({"output": [{"type": "message", "content": "t"}]}, "output[0].content is a JSON str, "
                                                            "not an array"),
        ({"status": "incomplete", "incomplete_details": {"reason": [1]}},
         "malformed response: TypeError"),
        ("[1]", "response is a JSON list, not an object"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_refused_naming_where(data, said):
    with pytest.raises(MalformedResponse) as e:
        R.parse_response(data)
    assert str(e.value) == said


def test_an_answer_is_read_from_json_text_and_content_may_be_missing():
    raw = b'{"status":"completed","output":[{"type":"message","content":null}]}'
    t = R.parse_response(raw)
    assert t["text"] == "" and thaw(t["message"]["items"]) == [{"type": "message"}]
    t = R.parse_response({"status": "completed", "output": None})
    assert dict(t["message"]) == {"role": "assistant", "content": ""}
    t = R.parse_response({"output": [{"type": "message", "content": ()}]})
    assert t["text"] == ""


def test_stream_turn_parses_the_final_response():
    out = _said({"type": "output_text", "text": "hi"})
    acc = ResponsesStream(final={"status": "completed", "output": [out], "model": "m"})
    t = R.stream_turn(acc)
    assert t["text"] == "hi" and t["model"] == "m" and t["finish"] == "completed"
