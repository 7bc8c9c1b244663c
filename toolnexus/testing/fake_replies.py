"""The fake provider's answers (pure): a script's replies as each dialect's whole answer
and as its SSE stream. `fake_provider` serves them; tests build answers with them too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .fake_gemini import gemini_response, gemini_stream
from .fake_responses import responses_response, responses_stream

__all__ = [
    "DEFAULT_USAGE",
    "RESPONSES",
    "text_reply",
    "tool_calls_reply",
    "openai_response",
    "anthropic_response",
    "openai_stream",
    "anthropic_stream",
    "stream_events",
]

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


def text_reply(content: str, **extra: Any) -> dict:
    """Return a script entry that answers with text."""
    return {"content": content, **extra}


def tool_calls_reply(*calls: tuple[str, Mapping] | Mapping, **extra: Any) -> dict:
    """Return a script entry calling tools: (name, args) pairs or {"id"?, "name", "arguments"}."""
    norm = [c if isinstance(c, Mapping) else {"name": c[0], "arguments": c[1]} for c in calls]
    return {"tool_calls": norm, **extra}


def _finish(reply: Mapping, dialect: str) -> str:
    if reply.get("finish"):
        return reply["finish"]
    calls = bool(reply.get("tool_calls"))
    if dialect == "openai":
        return "tool_calls" if calls else "stop"
    return "tool_use" if calls else "end_turn"


def _args_json(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _calls(reply: Mapping, seq: int) -> list[dict]:
    # Ids unique across a conversation: request number and position in the turn.
    return [
        {**c, "id": c.get("id") or f"call_{seq}_{i}"}
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]


def openai_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the chat completions response body of a reply."""
    calls = _calls(reply, seq)
    u = reply.get("usage") or DEFAULT_USAGE
    message: dict = {"role": "assistant", "content": reply.get("content")}
    if reply.get("reasoning_content"):
        message["reasoning_content"] = reply["reasoning_content"]
    if reply.get("refusal"):
        message.update(content=None, refusal=reply["refusal"])
    message.update(reply.get("message_extra") or {})
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": _args_json(c["arguments"])},
                **(c.get("extra") or {}),
            }
            for c in calls
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply, "openai")}],
        "usage": reply.get("raw_usage") or _openai_usage(u),
    }


def _openai_usage(u: Mapping) -> dict:
    return {
        "prompt_tokens": u["prompt_tokens"],
        "completion_tokens": u["completion_tokens"],
        "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
    }


def _thinking_blocks(reply: Mapping) -> list[dict]:
    out = []
    for t in reply.get("thinking") or ():
        if "redacted" in t:
            out.append({"type": "redacted_thinking", "data": t["redacted"]})
        else:
            out.append({"type": "thinking", "thinking": t["thinking"],
                        "signature": t.get("signature", "sig")})  # fmt: skip
    return out


