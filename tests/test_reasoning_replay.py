"""Reasoning state replayed exactly as the server that made it requires (issue 34, item 4),
over loopback servers that refuse what the real ones refuse: DeepSeek's chat completions
and Anthropic-compatible endpoints, OpenAI's Responses (encrypted reasoning, store false,
lone reasoning items), a LiteLLM gateway's null fields."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from toolnexus import create_client, define_tool, run, stream
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply


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
