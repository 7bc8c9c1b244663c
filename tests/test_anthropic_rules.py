"""The Messages codec (core/wire/anthropic.py), rule by rule: the request body (system
messages lifted), its params, the messages a request replays, the decoding of an answer
(shape errors named, tool_use blocks made replayable, ids made distinct), usage with the
prompt cache, the tool results and a finished stream's turn. Pure, no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import anthropic as A
from toolnexus.core.wire import anthropic_replay as R
from toolnexus.core.wire import anthropic_request as Q
from toolnexus.core.wire import parts as P
from toolnexus.core.wire.anthropic_stream import AnthropicStream
from toolnexus.core.wire.common import EMPTY_ANSWER, MalformedResponse

TOOL = {"name": "add", "description": "Adds.", "input_schema": {"type": "object"}}
ENTRY = {"name": "add", "description": "Adds.", "input_schema": {"type": "object"}}
CITE = {
    "type": "char_location",
    "cited_text": "x",
    "document_index": 0,
    "document_title": "t",
    "start_char_index": 0,
    "end_char_index": 1,
}


def text(t, **more):
    return {"type": "text", "text": t, **more}


def use(id="toolu_1", name="f", input=None, **more):
    return {
        "type": "tool_use",
        "id": id,
        "name": name,
        "input": {} if input is None else input,
        **more,
    }


def test_the_version_token_budget_keys_and_owned_fields():
    assert A.VERSION == "2023-06-01" and A.DEFAULT_MAX_TOKENS == 4096
    assert A.KEY_ENV == ("ANTHROPIC_API_KEY",)
    assert A.OWNED_PARAMS == ("model", "messages", "tools", "stream", "system")


def test_the_aliases_of_the_modules_it_is_made_of():
    assert (A.omissions, A.omit, A.refused_part) == (R.omissions, R.omit, R.refused_part)
    assert (A.cache_body, A.cache_tools) == (Q.cache_body, Q.cache_tools)
    assert (A.to_part, A.from_part) == (P.to_anthropic, P.from_anthropic)


def test_a_tool_is_declared_with_its_input_schema():
    assert thaw(A.tool_entry({**TOOL, "other": 1})) == ENTRY


def test_encode_tools_reuses_the_toolkits_built_entries_else_builds_them():
    assert A.encode_tools(None) == () and A.encode_tools({}) == ()
    built = ("built",)
    assert A.encode_tools({"tools": [TOOL], "wire": {"anthropic": built}}) is built
    assert thaw(A.encode_tools({"tools": [TOOL], "wire": {"other": built}})) == [ENTRY]
    assert thaw(A.encode_tools({"tools": [TOOL], "wire": None})) == [ENTRY]
    assert thaw(A.encode_tools({"tools": [TOOL]})) == [ENTRY]


def test_the_url_appends_v1_only_when_the_base_lacks_it():
    assert A.url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert A.url("http://h/v1/") == "http://h/v1/messages"
    assert A.url("http://h/v1") == "http://h/v1/messages"
    assert A.url("http://h/v2") == "http://h/v2/v1/messages"
    assert A.url("http://hostX") == "http://hostX/v1/messages"


def test_the_headers_carry_the_version_and_the_key_when_given():
    assert A.headers("k") == {"anthropic-version": "2023-06-01", "x-api-key": "k"}
    assert A.headers(None) == {"anthropic-version": "2023-06-01"}
    assert A.headers("") == {"anthropic-version": "2023-06-01"}
    assert thaw(A.user_message("hi")) == {"role": "user", "content": "hi"}


def test_body_sets_max_tokens_and_omits_an_empty_system_tools_and_params():
    msgs = [{"role": "user", "content": "q"}]
    plain = A.body("m", msgs, (), "", {})
    assert plain == {"model": "m", "max_tokens": 4096, "messages": msgs}
    assert plain["messages"] is msgs
    assert A.body("m", msgs, (), "", None) == plain
    full = A.body("m", msgs, ("t",), "s", {"max_tokens": 9, "x": 1})
    assert full == {
        "model": "m",
        "max_tokens": 9,
        "messages": msgs,
        "system": "s",
        "tools": ("t",),
        "x": 1,
    }


def test_system_messages_are_lifted_into_system_ahead_of_the_clients():
    msgs = [
        {"role": "system", "content": "a"},
        {"role": "user", "content": "q"},
        {"role": "developer", "content": [text("b"), text("c")]},
        {"role": "system", "content": ""},
        {"role": "assistant", "content": "r"},
    ]
    got = A.body("m", msgs, (), "s", {})
    assert got["system"] == "a\n\nbc\n\ns"
    assert got["messages"] == [msgs[1], msgs[4]]
    assert A.body("m", msgs[:2], (), "", {})["system"] == "a"
    assert "system" not in A.body("m", [{"role": "system", "content": ""}], (), "", {})


def test_a_system_messages_text_is_its_text_blocks_joined():
    blocks = [text("a"), "x", {"type": "image"}, {"type": "text", "text": 5}, text("b")]
    assert A._system_text({"content": blocks}) == "ab"
    assert A._system_text({"content": (text("t"),)}) == "t"
    assert A._system_text({"content": pvector([text("p")])}) == "p"
    assert A._system_text({"content": "s"}) == "s"
    assert A._system_text({"content": 5}) == "" and A._system_text({}) == ""


def test_later_params_turn_a_forced_choice_to_auto_keeping_disable_parallel_tool_use():
    assert A.later_params(None) is None
    empty = {}
    assert A.later_params(empty) is empty
    auto = {"tool_choice": {"type": "auto"}}
    assert A.later_params(auto) is auto
    assert thaw(A.later_params({"tool_choice": {"type": "any"}, "x": 1})) == {
        "tool_choice": {"type": "auto"},
        "x": 1,
    }
    named = {"tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": False}}
    assert thaw(A.later_params(named)) == {
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": False}
    }
    assert thaw(A.later_params({"tool_choice": "any"})) == {"tool_choice": {"type": "auto"}}


def test_with_output_sets_the_format_and_keeps_other_output_config():
    spec = {"name": "n", "schema": {"type": "object"}, "strict": True}
    fmt = {"type": "json_schema", "schema": {"type": "object"}}
    assert thaw(A.with_output({}, spec)) == {"output_config": {"format": fmt}}
    given = {"x": 1, "output_config": {"effort": "low", "format": "old"}}
    assert thaw(A.with_output(given, spec)) == {
        "x": 1,
        "output_config": {"effort": "low", "format": fmt},
    }
    assert thaw(A.with_output({"output_config": None}, spec)) == {"output_config": {"format": fmt}}


def test_replayable_keeps_clean_messages_as_they_are():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [text("a")]}]
    assert A.replayable(msgs) is msgs


def test_replayable_drops_empty_answers_and_blocks_and_cuts_citations():
    long = {**CITE, "file_id": "f"}
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": [text(" "), text("a", citations=[long]), "raw"]},
    ]
    assert thaw(A.replayable(msgs)) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [text("a", citations=[CITE]), "raw"]},
    ]


def test_replayable_drops_unsigned_thinking_that_leads_to_nothing():
    lone = {"type": "thinking", "thinking": "t"}
    msgs = [{"role": "assistant", "content": [text("a"), lone]}]
    assert thaw(A.replayable(msgs)) == [{"role": "assistant", "content": [text("a")]}]
    led = [{"role": "assistant", "content": [lone, text("a")]}]
    assert A.replayable(led) is led


@pytest.mark.parametrize(
    ("message", "dirty"),
    [
        ({"role": "assistant", "content": "a"}, False),
        ({"role": "assistant", "content": ""}, True),
        ({"role": "user", "content": ""}, False),
        ({"role": "assistant", "content": None}, True),
        ({"role": "assistant"}, True),
        ({"role": "user", "content": None}, False),
        ({"role": "user", "content": [text(" ")]}, True),
        ({"role": "user", "content": (text("a"),)}, False),
        ({"role": "user", "content": pvector([text("")])}, True),
        ({"role": "assistant", "content": []}, True),
        ({"role": "user", "content": []}, False),
        ({"role": "user", "content": [text("a", citations=[{**CITE, "file_id": "f"}])]}, True),
        ({"role": "user", "content": [text("a", citations=[CITE])]}, False),
        ({"role": "user", "content": [{"type": "image", "citations": [{**CITE, "x": 1}]}]}, False),
        ({"role": "user", "content": ["a"]}, False),
        ({"role": "assistant", "content": text("")}, False),
        ({"role": "assistant", "content": 5}, False),
    ],
)
def test_which_messages_need_cleaning(message, dirty):
    assert A._needs_cleaning(message) is dirty


def test_a_request_block_cuts_a_text_blocks_citations_only():
    long = {**CITE, "file_id": "f"}
    assert A._request_block(text("a", citations=[long])) == text("a", citations=[CITE])
    other = {"type": "image", "citations": [long]}
    assert A._request_block(other) is other
    assert A._request_block("raw") == "raw"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("x", "content is a JSON str, not an array"),
        ({"type": "text"}, "content is a JSON dict, not an array"),
        ([text("a"), 1], "content[1] is a JSON int, not an object"),
        ([text("a"), {"type": 1}], "content[1].type is not a string"),
        ([text("a"), {"text": "x"}], "content[1].type is not a string"),
        ([text("a"), {"type": "text", "text": 1}], "content[1].text is not a string"),
        ([text("a"), {"type": "text"}], "content[1].text is not a string"),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_block(content, message):
    with pytest.raises(MalformedResponse) as e:
        A.parse_response({"content": content})
    assert str(e.value) == message and isinstance(e.value, ProviderError)


def test_a_malformed_answer_of_another_kind_names_its_exception():
    with pytest.raises(MalformedResponse) as e:
        A.parse_response({"content": [use(name=None, input=None) | {"name": {1, 2}}]})
    assert str(e.value) == "malformed response: TypeError"
    with pytest.raises(MalformedResponse, match="^response is a JSON list, not an object$"):
        A.parse_response("[1]")


def test_parse_response_reads_text_usage_stop_and_model():
    t = A.parse_response(
        {
            "content": [
                text("a"),
                text(" "),
                {"type": "thinking", "thinking": "t", "signature": "s"},
                text("b"),
            ],
            "stop_reason": "end_turn",
            "model": "claude",
            "usage": {"input_tokens": 5, "output_tokens": 2},
        }
    )
    assert thaw(t) == {
        "message": {
            "role": "assistant",
            "content": [
                text("a"),
                {"type": "thinking", "thinking": "t", "signature": "s"},
                text("b"),
            ],
        },
        "text": "ab",
        "tool_calls": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        "finish": "end_turn",
        "model": "claude",
        "end": None,
        "refusal": None,
    }
    odd = A.parse_response({"content": [text("a")], "stop_reason": 1, "model": 2, "usage": [1]})
    assert (odd["finish"], odd["model"]) == (None, None)
    assert thaw(odd["usage"]) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert A.parse_response(b'{"content": [{"type": "text", "text": "j"}]}')["text"] == "j"


@pytest.mark.parametrize("content", [None, [], [text(""), text(" \n")]])
def test_an_answer_without_blocks_is_the_empty_answer(content):
    t = A.parse_response({"content": content, "stop_reason": "end_turn"})
    assert t["message"] is EMPTY_ANSWER and t["text"] == "" and thaw(t["tool_calls"]) == []


@pytest.mark.parametrize(
    ("stop", "end"),
    [
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "max_tokens"),
        ("pause_turn", "pause"),
        ("end_turn", None),
        ("refusal", None),
    ],
)
def test_a_truncating_stop_reason_ends_the_turn(stop, end):
    assert A.parse_response({"content": [text("a")], "stop_reason": stop})["end"] == end


def test_a_refusal_is_the_text_of_an_answer_stopped_for_refusal():
    t = A.parse_response({"content": [text("no")], "stop_reason": "refusal"})
    assert t["refusal"] == "no" and t["text"] == "no"
    assert A.parse_response({"content": [text("ok")], "stop_reason": "end_turn"})["refusal"] is None


def test_tool_use_blocks_are_made_replayable_and_calls_keep_what_the_model_sent():
    content = [
        text("a"),
        use("toolu_1", "f", {"x": 1}),
        use("bad id!", "g", [1, 2]),
        {"type": "tool_use", "id": 7, "name": ["n", 1]},
        use("", "h"),
        use("toolu_1", "k", extra=1),
    ]
    t = A.parse_response({"content": content, "stop_reason": "tool_use"})
    assert thaw(t["tool_calls"]) == [
        {"id": "toolu_1", "name": "f", "arguments": {"x": 1}},
        {"id": "bad_id_", "name": "g", "arguments": [1, 2]},
        {"id": "toolu_3", "name": "__n__1_", "arguments": {}},
        {"id": "toolu_4", "name": "h", "arguments": {}},
        {"id": "toolu_1_2", "name": "k", "arguments": {}},
    ]
    assert thaw(t["message"]["content"]) == [
        text("a"),
        use("toolu_1", "f", {"x": 1}),
        use("bad_id_", "g"),
        use("toolu_3", "__n__1_"),
        use("toolu_4", "h"),
        use("toolu_1_2", "k", extra=1),
    ]
    assert t["text"] == "a" and t["end"] is None


def test_a_replayable_block_is_kept_as_it_came():
    block = use("toolu_1", "f", {"x": 1})
    assert A._block(block, 0) is block
    thinking = {"type": "thinking", "thinking": "t"}
    assert A._block(thinking, 0) is thinking
    assert A._block(text("  "), 0) is None
    plain = text("a")
    assert A._block(plain, 0) is plain
    assert A._block({"type": "tool_use", "id": "toolu_1", "name": "f"}, 3) == use("toolu_1", "f")
    # a name the model sent as a string stays as sent (the loop reports an unknown tool)
    dotted = use("toolu_1", "get.weather")
    assert A._block(dotted, 0) is dotted


def test_call_ids_are_sanitized_or_numbered():
    assert A._call_id("a.b", 2) == "a_b"
    assert A._call_id("", 2) == "toolu_2" and A._call_id(None, 3) == "toolu_3"


def test_a_repeated_id_is_made_distinct_within_64_characters():
    long = "a" * 64
    blocks = A._unique_ids([use(long), text("x"), use(long), use(long)])
    assert [b.get("id") for b in blocks] == [long, None, "a" * 62 + "_2", "a" * 62 + "_3"]
    same = use("b")
    assert A._unique_ids([same])[0] is same


def test_usage_counts_cached_input_in_the_prompt():
    assert thaw(A._usage({"input_tokens": 5, "output_tokens": 2})) == {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "total_tokens": 7,
    }
    cached = {
        "input_tokens": 5,
        "output_tokens": 2,
        "cache_read_input_tokens": 10,
        "cache_creation_input_tokens": 20,
    }
    assert thaw(A._usage(cached)) == {
        "prompt_tokens": 35,
        "completion_tokens": 2,
        "total_tokens": 37,
        "cache_read_tokens": 10,
        "cache_write_tokens": 20,
    }
    only_read = {"input_tokens": 5, "cache_read_input_tokens": 3}
    assert thaw(A._usage(only_read))["prompt_tokens"] == 8
    assert "cache_write_tokens" not in A._usage(only_read)
    only_write = {"input_tokens": 5, "cache_creation_input_tokens": 4}
    assert thaw(A._usage(only_write))["prompt_tokens"] == 9
    junk = {"input_tokens": True, "cache_read_input_tokens": -3, "cache_creation_input_tokens": "x"}
    assert A._usage(junk)["prompt_tokens"] == 0
    assert A._usage({"input_tokens": 1, "cache_read_input_tokens": 0})["prompt_tokens"] == 1


def test_tool_uses_pair_kept_blocks_with_those_sent():
    sent = [text("a"), "x", use("a"), use("b")]
    kept = [use("a"), use("b_2")]
    assert A._tool_uses([text("a"), *kept], sent) == [(kept[0], sent[2]), (kept[1], sent[3])]


def test_tool_results_are_one_user_message_of_tool_result_blocks():
    calls = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    results = [
        {"output": "x", "is_error": 0},
        {"output": {"k": 1}, "is_error": 1},
        {
            "output": [text("t"), {"type": "image", "mimeType": "image/png", "data": "aGk="}],
            "is_error": None,
        },
    ]
    (message,) = A.tool_result_messages(calls, results)
    assert thaw(message) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "x", "is_error": False},
            {"type": "tool_result", "tool_use_id": "b", "content": '{"k":1}', "is_error": True},
            {
                "type": "tool_result",
                "tool_use_id": "c",
                "content": thaw(P.tool_result_blocks(results[2]["output"])),
                "is_error": False,
            },
        ],
    }
    assert message["content"][1]["is_error"] is True
    assert A.tool_result_messages([], []) == []
    with pytest.raises(ValueError):
        A.tool_result_messages(calls, results[:2])


def test_a_stream_without_message_stop_is_cut_short():
    with pytest.raises(ProviderError) as e:
        A.stream_turn(AnthropicStream())
    assert str(e.value) == "the stream ended before its final event (no message_stop)"
    assert e.value.network is True


def test_a_streams_turn_carries_the_raw_arguments_of_a_cut_input():
    log = pvector(
        [
            (0, "start", {"type": "tool_use", "id": "a", "name": "f", "input": {}}),
            (0, "input", '{"x": 1}'),
            (1, "start", {"type": "tool_use", "id": "b", "name": "g", "input": {}}),
            (1, "input", '{"y": '),
        ]
    )
    t = A.stream_turn(AnthropicStream(log=log, done=True, stop_reason="max_tokens"))
    assert thaw(t["tool_calls"]) == [
        {"id": "a", "name": "f", "arguments": {"x": 1}},
        {"id": "b", "name": "g", "arguments": '{"y": '},
    ]
    assert thaw(t["message"]["content"])[1] == use("b", "g")
    only_cut = AnthropicStream(log=log[2:], done=True)
    assert thaw(A.stream_turn(only_cut)["tool_calls"]) == [
        {"id": "b", "name": "g", "arguments": '{"y": '}
    ]
    plain = AnthropicStream(log=pvector([(0, "text", "hi")]), done=True)
    got = A.stream_turn(plain)
    assert got == A.parse_response({"content": [text("hi")]})


def test_a_malformed_stream_is_a_provider_error_naming_the_stream():
    with pytest.raises(MalformedResponse) as e:
        A.stream_turn(AnthropicStream(log=pvector([(0, "nothing", "x")]), done=True))
    assert str(e.value) == "malformed stream: KeyError"


def test_a_tool_use_id_is_letters_digits_underscores_and_dashes():
    assert A.valid_call_id("toolu_A-1")
    assert not A.valid_call_id("") and not A.valid_call_id("a b") and not A.valid_call_id("a\n")


@pytest.mark.parametrize(
    ("name", "replayed"),
    [("", "_unnamed"), (None, "_unnamed"), ("x" * 201, "x" * 200), ("x" * 200, "x" * 200)],
)
def test_a_tool_use_name_the_api_would_refuse_back_is_made_replayable(name, replayed):
    # The request schema's tool_use name is 1 to 200 characters: an empty, missing or longer
    # name stored as sent made every later request of the conversation a 400.
    block = {"type": "tool_use", "id": "toolu_1", "input": {}}
    block = block if name is None else {**block, "name": name}
    t = A.parse_response({"content": [block], "stop_reason": "tool_use"})
    assert t["message"]["content"][0]["name"] == replayed
    assert t["tool_calls"][0]["name"] == replayed
