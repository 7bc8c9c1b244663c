"""The chat completions codec (core/wire/openai.py), rule by rule: the request body and
its params, the prompt-cache key, the messages a request replays, the decoding of an
answer (shape errors named, ids made distinct, extra fields kept), the tool results and
a finished stream's turn. Pure, no I/O."""

from __future__ import annotations

import hashlib

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import openai as O
from toolnexus.core.wire import parts as P
from toolnexus.core.wire.common import EMPTY_ANSWER, MalformedResponse
from toolnexus.core.wire.openai_stream import OpenAIStream

TOOL = {"name": "add", "description": "Adds.", "input_schema": {"type": "object"}}
ENTRY = {
    "type": "function",
    "function": {"name": "add", "description": "Adds.", "parameters": {"type": "object"}},
}


def answer(message, finish="stop", **more):
    return {"choices": [{"message": message, "finish_reason": finish}], **more}


def call(id="c1", name="f", arguments='{"x":1}', **more):
    return {
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
        **more,
    }


def test_the_keys_a_client_reads_and_the_fields_the_loop_owns():
    assert O.KEY_ENV == ("OPENAI_API_KEY", "OPENROUTER_API_KEY")
    assert O.OWNED_PARAMS == ("model", "messages", "tools", "stream")


def test_a_tool_is_declared_as_a_function_with_its_schema_as_parameters():
    assert thaw(O.tool_entry(TOOL)) == ENTRY


def test_encode_tools_reuses_the_toolkits_built_entries_else_builds_them():
    assert O.encode_tools(None) == () and O.encode_tools({}) == ()
    built = ("built",)
    assert O.encode_tools({"tools": [TOOL], "wire": {"openai": built}}) is built
    assert thaw(O.encode_tools({"tools": [TOOL], "wire": {"other": built}})) == [ENTRY]
    assert thaw(O.encode_tools({"tools": [TOOL], "wire": None})) == [ENTRY]
    assert thaw(O.encode_tools({"tools": [TOOL]})) == [ENTRY]


def test_the_url_headers_and_user_message():
    assert O.url("http://h/v1") == "http://h/v1/chat/completions"
    assert O.url("http://h/v1//") == "http://h/v1/chat/completions"
    assert O.url("http://hostX/") == "http://hostX/chat/completions"  # only "/" is cut
    assert O.headers("k") == {"Authorization": "Bearer k"}
    assert O.headers(None) == {} and O.headers("") == {}
    assert thaw(O.user_message("hi")) == {"role": "user", "content": "hi"}


def test_body_leads_with_the_system_prompt_and_omits_empty_tools_and_params():
    msgs = [{"role": "user", "content": "q"}]
    plain = O.body("m", msgs, (), "", {})
    assert plain == {"model": "m", "messages": msgs} and plain["messages"] is msgs
    full = O.body("m", msgs, ("t",), "be brief", {"temperature": 0, "model": "x"})
    assert full == {
        "model": "x",
        "messages": [{"role": "system", "content": "be brief"}, *msgs],
        "tools": ("t",),
        "temperature": 0,
    }
    assert O.body("m", msgs, (), "", None) == {"model": "m", "messages": msgs}


def test_later_params_turn_a_forced_choice_to_auto_and_keep_the_rest():
    assert O.later_params(None) is None
    empty = {}
    assert O.later_params(empty) is empty
    auto = {"tool_choice": "auto", "x": 1}
    assert O.later_params(auto) is auto
    other = {"x": 1}
    assert O.later_params(other) is other
    assert O.later_params({"tool_choice": "required", "x": 1}) == {"tool_choice": "auto", "x": 1}
    named = {"tool_choice": {"type": "function", "function": {"name": "f"}}}
    assert O.later_params(named) == {"tool_choice": "auto"}


def test_cache_tools_gives_the_tools_as_they_are():
    tools = ("a",)
    assert O.cache_tools(tools) is tools


