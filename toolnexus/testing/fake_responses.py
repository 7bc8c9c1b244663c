"""The fake provider's Responses dialect (`POST /responses`), whole and streamed (pure).

The script's replies are the fake provider's neutral ones ("content", "tool_calls",
"refusal", "usage", "raw_usage"), plus the Responses shapes:
  "reasoning": [{"summary"?: str, "encrypted_content"?: str}, ...]  reasoning items
                             before the answer (summary streamed as
                             response.reasoning_summary_text.delta fragments)
  "incomplete": reason       status "incomplete" with incomplete_details.reason
                             ("max_output_tokens", "content_filter"): response.incomplete
  "failed": {"code"?, "message"}   status "failed": response.failed when streamed
A streamed reply's "stream_error" becomes an `error` event halfway through.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["responses_response", "responses_stream", "responses_error", "expand", "keep"]

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


def _args_json(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _usage(reply: Mapping) -> dict:
    if reply.get("raw_usage"):
        return dict(reply["raw_usage"])
    u = reply.get("usage") or DEFAULT_USAGE  # details only as "raw_usage" gives them
    return {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
            "total_tokens": u["prompt_tokens"] + u["completion_tokens"]}  # fmt: skip


def _items(reply: Mapping, seq: int) -> list[dict]:
    """Return the output items of a reply: reasoning, the message, the function calls."""
    out: list[dict] = []
    for i, r in enumerate(reply.get("reasoning") or ()):
        summary = [{"type": "summary_text", "text": r["summary"]}] if r.get("summary") else []
        item = {"type": "reasoning", "id": f"rs_{seq}_{i}", "summary": summary}
        if r.get("encrypted_content") is not None:
            item["encrypted_content"] = r["encrypted_content"]
        out.append(item)
    content: list[dict] = []
    if reply.get("content"):
        content.append({"type": "output_text", "text": reply["content"], "annotations": [],
                        "logprobs": []})  # fmt: skip
    if reply.get("refusal"):
        content.append({"type": "refusal", "refusal": reply["refusal"]})
    if content:
        status = "incomplete" if reply.get("incomplete") else "completed"
        out.append({"type": "message", "id": f"msg_{seq}", "role": "assistant",
                    "status": status, "content": content})  # fmt: skip
    for i, c in enumerate(reply.get("tool_calls") or ()):
        out.append({"type": "function_call", "id": f"fc_{seq}_{i}",
                    "call_id": c.get("id") or f"call_{seq}_{i}", "name": c["name"],
                    "arguments": _args_json(c["arguments"]), "status": "completed"})  # fmt: skip
    return out


def responses_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the Responses response body of a reply."""
    status = "failed" if reply.get("failed") else "incomplete" if reply.get("incomplete") else (
        "completed")  # fmt: skip
    out: dict = {
        "id": f"resp_{seq}",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": status,
        "output": [] if reply.get("failed") else _items(reply, seq),
        "usage": _usage(reply),
        "error": None,
        "incomplete_details": None,
    }
    if reply.get("incomplete"):
        out["incomplete_details"] = {"reason": reply["incomplete"]}
    if reply.get("failed"):
        out["error"] = {"code": "server_error", **reply["failed"]}
    return out


def _sse(data: Mapping) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _item_events(item: Mapping, index: int, piece: int) -> list[dict]:
    """Return the events of one output item: added, its deltas, done."""
    kind = item["type"]
    added = dict(item)
    if kind == "function_call":
        added["arguments"] = ""
    elif kind == "message":
        added["content"] = []
    elif kind == "reasoning":
        added["summary"] = []
    events = [{"type": "response.output_item.added", "output_index": index, "item": added}]
    if kind == "function_call":
        events += [{"type": "response.function_call_arguments.delta", "output_index": index,
                    "item_id": item["id"], "delta": p}
                   for p in _pieces(item["arguments"], piece)]  # fmt: skip
        events.append({"type": "response.function_call_arguments.done", "output_index": index,
                       "item_id": item["id"], "arguments": item["arguments"]})  # fmt: skip
    for n, part in enumerate(item.get("content") or () if kind == "message" else ()):
        text_kind = "output_text" if part["type"] == "output_text" else "refusal"
        text = part.get("text") if text_kind == "output_text" else part.get("refusal")
        where = {"output_index": index, "item_id": item["id"], "content_index": n}
        events.append(
            {
                "type": "response.content_part.added",
                **where,
                "part": {**part, text_kind if text_kind == "refusal" else "text": ""},
            }
        )
        delta = "response.output_text.delta" if text_kind == "output_text" else (
            "response.refusal.delta")  # fmt: skip
        events += [{"type": delta, **where, "delta": p} for p in _pieces(text, piece)]
        events.append({"type": "response.content_part.done", **where, "part": part})
    for n, s in enumerate(item.get("summary") or () if kind == "reasoning" else ()):
        where = {"output_index": index, "item_id": item["id"], "summary_index": n}
        events += [{"type": "response.reasoning_summary_text.delta", **where, "delta": p}
                   for p in _pieces(s["text"], piece)]  # fmt: skip
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def responses_stream(
    reply: Mapping, model: str = "fake-model", seq: int = 0, *, piece: int = 5
) -> list[bytes]:
    """Return the SSE events (bytes each) of a Responses stream of a reply."""
    final = responses_response(reply, model, seq)
    start = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict] = [{"type": "response.created", "response": start},
                          {"type": "response.in_progress", "response": start}]  # fmt: skip
    for index, item in enumerate(final["output"]):
        events += _item_events(item, index, piece)
    closing = {"completed": "response.completed", "incomplete": "response.incomplete",
               "failed": "response.failed"}[final["status"]]  # fmt: skip
    events.append({"type": closing, "response": final})
    out = [_sse({**e, "sequence_number": n}) for n, e in enumerate(events)]
    if reply.get("stream_error") is not None:
        err = reply["stream_error"]
        data = {"type": "error", "code": err.get("type"), "message": err.get("message"),
                "param": None, "sequence_number": len(out)}  # fmt: skip
        out = [*out[: max(1, len(out) // 2)], _sse(data)]
    return out


def responses_error(message: str) -> bytes:
    """Return the 400 body of an invalid request (OpenAI's error shape)."""
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return json.dumps({"error": error}).encode()


def expand(body: Mapping, kept: Mapping) -> tuple[Mapping, bytes | None]:
    """Return (the request as the server reads it, None), or (body, the 400 of a
    `previous_response_id` it does not keep): a kept conversation's items, then the new
    ones, so the rules are checked on the whole conversation."""
    prev = body.get("previous_response_id") if isinstance(body, Mapping) else None
    if prev is None:  # (a body that is no object is refused as one by the validators)
        return body, None
    if prev not in kept:
        error = {"message": f"Previous response with id '{prev}' not found.",
                 "type": "invalid_request_error", "param": "previous_response_id",
                 "code": "previous_response_not_found"}  # fmt: skip
        return body, json.dumps({"error": error}).encode()
    given = body.get("input")
    given = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
    return {**body, "input": [*kept[prev], *given]}, None


def keep(kept: dict, body: Mapping, reply: Mapping, model: str, seq: int) -> None:
    """Keep the conversation of an answered request when it asked to be stored (the API's
    default), under its response's id; `kept` is the provider's own dict."""
    if body.get("store", True) is False:
        return
    given = body.get("input")
    given = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
    kept[f"resp_{seq}"] = [*given, *responses_response(reply, model, seq)["output"]]
