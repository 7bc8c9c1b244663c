"""Pure codec for OpenAI-style chat completions (also used by the in-process client)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, pmap

from ..toolkit import to_openai
from .common import turn, usage

__all__ = [
    "url",
    "headers",
    "user_message",
    "body",
    "parse_response",
    "parse_generated",
    "tool_result_messages",
]


def url(base_url: str) -> str:
    """Return the chat completions URL of a base URL.

    >>> url("https://api.openai.com/v1/")
    'https://api.openai.com/v1/chat/completions'
    """
    return base_url.rstrip("/") + "/chat/completions"


def headers(api_key: str | None) -> dict:
    """Return the auth headers (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def user_message(text: str) -> PMap:
    """Return a user message."""
    return pmap({"role": "user", "content": text})


def body(model: str, messages: Sequence, toolkit: Any, system: str, params: Mapping) -> dict:
    """Return a request body; the system prompt leads, an empty toolkit omits `tools`."""
    msgs = [{"role": "system", "content": system}, *messages] if system else messages
    out = {"model": model, "messages": msgs}
    tools = to_openai(toolkit)
    if tools:
        out["tools"] = tools
    out.update(params)
    return out


def _assistant_message(text: str, calls: Sequence[Mapping]) -> dict:
    msg: dict = {"role": "assistant", "content": text if (text or not calls) else None}
    if calls:
        msg["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    return msg


def _args_text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    from .common import encode_json

    return encode_json(raw).decode("utf-8")


def parse_response(data: Mapping) -> PMap:
    """Return the normalized turn of a chat completions response.

    >>> t = parse_response({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
    ...                     "usage": {"prompt_tokens": 2, "completion_tokens": 1}})
    >>> t["text"], t["usage"]["total_tokens"], t["finish"]
    ('hi', 3, 'stop')
    """
    choices = data.get("choices") or []
    if not choices:
        raise ValueError("response has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    calls = [
        {
            "id": c.get("id") or f"call_{i}",
            "name": (c.get("function") or {}).get("name", ""),
            "arguments": _args_text((c.get("function") or {}).get("arguments") or ""),
        }
        for i, c in enumerate(message.get("tool_calls") or [])
    ]
    text = message.get("content") or ""
    u = data.get("usage") or {}
    return turn(
        _assistant_message(text, calls),
        text,
        calls,
        usage(u.get("prompt_tokens"), u.get("completion_tokens")),
        choice.get("finish_reason"),
        data.get("model"),
    )


def parse_generated(out: Mapping, turn_no: int) -> PMap:
    """Return the normalized turn of an in-process `generate` result.

    `out` is {"content": str} or {"tool_calls": [{"id"?, "name", "arguments"}]}, with an
    optional "usage"; missing call ids become call_<turn>_<index>.
    """
    if not isinstance(out, Mapping):
        raise TypeError(f"generate must return a mapping, got {type(out).__name__}")
    calls = [
        {
            "id": c.get("id") or f"call_{turn_no}_{i}",
            "name": c["name"],
            "arguments": _args_text(c.get("arguments") or {}),
        }
        for i, c in enumerate(out.get("tool_calls") or [])
    ]
    text = out.get("content") or ""
    u = out.get("usage") or {}
    return turn(
        _assistant_message(text, calls),
        text,
        calls,
        usage(u.get("prompt_tokens"), u.get("completion_tokens")),
        "tool_calls" if calls else "stop",
        out.get("model"),
    )


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[PMap]:
    """Return one `tool` message per call, in call order."""
    return [
        pmap({"role": "tool", "tool_call_id": c["id"], "content": _content(r["output"])})
        for c, r in zip(calls, results, strict=True)
    ]


def _content(output: Any) -> str:
    return output if isinstance(output, str) else _args_text(output)