def test_cache_body_carries_the_conversation_id_as_prompt_cache_key():
    body = {"model": "m"}
    assert O.cache_body(body, None) is body
    kept = {"model": "m", "prompt_cache_key": "mine"}
    assert O.cache_body(kept, "conv") is kept
    assert O.cache_body(body, "conv") == {"model": "m", "prompt_cache_key": "conv"}
    assert body == {"model": "m"}
    at_most = "c" * 64
    assert O.cache_body(body, at_most)["prompt_cache_key"] == at_most


def test_a_conversation_id_past_64_characters_is_keyed_by_its_digest():
    long = "c" * 65
    digest = hashlib.sha256(long.encode()).hexdigest()[:48]
    assert O.cache_body({}, long) == {"prompt_cache_key": "tn-" + digest}
    odd = "\ud800" * 65  # a lone surrogate is hashed, not refused
    key = O.cache_body({}, odd)["prompt_cache_key"]
    assert key == "tn-" + hashlib.sha256(odd.encode("utf-8", "surrogatepass")).hexdigest()[:48]
    assert len(key) == 51


def test_with_output_asks_for_a_json_schema_response_format():
    spec = {"name": "out", "schema": {"type": "object"}, "strict": True, "other": 1}
    got = O.with_output({"x": 1}, spec)
    assert thaw(got) == {
        "x": 1,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True},
        },
    }


def test_replayable_keeps_clean_messages_as_they_are():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert O.replayable(msgs) is msgs


def test_a_stored_refusal_is_replayed_in_the_requests_shape():
    stored = {"role": "assistant", "content": None, "refusal": "no", "x": 1}
    assert thaw(O.replayable([stored])) == [
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}], "x": 1}
    ]
    empty = {"role": "assistant", "content": "", "refusal": "no"}
    assert thaw(O.replayable([empty])) == [
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}
    ]


@pytest.mark.parametrize("refusal", [None, "", 5])
def test_an_empty_answer_without_a_refusal_text_is_dropped(refusal):
    assert O.replayable([{"role": "assistant", "content": None, "refusal": refusal}]) == []


def test_a_refusal_is_rebuilt_only_for_an_assistant_message_without_content_or_calls():
    empty = [{"type": "text", "text": ""}]
    user = {"role": "user", "content": [*empty, {"type": "text", "text": "a"}], "refusal": "x"}
    assert thaw(O.replayable([user])) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}], "refusal": "x"}
    ]
    # content holding only an empty text block: the usual cleaning (an empty answer) applies
    assert O.replayable([{"role": "assistant", "content": empty, "refusal": "no"}]) == []
    with_calls = {"role": "assistant", "content": None, "tool_calls": [{}], "refusal": "no"}
    assert O._refusal_request(with_calls) is None
    assert O._refusal_request({"role": "assistant", "content": "a", "refusal": "no"}) is None


@pytest.mark.parametrize(
    ("message", "dirty"),
    [
        ({"role": "assistant", "content": "a"}, False),
        ({"role": "assistant", "content": ""}, True),
        ({"role": "user", "content": ""}, False),
        ({"role": "assistant", "content": "", "tool_calls": [{}]}, False),
        ({"role": "assistant", "content": None}, True),
        ({"role": "assistant"}, True),
        ({"role": "user", "content": None}, False),
        ({"role": "assistant", "content": None, "tool_calls": [{}]}, False),
        ({"role": "user", "content": [{"type": "text", "text": " "}]}, True),
        ({"role": "user", "content": ({"type": "text", "text": "a"},)}, False),
        ({"role": "user", "content": pvector([{"type": "text", "text": ""}])}, True),
        ({"role": "assistant", "content": []}, True),
        ({"role": "user", "content": []}, False),
        ({"role": "assistant", "content": [], "tool_calls": [{}]}, False),
        ({"role": "assistant", "content": {"type": "text", "text": ""}}, False),
        ({"role": "assistant", "content": 5}, False),
    ],
)
def test_which_messages_need_cleaning(message, dirty):
    assert O._needs_cleaning(message) is dirty


