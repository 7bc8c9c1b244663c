"""Pure codec for OpenAI-style chat completions (also used by the in-process client)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, pmap, pvector

from ..toolkit import to_openai
from .common import turn, usage
from .sse import load_json, stream_error

__all__ = [
    "url",
    "headers",
    "user_message",
    "body",
    "parse_response",
    "parse_generated",
    "tool_result_messages",
    "stream_body",
    "stream_start",
    "stream_event",
    "stream_response",
    "stream_turn",
]


encode_tools = to_openai  # toolkit -> the `tools` list of a request body


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


def body(model: str, messages: Sequence, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return a request body; the system prompt leads, no tools omits `tools`.

    `tools` is already in wire shape (`encode_tools(toolkit)`), encoded once per run.
    """
    msgs = [{"role": "system", "content": system}, *messages] if system else messages
    out = {"model": model, "messages": msgs}
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


# ---- streaming: SSE events -> deltas -> the same normalized turn -----------------


def stream_body(body: Mapping) -> dict:
    """Return a copy of a request body that asks for a stream ending in a usage chunk.

    >>> stream_body({"model": "m"})
    {'model': 'm', 'stream': True, 'stream_options': {'include_usage': True}}
    """
    options = {**(body.get("stream_options") or {}), "include_usage": True}
    return {**body, "stream": True, "stream_options": options}


_EMPTY_CALL = pmap({"id": None, "name": "", "args": pvector()})


def stream_start() -> PMap:
    """Return the accumulator of a stream that has delivered nothing yet.

    Its keys: text, refusal (pvectors of fragments), calls (index -> {id, name, args}),
    usage, finish, model, and done (True once `data: [DONE]` arrived).
    """
    return pmap(
        {
            "text": pvector(),
            "refusal": pvector(),
            "calls": pmap(),
            "usage": None,
            "finish": None,
            "model": None,
            "done": False,
        }
    )


def _call_index(calls: PMap, fragment: Mapping) -> int:
    # Every OpenAI fragment has an index; some compatible servers omit it and send each
    # call whole, so a fragment with a new id opens the next index.
    if "index" in fragment and fragment["index"] is not None:
        return int(fragment["index"])
    known = {c["id"]: i for i, c in calls.items()}
    fid = fragment.get("id")
    if fid and fid not in known:
        return max(calls, default=-1) + 1
    return known.get(fid, max(calls, default=0))


def _add_fragment(acc: PMap, fragment: Mapping, deltas: list) -> PMap:
    calls = acc["calls"]
    index = _call_index(calls, fragment)
    call = calls.get(index)
    fn = fragment.get("function") or {}
    if call is None:
        call = _EMPTY_CALL.update({"id": fragment.get("id"), "name": fn.get("name") or ""})
        deltas.append(
            pmap(
                {"type": "tool_call_start", "index": index, "id": call["id"], "name": call["name"]}
            )
        )
    else:
        if not call["id"] and fragment.get("id"):
            call = call.set("id", fragment["id"])
        if not call["name"] and fn.get("name"):
            call = call.set("name", fn["name"])
    args = fn.get("arguments")
    if args:
        call = call.set("args", call["args"].append(_args_text(args)))
    return acc.set("calls", calls.set(index, call))


def stream_event(acc: PMap, event: Mapping) -> tuple[PMap, tuple[PMap, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries.

    Deltas: {"type": "text", "delta"}, {"type": "refusal", "delta"} and
    {"type": "tool_call_start", "index", "id", "name"}. An `error` event, or a chunk
    holding "error", raises ProviderError with the provider's message.
    """
    data = event["data"]
    if event.get("event") == "error":
        raise stream_error(data)
    if data.strip() == "[DONE]":
        return acc.set("done", True), ()
    chunk = load_json(data)
    if chunk.get("error") is not None:
        raise stream_error(chunk)
    deltas: list = []
    changes: dict = {}
    if acc["model"] is None and chunk.get("model"):
        changes["model"] = chunk["model"]
    if chunk.get("usage") is not None:  # the include_usage chunk (choices may be empty)
        changes["usage"] = chunk["usage"]
    if changes:
        acc = acc.update(changes)
    for choice in chunk.get("choices") or ():
        if choice.get("index", 0) != 0:  # parse_response reads choices[0] only
            continue
        delta = choice.get("delta") or {}
        if delta.get("content"):
            acc = acc.set("text", acc["text"].append(delta["content"]))
            deltas.append(pmap({"type": "text", "delta": delta["content"]}))
        if delta.get("refusal"):
            acc = acc.set("refusal", acc["refusal"].append(delta["refusal"]))
            deltas.append(pmap({"type": "refusal", "delta": delta["refusal"]}))
        for fragment in delta.get("tool_calls") or ():
            acc = _add_fragment(acc, fragment, deltas)
        if choice.get("finish_reason") is not None:  # a later null never resets it
            acc = acc.set("finish", choice["finish_reason"])
    return acc, tuple(deltas)


def stream_response(acc: PMap) -> dict:
    """Return the chat completions response a stream amounts to (what parse_response reads)."""
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": "".join(c["args"])},
        }
        for _, c in sorted(acc["calls"].items())
    ]
    message: dict = {"role": "assistant", "content": "".join(acc["text"]) or None}
    if calls:
        message["tool_calls"] = calls
    if acc["refusal"]:
        message["refusal"] = "".join(acc["refusal"])
    return {
        "model": acc["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": acc["finish"]}],
        "usage": acc["usage"],
    }


def stream_turn(acc: PMap) -> PMap:
    """Return the normalized turn of a finished stream: exactly what parse_response gives.

    Tool arguments stay raw (the joined fragments), so JSON cut off at max_tokens
    reaches the loop, which feeds back an invalid-arguments error.
    """
    return parse_response(stream_response(acc))