def anthropic_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the messages response body of a reply."""
    calls = _calls(reply, seq)
    u = reply.get("usage") or DEFAULT_USAGE
    content: list[dict] = _thinking_blocks(reply)
    content += [{"type": "text", "text": reply["content"]}] if reply.get("content") else []
    content += [
        {
            "type": "tool_use",
            "id": c["id"],
            "name": c["name"],
            "input": json.loads(c["arguments"])
            if isinstance(c["arguments"], str)
            else c["arguments"],
        }
        for c in calls
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _finish(reply, "anthropic"),
        "usage": reply.get("raw_usage")
        or {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"]},
    }


RESPONSES = {"openai": openai_response, "anthropic": anthropic_response,
             "responses": responses_response, "gemini": gemini_response}  # fmt: skip

# ---- SSE bodies (pure) ---------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    # Fixed-size fragments: split mid-word, mid-key and mid-number like real streams.
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def openai_stream(
    reply: Mapping,
    model: str = "fake-model",
    seq: int = 0,
    *,
    include_usage: bool = True,
    piece: int = 5,
) -> list[bytes]:
    """Return the SSE events (bytes each) of a chat completions stream of a reply."""

    def chunk(delta: Mapping, finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(
            {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
             "model": model, "choices": [choice], **extra}
        )  # fmt: skip

    events = [chunk({"role": "assistant", "content": ""})]
    events += [
        chunk({"content": None, "reasoning_content": p})
        for p in _pieces(reply.get("reasoning_content") or "", piece)
    ]
    if reply.get("message_extra"):
        events.append(chunk({"content": None, **reply["message_extra"]}))
    events += [chunk({"content": p}) for p in _pieces(reply.get("content") or "", piece)]
    events += [chunk({"refusal": p}) for p in _pieces(reply.get("refusal") or "", piece)]
    for i, c in enumerate(_calls(reply, seq)):
        start = {"index": i, "id": c["id"], "type": "function", **(c.get("extra") or {})}
        events.append(
            chunk({"tool_calls": [{**start, "function": {"name": c["name"], "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in _pieces(_args_json(c["arguments"]), piece)
        ]
    events.append(chunk({}, _finish(reply, "openai")))
    if include_usage:
        u = reply.get("usage") or DEFAULT_USAGE
        usage = reply.get("raw_usage") or _openai_usage(u)
        events.append(
            _sse({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                  "model": model, "choices": [], "usage": usage})
        )  # fmt: skip
    return [*events, _sse("[DONE]")]


def anthropic_stream(
    reply: Mapping, model: str = "fake-model", seq: int = 0, *, piece: int = 5
) -> list[bytes]:
    """Return the SSE events (bytes each) of a messages stream of a reply."""
    u = reply.get("usage") or DEFAULT_USAGE
    given = reply.get("raw_usage") or {}
    start_usage = {"input_tokens": u["prompt_tokens"], **given, "output_tokens": 1}
    message = {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage,
    }  # fmt: skip
    events = [_sse({"type": "message_start", "message": message}, "message_start")]

    def block(index: int, start: Mapping, deltas: list[Mapping]) -> list[bytes]:
        return [
            _sse({"type": "content_block_start", "index": index, "content_block": start},
                 "content_block_start"),
            *(_sse({"type": "content_block_delta", "index": index, "delta": d},
                   "content_block_delta") for d in deltas),
            _sse({"type": "content_block_stop", "index": index}, "content_block_stop"),
        ]  # fmt: skip

    index = 0
    for t in _thinking_blocks(reply):
        if t["type"] == "redacted_thinking":
            events += block(index, t, [])
        else:
            deltas = [{"type": "thinking_delta", "thinking": p}
                      for p in _pieces(t["thinking"], piece)]  # fmt: skip
            deltas.append({"type": "signature_delta", "signature": t["signature"]})
            events += block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if reply.get("content"):
        texts = _pieces(reply["content"], piece)
        events += block(
            index, {"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in texts]
        )
        index += 1
    events.append(_sse({"type": "ping"}, "ping"))
    for c in _calls(reply, seq):
        raw = _args_json(c["arguments"])
        # The API sends one empty fragment for an empty input, as recorded streams show.
        parts = ["" if raw.strip() == "{}" else p for p in _pieces(raw, piece)] or [""]
        start = {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
        events += block(index, start, deltas)
        index += 1
    stop = {"stop_reason": _finish(reply, "anthropic"), "stop_sequence": None}
    done = {
        "type": "message_delta",
        "delta": stop,
        "usage": {"output_tokens": given.get("output_tokens", u["completion_tokens"])},
    }
    events.append(_sse(done, "message_delta"))
    return [*events, _sse({"type": "message_stop"}, "message_stop")]


def stream_events(reply: Mapping, body: Mapping, dialect: str, model: str, seq: int) -> list:
    if reply.get("sse") is not None:  # a real provider's stream, byte for byte
        raw = reply["sse"]
        return [raw.encode() if isinstance(raw, str) else bytes(raw)]
    if reply.get("sse_events") is not None:  # a profile's stream (testing.profiles)
        return list(reply["sse_events"])
    if dialect == "responses":  # its own error events (see fake_responses)
        return responses_stream(reply, model, seq)
    if dialect == "gemini":  # its own chunks and error chunk (see fake_gemini)
        return gemini_stream(reply, model, seq)
    if dialect == "openai":
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = openai_stream(reply, model, seq, include_usage=usage)
    else:
        events = anthropic_stream(reply, model, seq)
    if reply.get("stream_error") is not None:
        err = reply["stream_error"]
        data = {"error": err} if dialect == "openai" else {"type": "error", "error": err}
        events = [*events[: max(1, len(events) // 2)], _sse(data, "error")]
    return events