def test_the_omissions_are_openai_fields():
    from toolnexus.core.wire import openai_fields as F

    assert (O.omissions, O.refused_part, O.omit) == (F.omissions, F.refused_part, F.omit)
    assert (O.to_part, O.from_part) == (P.to_openai, P.from_openai)


def test_the_assistant_message_of_each_kind_of_turn():
    c = {"id": "c1", "name": "f", "arguments": "{}"}
    wire = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert O._assistant_message("", [], None) is EMPTY_ANSWER
    assert O._assistant_message("", [], {}) is EMPTY_ANSWER
    assert thaw(O._assistant_message("hi", [])) == {"role": "assistant", "content": "hi"}
    assert thaw(O._assistant_message("", [c])) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [wire],
    }
    assert thaw(O._assistant_message("hi", [c])) == {
        "role": "assistant",
        "content": "hi",
        "tool_calls": [wire],
    }
    assert thaw(O._assistant_message("", [], {"refusal": "no"})) == {
        "role": "assistant",
        "content": None,
        "refusal": "no",
    }
    assert thaw(O._assistant_message("hi", [], {"refusal": "no"})) == {
        "role": "assistant",
        "content": "hi",
        "refusal": "no",
    }
    assert thaw(O._assistant_message("", [], {"reasoning_content": "r"})) == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "r",
    }
    assert thaw(O._assistant_message("", [c], {"refusal": "no"}))["content"] is None


