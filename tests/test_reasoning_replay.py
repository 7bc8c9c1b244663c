"""Reasoning state replayed exactly as the server that made it requires (issue 34, item 4),
over loopback servers that refuse what the real ones refuse: DeepSeek's chat completions
and Anthropic-compatible endpoints, OpenAI's Responses (encrypted reasoning, store false,
lone reasoning items), a LiteLLM gateway's null fields."""

from __future__ import annotations

import json

from collections.abc import Callable, Mapping, Sequence

import pytest

from toolnexus import create_client, define_tool, run, stream
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.fake_provider import anthropic_response, anthropic_stream


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


CALL = {"name": "add", "arguments": {"a": 2, "b": 3}}


def outcome(c, prompt, streamed, **kw):
    """Return the RunResult of run() or stream()."""
    if not streamed:
        return run(c, prompt, **kw)
    return list(stream(c, prompt, **kw))[-1]["result"]


def refusing(rule: Callable[[Mapping], str | None], script: Sequence) -> Callable:
    """Return a fake provider script that answers 400 (OpenAI's error shape) with the
    message `rule(body)` gives, as the server does, else the next reply of `script`."""
    replies = list(script)

    def reply(body: Mapping, dialect: str) -> Mapping:
        said = rule(body)
        if said is not None:
            error = {"message": said, "type": "invalid_request_error", "param": None,
                     "code": "invalid_request_error"}  # fmt: skip
            return {"status": 400, "body": {"error": error}}
        return replies.pop(0) if replies else {"status": 500, "body": "script exhausted"}

    return reply


# ---- DeepSeek, chat completions: reasoning_content, even empty ---------------------------


def deepseek_rule(body: Mapping) -> str | None:
    """DeepSeek's thinking mode: every assistant message of a tool loop carries its
    reasoning_content back (an empty one included), else 400."""
    for i, m in enumerate(body["messages"]):
        if m["role"] == "assistant" and m.get("tool_calls") and "reasoning_content" not in m:
            return (
                f"Missing `reasoning_content` field in the assistant message at message index {i}"
            )
    return None


@pytest.mark.parametrize("streamed", [False, True])
def test_deepseeks_empty_reasoning_content_is_kept_and_replayed(streamed):
    """Failed before: `"reasoning_content": ""` was dropped as saying nothing, and DeepSeek
    refused the second request of the tool loop."""
    first = tool_calls_reply(CALL, message_extra={"reasoning_content": ""})
    store = in_memory_store()
    with fake_provider(refusing(deepseek_rule, [first, text_reply("5")]), schema=False) as fp:
        c = create_client(base_url=fp.url, model="deepseek-v4", api_key="k", store=store)
        r = outcome(c, "2+3?", streamed, toolkit=[add], conversation_id="c")
    assert r["text"] == "5" and r["status"] == "done"
    replayed = [m for m in fp.requests[1]["body"]["messages"] if m["role"] == "assistant"]
    assert replayed[0]["reasoning_content"] == ""
    assert store["get"]("c")[1]["reasoning_content"] == ""


# ---- DeepSeek's Anthropic-compatible endpoint: thinking without a signature -------------


