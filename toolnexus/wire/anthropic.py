"""Pure codec for Anthropic-style messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, pmap, pvector

from ..toolkit import to_anthropic
from .common import encode_json, turn, usage

__all__ = ["url", "headers", "user_message", "body", "parse_response", "tool_result_messages"]

VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def url(base_url: str) -> str:
    """Return the messages URL; `/v1` is appended only when the base lacks it.

    >>> url("https://api.anthropic.com"), url("http://h/v1/")
    ('https://api.anthropic.com/v1/messages', 'http://h/v1/messages')
    """
    base = base_url.rstrip("/")
    return (base if base.endswith("/v1") else base + "/v1") + "/messages"


def headers(api_key: str | None) -> dict:
    """Return the auth and version headers."""
    h = {"anthropic-version": VERSION}
    if api_key:
        h["x-api-key"] = api_key
    return h


def user_message(text: str) -> PMap:
    """Return a user message."""
    return pmap({"role": "user", "content": text})


def body(model: str, messages: Sequence, toolkit: Any, system: str, params: Mapping) -> dict:
    """Return a request body: `system` only when non-empty, `tools` only when any."""
    out: dict = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS, "messages": messages}
    if system:
        out["system"] = system
    tools = to_anthropic(toolkit)
    if tools:
        out["tools"] = tools
    out.update(params)
    return out


def _keep(block: Mapping) -> bool:
    # The API rejects empty text blocks, so one is never replayed from history.
    return not (block.get("type") == "text" and not block.get("text"))


def parse_response(data: Mapping) -> PMap:
    """Return the normalized turn of a messages response.

    >>> t = parse_response({"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
    ...                     "usage": {"input_tokens": 5, "output_tokens": 2}})
    >>> t["text"], dict(t["usage"])
    ('hi', {'prompt_tokens': 5, 'completion_tokens': 2, 'total_tokens': 7})
    """
    blocks = [b for b in (data.get("content") or []) if _keep(b)]
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = [
        {"id": b.get("id"), "name": b.get("name", ""), "arguments": b.get("input", {})}
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    u = data.get("usage") or {}
    return turn(
        {"role": "assistant", "content": blocks},
        text,
        calls,
        usage(u.get("input_tokens"), u.get("output_tokens")),
        data.get("stop_reason"),
        data.get("model"),
    )


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[PMap]:
    """Return ONE user message holding a tool_result block per call, in call order."""
    blocks = pvector(
        pmap(
            {
                "type": "tool_result",
                "tool_use_id": c["id"],
                "content": r["output"]
                if isinstance(r["output"], str)
                else encode_json(r["output"]).decode(),
                "is_error": bool(r["is_error"]),
            }
        )
        for c, r in zip(calls, results, strict=True)
    )
    return [pmap({"role": "user", "content": blocks})] if blocks else []