def test_a_wire_call_keeps_its_extra_fields_under_its_own():
    c = {"id": "c1", "name": "f", "arguments": "{}", "extra": {"id": "x", "extra_content": 1}}
    assert thaw(O._wire_call(c)) == {
        "extra_content": 1,
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    plain = {"id": "c1", "name": "f", "arguments": "{}", "extra": {}}
    assert set(O._wire_call(plain)) == {"id", "type", "function"}


def test_usage_reads_the_details_each_provider_reports():
    plain = {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
    assert thaw(O._usage(plain)) == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}
    detailed = {
        "prompt_tokens": 5,
        "completion_tokens": 4,
        "prompt_tokens_details": {"cached_tokens": 1, "cache_write_tokens": 2},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    assert thaw(O._usage(detailed)) == {
        "prompt_tokens": 5,
        "completion_tokens": 4,
        "total_tokens": 9,
        "cache_read_tokens": 1,
        "cache_write_tokens": 2,
        "reasoning_tokens": 3,
    }
    deepseek = {"prompt_tokens": 5, "completion_tokens": 1, "prompt_cache_hit_tokens": 4}
    assert thaw(O._usage(deepseek))["cache_read_tokens"] == 4
    zero = {**deepseek, "prompt_tokens_details": {"cached_tokens": 0}}
    assert thaw(O._usage(zero))["cache_read_tokens"] == 0
    junk = {"prompt_tokens": 5, "prompt_tokens_details": [1], "completion_tokens_details": "x"}
    assert thaw(O._usage(junk)) == {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}


def test_parse_response_reads_text_usage_finish_and_model():
    t = O.parse_response(
        answer(
            {"role": "assistant", "content": "hi"},
            usage={"prompt_tokens": 2, "completion_tokens": 1},
            model="gpt",
        )
    )
    assert thaw(t) == {
        "message": {"role": "assistant", "content": "hi"},
        "text": "hi",
        "tool_calls": [],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3},
        "finish": "stop",
        "model": "gpt",
        "end": None,
        "refusal": None,
    }
    odd = O.parse_response(answer({"content": "hi"}, finish=1, usage=[1], model=2))
    assert (odd["finish"], odd["model"]) == (None, None)
    assert thaw(odd["usage"]) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert O.parse_response(b'{"choices": [{"message": {"content": "j"}}]}')["text"] == "j"


@pytest.mark.parametrize(
    ("finish", "end"),
    [("length", "max_tokens"), ("content_filter", "content_filter"), ("stop", None), (None, None)],
)
def test_a_truncating_finish_reason_ends_the_turn_incomplete(finish, end):
    assert O.parse_response(answer({"content": "a"}, finish=finish))["end"] == end


def test_content_given_as_parts_is_joined_into_text():
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    t = O.parse_response(answer({"content": parts}))
    assert t["text"] == "ab" and t["message"]["content"] == "ab"


def test_tool_calls_are_read_with_distinct_ids_names_as_text_and_arguments_as_json():
    calls = [
        call("a", "f", '{"x":1}'),
        call("a", "g", {"y": 2}),
        {"function": {"name": ["n", 1], "arguments": None}},
        call("", "h", ""),
        call(7, "k", "{}"),
    ]
    t = O.parse_response(answer({"content": None, "tool_calls": calls}, finish="tool_calls"))
    assert thaw(t["tool_calls"]) == [
        {"id": "a", "name": "f", "arguments": '{"x":1}'},
        {"id": "a_2", "name": "g", "arguments": '{"y":2}'},
        {"id": "call_2", "name": '["n",1]', "arguments": ""},
        {"id": "call_3", "name": "h", "arguments": ""},
        {"id": "call_4", "name": "k", "arguments": "{}"},
    ]
    message = thaw(t["message"])
    assert message["content"] is None and message["role"] == "assistant"
    assert [c["id"] for c in message["tool_calls"]] == ["a", "a_2", "call_2", "call_3", "call_4"]
    assert t["text"] == "" and t["end"] is None


def test_a_calls_and_a_messages_unread_fields_are_kept_and_replayed():
    c = call("a", extra_content={"google": {"sig": "s"}}, index=0)
    message = {"content": "x", "tool_calls": [c], "reasoning_content": "r", "annotations": []}
    t = O.parse_response(answer(message))
    assert thaw(t["tool_calls"]) == [
        {
            "id": "a",
            "name": "f",
            "arguments": '{"x":1}',
            "extra": {"extra_content": {"google": {"sig": "s"}}},
        }
    ]
    assert thaw(t["message"]) == {
        "role": "assistant",
        "content": "x",
        "tool_calls": [
            {
                "extra_content": {"google": {"sig": "s"}},
                "id": "a",
                "type": "function",
                "function": {"name": "f", "arguments": '{"x":1}'},
            }
        ],
        "reasoning_content": "r",
    }
    assert "extra" not in O.parse_response(answer({"tool_calls": [call("a")]}))["tool_calls"][0]


def test_a_refusal_is_the_turns_refusal_and_stays_in_the_apis_shape():
    t = O.parse_response(answer({"content": None, "refusal": "no"}))
    assert t["refusal"] == "no" and t["text"] == ""
    assert thaw(t["message"]) == {"role": "assistant", "content": None, "refusal": "no"}
    assert O.parse_response(answer({"content": "a", "refusal": ""}))["refusal"] is None
    assert O.parse_response(answer({"content": None, "refusal": 5}))["refusal"] is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"choices": "x"}, "choices is a JSON str, not an array"),
        ({"choices": []}, "response has no choices"),
        ({}, "response has no choices"),
        ({"choices": [1]}, "choices[0] is a JSON int, not an object"),
        ({"choices": [{"message": []}]}, "choices[0].message is a JSON list, not an object"),
        (answer({"tool_calls": "x"}), "tool_calls is a JSON str, not an array"),
        (answer({"tool_calls": [call(), 1]}), "tool_calls[1] is a JSON int, not an object"),
        (
            answer({"tool_calls": [call(), {"function": "f"}]}),
            "tool_calls[1].function is a JSON str, not an object",
        ),
        (answer({"content": 5}), "choices[0].message.content is a JSON int, not text"),
        (
            answer({"tool_calls": [call(arguments={"x": object()})]}),
            "malformed response: TypeError",
        ),
        ("[1]", "response is a JSON list, not an object"),
    ],
)
def test_a_malformed_answer_is_refused_naming_what_is_wrong(data, message):
    with pytest.raises(MalformedResponse) as e:
        O.parse_response(data)
    assert str(e.value) == message
    assert isinstance(e.value, ProviderError)


