"""The script's neutral vocabulary (pure): reply entries, and the pieces every dialect's
fake builds its answers from (call ids, argument text, fragments, SSE events).

A dialect's fake (testing/fake_<name>.py) reads a reply through these; a reply names no
dialect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_USAGE", "text_reply", "tool_calls_reply", "calls", "args_json", "pieces",
           "sse", "frame"]  # fmt: skip

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


def text_reply(content: str, **extra: Any) -> dict:
    """Return a script entry that answers with text."""
    return {"content": content, **extra}


def tool_calls_reply(*calls: tuple[str, Mapping] | Mapping, **extra: Any) -> dict:
    """Return a script entry calling tools: (name, args) pairs or {"id"?, "name", "arguments"}."""
    norm = [c if isinstance(c, Mapping) else {"name": c[0], "arguments": c[1]} for c in calls]
    return {"tool_calls": norm, **extra}


def calls(reply: Mapping, seq: int) -> list[dict]:
    """Return a reply's tool calls, each with an id: its own, else one made of the request
    number and its place in the turn (unique across a conversation)."""
    return [
        {**c, "id": c.get("id") or f"call_{seq}_{i}"}
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]


def args_json(arguments: Any) -> str:
    """Return tool arguments as JSON text (text given is kept as it is)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def pieces(text: str, size: int) -> list[str]:
    """Return `text` in fixed-size fragments: split mid-word, mid-key and mid-number, as
    real streams split it."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(data: Any, event: str | None = None) -> bytes:
    """Return one SSE event: `data` (JSON unless text), under its `event` name if given."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def frame(data: Any, event: str | None = None, field: str = "data") -> bytes:
    """Return one SSE event as servers' error paths write it: ASCII JSON, in `field`
    (llama.cpp once wrote an `error:` field SSE does not define)."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}{field}: {payload}\n\n".encode()
