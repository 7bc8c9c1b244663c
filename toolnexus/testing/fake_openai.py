"""The fake provider's OpenAI chat completions dialect (`POST /chat/completions`), whole and
streamed (pure), its request rules, its error envelope and its transcripts' shapes.

The script's replies are the fake provider's neutral ones, plus the shapes of OpenAI's
message and of compatible servers': "reasoning_content" (DeepSeek's), "message_extra"
(more fields of the message, verbatim), a call's "extra" (fields of the tool call),
"refusal". A streamed request's `stream_options.include_usage` adds the usage chunk;
"stream_error" becomes an SSE `error` event halfway through.

The documented rules (`validate_openai_request`): every `tool_calls` entry is answered
by a `tool` message before the next other message; tool call ids are at most 40
characters; `arguments` is a string; no assistant message without content or tool
calls; a function tool's name matches `^[a-zA-Z0-9_-]{1,64}$` (documented, not in the
schema).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .fake_openai_profiles import PROFILES
from .fakes import Fake, Flourishes
from .replies import DEFAULT_USAGE, args_json, calls, frame, pieces, sse

__all__ = ["openai_response", "openai_stream", "validate_openai_request", "openai_refusal",
           "FAKE"]  # fmt: skip

OPENAI_ID_MAX = 40
OPENAI_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _finish(reply: Mapping) -> str:
    if reply.get("finish"):
        return reply["finish"]
    return "tool_calls" if reply.get("tool_calls") else "stop"


def _usage(u: Mapping) -> dict:
    return {
        "prompt_tokens": u["prompt_tokens"],
        "completion_tokens": u["completion_tokens"],
        "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
    }


def openai_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the chat completions response body of a reply."""
    made = calls(reply, seq)
    u = reply.get("usage") or DEFAULT_USAGE
    message: dict = {"role": "assistant", "content": reply.get("content")}
    if reply.get("reasoning_content"):
        message["reasoning_content"] = reply["reasoning_content"]
    if reply.get("refusal"):
        message.update(content=None, refusal=reply["refusal"])
    message.update(reply.get("message_extra") or {})
    if made:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": args_json(c["arguments"])},
                **(c.get("extra") or {}),
            }
            for c in made
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": reply.get("raw_usage") or _usage(u),
    }


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
        return sse(
            {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
             "model": model, "choices": [choice], **extra}
        )  # fmt: skip

    events = [chunk({"role": "assistant", "content": ""})]
    events += [
        chunk({"content": None, "reasoning_content": p})
        for p in pieces(reply.get("reasoning_content") or "", piece)
    ]
    if reply.get("message_extra"):
        events.append(chunk({"content": None, **reply["message_extra"]}))
    events += [chunk({"content": p}) for p in pieces(reply.get("content") or "", piece)]
    events += [chunk({"refusal": p}) for p in pieces(reply.get("refusal") or "", piece)]
    for i, c in enumerate(calls(reply, seq)):
        start = {"index": i, "id": c["id"], "type": "function", **(c.get("extra") or {})}
        events.append(
            chunk({"tool_calls": [{**start, "function": {"name": c["name"], "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in pieces(args_json(c["arguments"]), piece)
        ]
    events.append(chunk({}, _finish(reply)))
    if include_usage:
        u = reply.get("usage") or DEFAULT_USAGE
        usage = reply.get("raw_usage") or _usage(u)
        events.append(
            sse({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                 "model": model, "choices": [], "usage": usage})
        )  # fmt: skip
    return [*events, sse("[DONE]")]


def _served_stream(reply: Mapping, body: Mapping, model: str, seq: int) -> list[bytes]:
    """Return the stream a request gets: usage as it asks, a cued error halfway through."""
    usage = bool((body.get("stream_options") or {}).get("include_usage"))
    events = openai_stream(reply, model, seq, include_usage=usage)
    if reply.get("stream_error") is not None:
        data = {"error": reply["stream_error"]}
        events = [*events[: max(1, len(events) // 2)], sse(data, "error")]
    return events


PARAM = re.compile(r"([A-Za-z_][\w-]*(?:\[\d+\]|\.[\w-]+)*): ")


def openai_refusal(problems: Sequence[str]) -> bytes:
    """Return the 400 body of an invalid request: OpenAI's envelope, its `param` the first
    problem's path ("path: why" strings)."""
    message = "; ".join(problems)
    param = next((m[1] for p in problems if (m := PARAM.match(p))), None)
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return json.dumps({"error": error}).encode()


# ---- the documented rules ----------------------------------------------------------


def _list(value: Any) -> list:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _calls_of(i: int, m: Mapping) -> tuple[list[str], list]:
    problems, ids = [], []
    for c in _list(m.get("tool_calls")):
        if not isinstance(c, Mapping):
            problems.append(f"messages[{i}].tool_calls: an entry is not an object")
            continue
        cid = c.get("id")
        if not isinstance(cid, str) or not cid or len(cid) > OPENAI_ID_MAX:
            problems.append(f"messages[{i}].tool_calls: id {cid!r} must be a string of at most"
                            f" {OPENAI_ID_MAX} characters")  # fmt: skip
        if not isinstance((c.get("function") or {}).get("arguments"), str):
            problems.append(f"messages[{i}].tool_calls[{cid!r}].function.arguments: not a string")
        ids.append(cid)
    return problems, ids


def validate_openai_request(body: Mapping) -> list[str]:
    """Return the problems of a chat completions request body (empty when valid).

    >>> validate_openai_request({"messages": [{"role": "user", "content": "hi"}]})
    []
    >>> validate_openai_request({"messages": [{"role": "assistant", "content": None}]})
    ['messages[0]: an assistant message needs content or tool_calls']
    """
    problems = _top(body)
    messages = _list(body.get("messages"))
    if not messages:
        return [*problems, "messages: must be a non-empty list"]
    open_ids: list = []  # calls still waiting for their tool messages
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            problems.append(f"messages[{i}]: not an object")
            continue
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid in open_ids:
                open_ids.remove(cid)
            else:
                problems.append(f"messages[{i}]: tool message for {cid!r} answers no open call")
            continue
        if open_ids:
            problems.append(f"messages[{i}]: tool_calls {open_ids!r} are not answered by tool"
                            " messages before it")  # fmt: skip
            open_ids = []
        if role == "assistant":
            found, ids = _calls_of(i, m)
            problems += found
            if not m.get("content") and not ids:
                problems.append(f"messages[{i}]: an assistant message needs content or tool_calls")
            open_ids = ids
    if open_ids:
        problems.append(f"tool_calls {open_ids!r} of the last assistant message are not answered")
    return problems


def _top(body: Mapping) -> list[str]:
    problems = []
    for i, t in enumerate(_list(body.get("tools"))):
        if isinstance(t, Mapping) and t.get("type", "function") == "function":
            name = (t.get("function") or {}).get("name")
            if not isinstance(name, str) or not OPENAI_TOOL_NAME.fullmatch(name):
                problems.append(f"tools[{i}].function.name: {name!r} does not match"
                                " ^[a-zA-Z0-9_-]{1,64}$")  # fmt: skip
    return problems


# ---- a profile's stream quirk: every tool call at index 0 ---------------------------


def calls_at_zero(events: list[bytes], whole: bool) -> list[bytes]:
    """Return a stream whose tool calls all say index 0, with their own ids: in fragments
    as given, or (`whole`) each in one chunk, as Ollama sends parallel calls."""
    if not whole:
        return [_fragments_at_zero(e) for e in events]
    out: list[bytes] = []
    gathered: list[dict] = []
    for raw in events:
        text = raw.decode()
        data = text.partition("data: ")[2].strip()
        chunk = json.loads(data) if data.startswith("{") else None
        choices = (chunk or {}).get("choices") or [{}]
        fragments = (choices[0].get("delta") or {}).get("tool_calls")
        if not fragments:
            if gathered and chunk is not None and choices[0].get("finish_reason"):
                out += [_call_chunk(chunk, c) for c in gathered]
                gathered = []
            out.append(raw)
            continue
        for f in fragments:
            if f.get("id"):
                gathered.append({**f, "index": 0, "function": dict(f["function"])})
            else:
                fn = gathered[-1]["function"]
                fn["arguments"] = fn.get("arguments", "") + f["function"]["arguments"]
    return out


def _fragments_at_zero(raw: bytes) -> bytes:
    data = raw.decode().partition("data: ")[2].strip()
    chunk = json.loads(data) if data.startswith("{") else {}
    delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
    if not delta.get("tool_calls"):
        return raw
    delta["tool_calls"] = [{**f, "index": 0} for f in delta["tool_calls"]]
    return frame(chunk)


def _call_chunk(template: Mapping, call: Mapping) -> bytes:
    delta = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    return frame({**template, "choices": [choice]})


# ---- drawn transcripts (testing.strategies) ------------------------------------------


def _tool_round(draw: Any, ids: list[str], kit: Any) -> list[dict]:
    """Return a tool round: an assistant message of calls, then one tool message each."""
    st = kit.st
    made = [
        {
            "id": i,
            "type": "function",
            "function": {"name": draw(kit.names), "arguments": json.dumps(draw(kit.args))},
        }
        for i in ids
    ]
    return [
        {"role": "assistant", "content": draw(st.none() | kit.text), "tool_calls": made},
        *({"role": "tool", "tool_call_id": i, "content": draw(kit.text)} for i in ids),
    ]


FAKE = Fake(
    name="openai",
    path="/chat/completions",
    response=openai_response,
    stream=_served_stream,
    refusal=openai_refusal,
    rules=validate_openai_request,
    spec=("openai-chat.json", "CreateChatCompletionRequest"),
    profiles=PROFILES,
    index_calls=calls_at_zero,
    flourishes=Flourishes(calls=_tool_round),
)