def test_a_message_missing_is_an_empty_answer():
    t = O.parse_response({"choices": [{"finish_reason": "stop"}]})
    assert t["message"] is EMPTY_ANSWER and t["text"] == ""
    said = O.parse_response(answer({"role": "assistant", "content": ""}))
    assert said["message"] is EMPTY_ANSWER


def test_a_legacy_function_call_is_read_not_replayed():
    legacy = {"content": "a", "function_call": {"name": "f", "arguments": "{}"}}
    assert thaw(O.parse_response(answer(legacy))["message"]) == {
        "role": "assistant",
        "content": "a",
    }


def test_tool_results_are_one_tool_message_per_call_then_the_media():
    calls = [{"id": "a", "name": "f"}, {"id": "b", "name": "g"}]
    results = [{"output": "x"}, {"output": {"k": 1}}]
    assert thaw(O.tool_result_messages(calls, results)) == [
        {"role": "tool", "tool_call_id": "a", "content": "x"},
        {"role": "tool", "tool_call_id": "b", "content": '{"k":1}'},
    ]
    image = {"type": "image", "url": "https://x/a.png"}
    media = [{"output": [{"type": "text", "text": "see"}, image]}, {"output": 3}]
    got = thaw(O.tool_result_messages(calls, media))
    assert got[0] == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "see\n[image https://x/a.png (unknown type): attached below]",
    }
    assert got[1] == {"role": "tool", "tool_call_id": "b", "content": "3"}
    assert got[2] == thaw(P.tool_attachments(calls, media))
    with pytest.raises(ValueError):
        O.tool_result_messages(calls, results[:1])


def test_a_stream_without_an_end_is_cut_short():
    with pytest.raises(ProviderError) as e:
        O.stream_turn(OpenAIStream())
    assert (
        str(e.value) == "the stream ended before its final event (no finish_reason and no [DONE])"
    )
    assert e.value.network is True
    done = O.stream_turn(OpenAIStream(text=pvector(["a"]), done=True))
    assert done["text"] == "a" and done["finish"] is None
    assert O.stream_turn(OpenAIStream(finish="stop"))["finish"] == "stop"


def test_a_malformed_stream_is_a_provider_error_naming_the_stream():
    with pytest.raises(MalformedResponse) as e:
        O.stream_turn(OpenAIStream(text=pvector([1]), finish="stop"))
    assert str(e.value) == "malformed stream: TypeError"


def test_a_prompt_of_parts_is_checked_sized_and_shaped_for_chat_completions():
    got = O.user_message_parts([{"type": "text", "text": "hi"}])
    assert thaw(got) == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    audio = {"type": "audio", "url": "https://x/a.mp3"}
    with pytest.raises(P.UnsupportedPartError, match="^openai cannot carry the audio "):
        O.user_message_parts([audio])
    as_text = thaw(O.user_message_parts([audio], "text"))["content"]
    assert as_text == [thaw(P.to_openai(audio, "text"))]
    image = {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="}
    with pytest.raises(ValueError, match="image part of 5 bytes exceeds max_part_bytes=4"):
        O.user_message_parts([image], max_part_bytes=4)
    assert len(O.user_message_parts([image], max_part_bytes=5)["content"]) == 1
    with pytest.raises(ValueError):
        O.user_message_parts([{"type": "nothing"}])


def test_a_call_id_has_one_to_40_characters():
    assert not O.valid_call_id("")
    assert O.valid_call_id("a") and O.valid_call_id("a" * 40)
    assert not O.valid_call_id("a" * 41)
