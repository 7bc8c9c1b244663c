"""Pure codec for Anthropic-style messages."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, pmap, pvector

from ..toolkit import to_anthropic
from .common import encode_json, turn, usage
from .sse import load_json, stream_error

__all__ = [
    "url",
    "headers",
    "user_message",
    "body",
    "parse_response",
    "tool_result_messages",
    "stream_body",
    "stream_start",
    "stream_event",
    "stream_response",
    "stream_turn",
]

VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


encode_tools = to_anthropic  # toolkit -> the `tools` list of a request body


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


def body(model: str, messages: Sequence, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return a request body: `system` only when non-empty, `tools` only when any.

    `tools` is already in wire shape (`encode_tools(toolkit)`), encoded once per run.
    """
    out: dict = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS, "messages": messages}
    if system:
        out["system"] = system
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


# ---- streaming: SSE events -> deltas -> the same normalized turn -----------------


def stream_body(body: Mapping) -> dict:
    """Return a copy of a request body that asks for a stream.

    >>> stream_body({"model": "m"})
    {'model': 'm', 'stream': True}
    """
    return {**body, "stream": True}


def stream_start() -> PMap:
    """Return the accumulator of a stream that has delivered nothing yet.

    Its keys: blocks (index -> {block: the content_block_start value, parts: index of
    the fragments per field}), model, stop_reason, input_tokens, output_tokens, done
    (True once message_stop arrived).
    """
    return pmap(
        {
            "blocks": pmap(),
            "model": None,
            "stop_reason": None,
            "input_tokens": None,
            "output_tokens": None,
            "done": False,
        }
    )


# Which field of its block each delta type extends; thinking never counts as text.
_DELTA_FIELD = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
    "input_json_delta": ("partial_json", "input"),
}
_GUESSED_TYPE = {
    "text": "text",
    "thinking": "thinking",
    "signature": "thinking",
    "input": "tool_use",
}


def _new_block(block: Mapping) -> PMap:
    return pmap({"block": block, "parts": pmap()})


def _on_delta(acc: PMap, index: int, delta: Mapping, deltas: list) -> PMap:
    kind = delta.get("type")
    entry = acc["blocks"].get(index)
    if kind == "citations_delta":
        entry = entry or _new_block({"type": "text", "text": ""})
        cites = entry["parts"].get("citations", pvector()).append(delta.get("citation"))
        return acc.set(
            "blocks",
            acc["blocks"].set(index, entry.set("parts", entry["parts"].set("citations", cites))),
        )
    if kind not in _DELTA_FIELD:
        return acc  # a delta type this version does not know: nothing to keep
    key, field_ = _DELTA_FIELD[kind]
    piece = delta.get(key) or ""
    # A delta without its content_block_start (never seen from the API) still counts.
    entry = entry or _new_block({"type": _GUESSED_TYPE[field_]})
    block_type = entry["block"].get("type")
    if piece and field_ == "text" and block_type == "text":
        deltas.append(pmap({"type": "text", "delta": piece}))
    elif piece and field_ == "thinking":
        deltas.append(pmap({"type": "thinking", "delta": piece}))
    parts = entry["parts"].set(field_, entry["parts"].get(field_, pvector()).append(piece))
    return acc.set("blocks", acc["blocks"].set(index, entry.set("parts", parts)))


def _usage_of(acc: PMap, u: Any) -> PMap:
    # Counts are cumulative: the latest non-null value of each wins, never a sum.
    if not isinstance(u, Mapping):
        return acc
    changes = {k: u[k] for k in ("input_tokens", "output_tokens") if u.get(k) is not None}
    return acc.update(changes) if changes else acc


def stream_event(acc: PMap, event: Mapping) -> tuple[PMap, tuple[PMap, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries.

    Deltas: {"type": "text", "delta"} (text blocks only), {"type": "thinking", "delta"}
    and {"type": "tool_call_start", "index", "id", "name"}. An `error` event raises
    ProviderError with the provider's message; pings and unknown events change nothing.
    """
    if event.get("event") == "error":
        raise stream_error(event["data"])
    obj = load_json(event["data"])
    kind = obj.get("type") or event.get("event")
    deltas: list = []
    if kind == "content_block_delta":
        acc = _on_delta(acc, obj.get("index", 0), obj.get("delta") or {}, deltas)
    elif kind == "content_block_start":
        block = obj.get("content_block") or {}
        index = obj.get("index", 0)
        acc = acc.set("blocks", acc["blocks"].set(index, _new_block(block)))
        if block.get("type") == "tool_use":
            deltas.append(
                pmap(
                    {
                        "type": "tool_call_start",
                        "index": index,
                        "id": block.get("id"),
                        "name": block.get("name", ""),
                    }
                )
            )
        elif block.get("type") == "text" and block.get("text"):
            deltas.append(pmap({"type": "text", "delta": block["text"]}))
    elif kind == "message_start":
        message = obj.get("message") or {}
        acc = _usage_of(acc, message.get("usage"))
        acc = acc.update({"model": message.get("model"), "stop_reason": message.get("stop_reason")})
    elif kind == "message_delta":
        stop = (obj.get("delta") or {}).get("stop_reason")
        acc = _usage_of(acc.set("stop_reason", stop) if stop else acc, obj.get("usage"))
    elif kind == "message_stop":
        acc = acc.set("done", True)
    elif kind == "error":
        raise stream_error(obj)
    return acc, tuple(deltas)


def _input_of(raw: str, start: Any) -> tuple[Any, str | None]:
    """Return (input for the message, raw text when it is not a JSON object)."""
    if not raw.strip():
        return (start if isinstance(start, Mapping) else {}), None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    # Cut off at max_tokens: the message keeps a valid empty input (the API requires an
    # object) while the call carries the raw text, which the loop reports as invalid.
    return (value, None) if isinstance(value, Mapping) else ({}, raw)


def _block_of(entry: PMap) -> tuple[dict, str | None]:
    block, parts, bad = dict(entry["block"]), entry["parts"], None
    for field_ in ("text", "thinking", "signature"):
        if field_ in parts:
            block[field_] = (block.get(field_) or "") + "".join(parts[field_])
    if "citations" in parts:
        block["citations"] = [*(block.get("citations") or ()), *parts["citations"]]
    if "input" in parts:
        block["input"], bad = _input_of("".join(parts["input"]), block.get("input"))
    return block, bad


def stream_response(acc: PMap) -> tuple[dict, list]:
    """Return (the messages response a stream amounts to, raw arguments per tool_use block).

    The second item holds, for each tool_use block in order, its raw input text when
    that text is not a JSON object (else None).
    """
    built = [_block_of(e) for _, e in sorted(acc["blocks"].items())]
    response = {
        "model": acc["model"],
        "content": [b for b, _ in built],
        "stop_reason": acc["stop_reason"],
        "usage": {"input_tokens": acc["input_tokens"], "output_tokens": acc["output_tokens"]},
    }
    return response, [bad for b, bad in built if b.get("type") == "tool_use"]


def stream_turn(acc: PMap) -> PMap:
    """Return the normalized turn of a finished stream: exactly what parse_response gives.

    Tool arguments are the parsed input (no fragments: the content_block_start input);
    input JSON cut off at max_tokens stays the raw text, which the loop reports back
    to the model as invalid arguments.
    """
    response, raw = stream_response(acc)
    t = parse_response(response)
    if not any(r is not None for r in raw):
        return t
    calls = pvector(
        c if r is None else c.set("arguments", r) for c, r in zip(t["tool_calls"], raw, strict=True)
    )
    return t.set("tool_calls", calls)
