"""The request validators: each documented rule refuses what breaks it, and the fake provider
answers such a request 400 in the provider's own error shape, over real HTTP."""

from __future__ import annotations

import json

import httpx
import pytest
from dialect_kit import STYLES, covers, url_of

from toolnexus import ProviderError, create_client, run
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.testing import (
    fake_provider,
    text_reply,
    validate_anthropic_request,
    validate_openai_request,
)

U = {"role": "user", "content": "q"}


def use(id="toolu_1"):
    return {"type": "tool_use", "id": id, "name": "f", "input": {}}


def result(id="toolu_1"):
    return {"type": "tool_result", "tool_use_id": id, "content": "4"}


def a(*messages, **body):
    return validate_anthropic_request(
        {"model": "m", "max_tokens": 64, "messages": list(messages), **body}
    )


def o(*messages):
    return validate_openai_request({"model": "m", "messages": list(messages)})


def call(id="call_1", arguments="{}"):
    return {"id": id, "type": "function", "function": {"name": "f", "arguments": arguments}}


def test_a_valid_anthropic_conversation_passes():
    assert a(U, {"role": "assistant", "content": [{"type": "text", "text": "hm"}, use()]},
             {"role": "user", "content": [result()]}, system="be brief") == []  # fmt: skip


@pytest.mark.parametrize(
    "messages, body, problem",
    [
        ([{"role": "assistant", "content": "hi"}], {}, "first message must be 'user'"),
        ([U, {"role": "tool", "content": "x"}], {}, "'tool' is not 'user' or 'assistant'"),
        ([{"role": "system", "content": "s"}, U], {}, "'system' is not"),
        ([U, {"role": "assistant", "content": [use()]}, U], {}, "have no tool_result"),
        ([U, {"role": "assistant", "content": [use()]}], {}, "have no tool_result"),
        ([U, {"role": "assistant", "content": [use("a.b:0")]},
          {"role": "user", "content": [result("a.b:0")]}], {}, "does not match"),
        ([U, {"role": "user", "content": [result()]}], {}, "without a tool_use"),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], {}, "must be non-empty"),
        ([{"role": "user", "content": ""}], {}, "content: empty"),
        ([{"role": "user", "content": []}], {}, "non-empty string or list"),
        ([U], {"system": ""}, "system: must be non-empty"),
        ([], {}, "messages: must be a non-empty list"),
    ],
)  # fmt: skip
def test_each_anthropic_rule_refuses_what_breaks_it(messages, body, problem):
    problems = a(*messages, **body)
    assert any(problem in p for p in problems), problems


def test_a_valid_openai_conversation_passes():
    assert o({"role": "system", "content": "s"}, U,
             {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
             {"role": "tool", "tool_call_id": "a", "content": "1"},
             {"role": "tool", "tool_call_id": "b", "content": "2"},
             {"role": "assistant", "content": "3"}) == []  # fmt: skip


@pytest.mark.parametrize(
    "messages, problem",
    [
        ([U, {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
          {"role": "tool", "tool_call_id": "a", "content": "1"}, U], "not answered by tool"),
        ([U, {"role": "assistant", "content": None, "tool_calls": [call("c" * 41)]},
          {"role": "tool", "tool_call_id": "c" * 41, "content": "1"}], "at most 40"),
        ([U, {"role": "assistant", "content": None, "tool_calls": [call(arguments={})]},
          {"role": "tool", "tool_call_id": "call_1", "content": "1"}], "not a string"),
        ([U, {"role": "assistant", "content": ""}], "needs content or tool_calls"),
        ([U, {"role": "tool", "tool_call_id": "x", "content": "1"}], "answers no open call"),
        ([U, {"role": "assistant", "content": None, "tool_calls": [call()]}], "not answered"),
    ],
)  # fmt: skip
def test_each_openai_rule_refuses_what_breaks_it(messages, problem):
    problems = o(*messages)
    assert any(problem in p for p in problems), problems


_CHAT_BAD = {"model": "m", "max_tokens": 64, "messages": [{"role": "assistant", "content": ""}]}
# A request each API refuses, the problem the fake names, and its error envelope (each
# provider's own): a table, checked to cover every row of the registry.
REFUSED = covers({
    "openai": (_CHAT_BAD, "needs content or tool_calls",
               lambda b: b["error"]["type"] == "invalid_request_error"),
    "anthropic": (_CHAT_BAD, "first message must be 'user'",
                  lambda b: b["type"] == "error" and b["error"]["type"] == "invalid_request_error"),
    "responses": ({"model": "m", "input": [{"type": "function_call_output", "call_id": "nope",
                                            "output": "1"}]}, "answers no function_call",
                  lambda b: b["error"]["type"] == "invalid_request_error"),
    "gemini": ({"contents": [{"role": "user", "parts": []}]}, "must not be empty",
               lambda b: (b["error"]["code"], b["error"]["status"]) == (400, "INVALID_ARGUMENT")),
}, "REFUSED")  # fmt: skip


@pytest.mark.parametrize("dialect", STYLES)
def test_the_fake_provider_answers_400_in_the_providers_shape(dialect):
    bad, problem, envelope = REFUSED[dialect]
    good = DIALECTS[dialect].body("m", [U], [], "", {})  # the record's own valid request
    with fake_provider([text_reply("never used"), text_reply("ok")]) as fp:
        url = url_of(dialect, fp.url)
        resp = httpx.post(url, json=bad)
        assert resp.status_code == 400
        body = resp.json()
        assert envelope(body) and problem in json.dumps(body)
        # the refused request consumed no script entry
        ok = httpx.post(url, json=thaw(good))
        assert ok.status_code == 200
        assert fp.requests[0]["body"] == bad  # and was recorded for the test to read
    with fake_provider([text_reply("ok")], validate=False) as fp:
        assert httpx.post(url_of(dialect, fp.url), json=bad).status_code == 200


def test_a_client_sees_the_refusal_as_a_provider_error():
    with fake_provider([text_reply("ok")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m",
                          body_transform=lambda b: {**b, "system": ""})  # fmt: skip
        with pytest.raises(ProviderError) as e:
            run(c, "hi")
    assert e.value.status == 400 and "system: must be non-empty" in str(e.value)
