"""The fake provider's Anthropic Messages dialect (`POST /messages`), whole and streamed
(pure), its request rules, its error envelope, its profile and its transcripts' shapes.

The script's replies are the fake provider's neutral ones, plus "thinking": [{"thinking",
"signature"} | {"redacted": data}, ...], thinking / redacted_thinking blocks before the
text (thinking_delta and signature_delta when streamed). A stream is the API's whole
event sequence (message_start, content blocks with text_delta / input_json_delta
fragments, pings, message_delta, message_stop); "stream_error" becomes an `error` event
halfway through.

The documented rules (`validate_anthropic_request`): the first message is `user`; roles
are only `user` and `assistant`; every `tool_use` is answered by `tool_result` blocks in
the next message, a user one; tool ids match `^[a-zA-Z0-9_-]+$`; no empty text block,
no empty content; `system`, when present, is not empty.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from .fakes import Fake, Flourishes
from .replies import DEFAULT_USAGE, args_json, calls, frame, pieces, sse

__all__ = ["anthropic_response", "anthropic_stream", "validate_anthropic_request",
           "anthropic_refusal", "FAKE"]  # fmt: skip

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


def _finish(reply: Mapping) -> str:
    if reply.get("finish"):
        return reply["finish"]
    return "tool_use" if reply.get("tool_calls") else "end_turn"


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
        for c in calls(reply, seq)
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _finish(reply),
        "usage": reply.get("raw_usage")
        or {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"]},
    }


def _block(index: int, start: Mapping, deltas: list[Mapping]) -> list[bytes]:
    """Return the events of one content block: its start, its deltas, its stop."""
    return [
        sse({"type": "content_block_start", "index": index, "content_block": start},
            "content_block_start"),
        *(sse({"type": "content_block_delta", "index": index, "delta": d},
              "content_block_delta") for d in deltas),
        sse({"type": "content_block_stop", "index": index}, "content_block_stop"),
    ]  # fmt: skip


def _blocks(reply: Mapping, seq: int, piece: int) -> list[bytes]:
    """Return the content blocks' events: thinking, the text, a ping, the tool uses."""
    events: list[bytes] = []
    index = 0
    for t in _thinking_blocks(reply):
        if t["type"] == "redacted_thinking":
            events += _block(index, t, [])
        else:
            deltas = [{"type": "thinking_delta", "thinking": p}
                      for p in pieces(t["thinking"], piece)]  # fmt: skip
            deltas.append({"type": "signature_delta", "signature": t["signature"]})
            events += _block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
        index += 1
    if reply.get("content"):
        texts = pieces(reply["content"], piece)
        events += _block(
            index, {"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in texts]
        )
        index += 1
    events.append(sse({"type": "ping"}, "ping"))
    for c in calls(reply, seq):
        raw = args_json(c["arguments"])
        # The API sends one empty fragment for an empty input, as recorded streams show.
        parts = ["" if raw.strip() == "{}" else p for p in pieces(raw, piece)] or [""]
        start = {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
        events += _block(index, start, deltas)
        index += 1
    return events


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
    events = [sse({"type": "message_start", "message": message}, "message_start")]
    events += _blocks(reply, seq, piece)
    stop = {"stop_reason": _finish(reply), "stop_sequence": None}
    done = {
        "type": "message_delta",
        "delta": stop,
        "usage": {"output_tokens": given.get("output_tokens", u["completion_tokens"])},
    }
    events.append(sse(done, "message_delta"))
    return [*events, sse({"type": "message_stop"}, "message_stop")]


def _served_stream(reply: Mapping, body: Mapping, model: str, seq: int) -> list[bytes]:
    """Return the stream a request gets, a cued error event halfway through."""
    events = anthropic_stream(reply, model, seq)
    if reply.get("stream_error") is not None:
        data = {"type": "error", "error": reply["stream_error"]}
        events = [*events[: max(1, len(events) // 2)], sse(data, "error")]
    return events


def anthropic_refusal(problems: Sequence[str]) -> bytes:
    """Return the 400 body of an invalid request, in Anthropic's envelope."""
    error = {"type": "invalid_request_error", "message": "; ".join(problems)}
    return json.dumps({"type": "error", "error": error}).encode()


# ---- the documented rules ----------------------------------------------------------


def _list(value: Any) -> list:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _empty_text(blocks: list) -> bool:
    return any(
        isinstance(b, Mapping) and b.get("type") == "text" and not b.get("text") for b in blocks
    )


def _block_problems(i: int, role: Any, b: Any) -> list[str]:
    """Return the problems of one content block of message `i`."""
    if not isinstance(b, Mapping):
        return [f"messages[{i}].content: a block is not an object"]
    problems = []
    if b.get("type") == "tool_use" and not ANTHROPIC_ID.fullmatch(str(b.get("id"))):
        problems.append(f"messages[{i}]: tool_use id {b.get('id')!r} does not match"
                        " ^[a-zA-Z0-9_-]+$")  # fmt: skip
    elif b.get("type") == "tool_result":
        if role != "user":
            problems.append(f"messages[{i}]: tool_result in a {role!r} message")
        if not ANTHROPIC_ID.fullmatch(str(b.get("tool_use_id"))):
            problems.append(f"messages[{i}]: tool_use_id {b.get('tool_use_id')!r}"
                            " does not match ^[a-zA-Z0-9_-]+$")  # fmt: skip
        if _is_list(b.get("content")) and _empty_text(_list(b.get("content"))):
            problems.append(f"messages[{i}]: empty text block in a tool_result")
    return problems


def _message(i: int, m: Any) -> list[str]:
    if not isinstance(m, Mapping):
        return [f"messages[{i}]: not an object"]
    problems = []
    role, content = m.get("role"), m.get("content")
    if role not in ("user", "assistant"):
        problems.append(f"messages[{i}].role: {role!r} is not 'user' or 'assistant'")
    if isinstance(content, str):
        if not content:
            problems.append(f"messages[{i}].content: empty")
    elif not _is_list(content) or not content:
        problems.append(f"messages[{i}].content: must be a non-empty string or list of blocks")
    else:
        blocks = _list(content)
        if _empty_text(blocks):
            problems.append(f"messages[{i}].content: text content blocks must be non-empty")
        for b in blocks:
            problems += _block_problems(i, role, b)
    return problems


def _blocks_of(m: Any, kind: str, key: str) -> list:
    if not isinstance(m, Mapping):
        return []
    return [
        b.get(key)
        for b in _list(m.get("content"))
        if isinstance(b, Mapping) and b.get("type") == kind
    ]


def validate_anthropic_request(body: Mapping) -> list[str]:
    """Return the problems of a messages request body (empty when valid).

    >>> validate_anthropic_request({"messages": [{"role": "user", "content": "hi"}]})
    []
    >>> validate_anthropic_request({"messages": [{"role": "system", "content": "s"}]})[-1]
    "messages[0].role: 'system' is not 'user' or 'assistant'"
    """
    problems = []
    if "system" in body and not _system_ok(body["system"]):
        problems.append("system: must be non-empty when present")
    messages = _list(body.get("messages"))
    if not messages:
        return [*problems, "messages: must be a non-empty list"]
    if not isinstance(messages[0], Mapping) or messages[0].get("role") != "user":
        problems.append("messages[0]: the first message must be 'user'")
    for i, m in enumerate(messages):
        problems += _message(i, m)
        uses = _blocks_of(m, "tool_use", "id")
        if not uses:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered = set(_blocks_of(following, "tool_result", "tool_use_id"))
        if following is None or following.get("role") != "user":
            answered = set()
        missing = [u for u in uses if u not in answered]
        if missing:
            problems.append(f"messages[{i}]: tool_use ids {missing!r} have no tool_result"
                            " blocks in the next (user) message")  # fmt: skip
    for i, m in enumerate(messages):
        results = _blocks_of(m, "tool_result", "tool_use_id")
        before = set(_blocks_of(messages[i - 1], "tool_use", "id")) if i else set()
        orphans = [r for r in results if r not in before]
        if orphans:
            problems.append(f"messages[{i}]: tool_result for {orphans!r} without a tool_use"
                            " in the previous message")  # fmt: skip
    return problems


def _system_ok(system: Any) -> bool:
    if isinstance(system, str):
        return bool(system)
    blocks = _list(system)
    return bool(blocks) and not _empty_text(blocks)


# ---- its profile (testing.profiles) -------------------------------------------------


def _error(status: int, kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _error_frame(status: int, kind: str, message: str) -> bytes:
    return frame(_error(status, kind, message), "error")


def _retry_headers(seconds: float) -> dict:
    return {"retry-after": str(math.ceil(seconds)), "x-should-retry": "true"}


def _should_retry(status: int) -> dict:
    # The API says whether to retry a failure; the SDK reads it before the status.
    return {"x-should-retry": "true" if status in (429, 529) or status >= 500 else "false"}


PROFILE = MappingProxyType(
    {
        "source": "docs.anthropic.com errors (529 overloaded_error, SSE error events); "
        "anthropic-sdk-python 0.121.0 _base_client.py (x-should-retry)",
        "overloaded_status": 529,
        "error_types": MappingProxyType(
            {
                "overloaded": "overloaded_error",
                "rate_limited": "rate_limit_error",
                "server": "api_error",
                "bad_gateway": "api_error",
                "bad_request": "invalid_request_error",
            }  # fmt: skip
        ),
        "error_body": _error,
        "stream_error": _error_frame,
        "retry_headers": _retry_headers,
        "status_headers": _should_retry,
    }
)


# ---- drawn transcripts (testing.strategies) ------------------------------------------


def _tool_round(draw: Any, ids: list[str], kit: Any) -> list[dict]:
    """Return a tool round: maybe thinking and text, the tool uses, then one user message
    of their results."""
    st = kit.st
    lead = []
    if draw(st.booleans()):
        lead.append({"type": "thinking", "thinking": draw(kit.text), "signature": "sig"})
    if draw(st.booleans()):
        lead.append({"type": "text", "text": draw(kit.text)})
    uses = [{"type": "tool_use", "id": i, "name": draw(kit.names), "input": draw(kit.args)}
            for i in ids]  # fmt: skip
    blocks = st.builds(lambda t: [{"type": "text", "text": t}], kit.text)
    results = [
        {"type": "tool_result", "tool_use_id": i, "content": draw(kit.text | blocks),
         "is_error": draw(st.booleans())}
        for i in ids
    ]  # fmt: skip
    return [{"role": "assistant", "content": lead + uses}, {"role": "user", "content": results}]


def _answer(draw: Any, n: int, kit: Any) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": draw(kit.text)}]}


FAKE = Fake(
    name="anthropic",
    path="/messages",
    response=anthropic_response,
    stream=_served_stream,
    refusal=anthropic_refusal,
    rules=validate_anthropic_request,
    spec=("anthropic-messages.json", "CreateMessageParams"),
    profiles=MappingProxyType({"anthropic": PROFILE}),
    # A system message is no message here: the request carries it in its body.
    flourishes=Flourishes(
        calls=_tool_round, answer=_answer, block="text", prefix="toolu", system=False
    ),  # fmt: skip
)