def deepseek_anthropic_rule(body: Mapping) -> str | None:
    """DeepSeek's /anthropic in thinking mode: an assistant turn that called a tool gives its
    thinking back, else 400."""
    for m in body["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        kinds = [b["type"] for b in blocks]
        if m["role"] == "assistant" and "tool_use" in kinds and "thinking" not in kinds:
            return "The `content[].thinking` in the thinking mode must be passed back to the API."
    return None


THOUGHT = "I should call add."


def unsigned(reply: Mapping, body: Mapping) -> Mapping:
    """Return the fake provider's answer to `reply` as DeepSeek's /anthropic sends it: its
    thinking blocks carry no signature (whole: no field; streamed: no signature_delta)."""
    if not body.get("stream"):
        made = anthropic_response(reply)
        for b in made["content"]:
            b.pop("signature", None)
        return {"response": made}
    events = []
    for raw in anthropic_stream(reply):
        data = json.loads(raw.decode().split("data: ", 1)[1])
        if data.get("delta", {}).get("type") == "signature_delta":
            continue
        data.get("content_block", {}).pop("signature", None)
        events.append(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n")
    return {"sse": "".join(events)}


def deepseek_anthropic(script: Sequence) -> Callable:
    """Return a script playing DeepSeek's /anthropic: unsigned thinking, and its refusal."""
    replies = list(script)

    def reply(body: Mapping, dialect: str) -> Mapping:
        said = deepseek_anthropic_rule(body)
        if said is not None:
            error = {"type": "invalid_request_error", "message": said}
            return {"status": 400, "body": {"type": "error", "error": error}}
        return unsigned(replies.pop(0), body)

    return reply


def thinking_loop() -> list:
    return [tool_calls_reply(CALL, thinking=[{"thinking": THOUGHT}]), text_reply("5")]


@pytest.mark.parametrize("streamed", [False, True])
def test_deepseeks_unsigned_thinking_is_replayed_to_its_anthropic_endpoint(streamed):
    """Failed before: the unsigned thinking block was dropped, and DeepSeek refused the
    second request of every thinking tool loop."""
    store = in_memory_store()
    with fake_provider(deepseek_anthropic(thinking_loop()), schema=False) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="deepseek-v4-pro",
                          api_key="k", store=store)  # fmt: skip
        r = outcome(c, "2+3?", streamed, toolkit=[add], conversation_id="c")
    assert r["text"] == "5" and len(fp.requests) == 2
    replayed = fp.requests[1]["body"]["messages"][1]["content"]
    assert replayed[0] == {"type": "thinking", "thinking": THOUGHT}
    assert store["get"]("c")[1]["content"][0] == {"type": "thinking", "thinking": THOUGHT}


def deepseek_transcript() -> list:
    """Return a conversation DeepSeek's /anthropic made (its thinking unsigned)."""
    store = in_memory_store()
    with fake_provider(deepseek_anthropic(thinking_loop()), schema=False) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="deepseek-v4-pro",
                          api_key="k", store=store)  # fmt: skip
        run(c, "2+3?", toolkit=[add], conversation_id="c")
    return store["get"]("c")


def test_unsigned_thinking_never_goes_to_anthropics_own_models():
    """Anthropic takes thinking back signed only (the fake provider refuses it unsigned, as
    its published schema does): a Claude model is never sent the unsigned block."""
    history = deepseek_transcript()
    with fake_provider([text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="claude-sonnet-4-5",
                          api_key="k")  # fmt: skip
        assert run(c, "sure?", toolkit=[add], history=history)["text"] == "yes"
    assert len(fp.requests) == 1 and THOUGHT not in json.dumps(fp.requests[0]["body"])


def test_a_server_refusing_unsigned_thinking_is_asked_again_without_it_once_per_client():
    """A server we did not name that takes thinking signed only: its refusal (naming the
    signature) is answered by one more request without the unsigned blocks, and the
    client remembers it for that model."""
    history = deepseek_transcript()
    with fake_provider([text_reply("yes"), text_reply("again")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="gateway-model",
                          api_key="k")  # fmt: skip
        assert run(c, "sure?", toolkit=[add], history=history)["text"] == "yes"
        assert run(c, "and?", toolkit=[add], history=history)["text"] == "again"
    assert len(fp.requests) == 3  # refused once, then never again
    assert THOUGHT in json.dumps(fp.requests[0]["body"])
    assert all(THOUGHT not in json.dumps(r["body"]) for r in fp.requests[1:])
    other = create_client(base_url=fp.url, style="anthropic", model="gateway-model")
    assert other.runtime.omitted(other.plan[False]["omission_key"]) == frozenset()


@pytest.mark.parametrize("style", ["openai", "responses"])
def test_unsigned_thinking_is_dropped_when_the_dialect_changes(style):
    history = deepseek_transcript()
    with fake_provider([text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style=style, model="o4-mini", api_key="k")
        assert run(c, "sure?", toolkit=[add], history=history)["text"] == "yes"
    assert THOUGHT not in json.dumps(fp.requests[0]["body"])
