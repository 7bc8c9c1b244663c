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

The documented rules (`validate_responses_request`): every function_call_output answers
a function_call before it (each once), every function_call is answered, a reasoning item
is followed by the item it led to, and with `store: false` it carries its
encrypted_content; no message without content; no item id given twice; no null field on
an item; no encrypted reasoning asked of a model that does not reason. The server keeps
the conversation of a stored response (`keep`): a request naming it as
`previous_response_id` continues it (`expand`), and the rules read the whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .fake_openai import openai_refusal
from .fakes import Fake, Flourishes
from .replies import frame

__all__ = ["responses_response", "responses_stream", "responses_error", "expand", "keep",
           "validate_responses_request", "FAKE"]  # fmt: skip

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


def _served_stream(reply: Mapping, body: Mapping, model: str, seq: int) -> list[bytes]:
    return responses_stream(reply, model, seq)


def _failed(stream: list[bytes], cut: int, kind: str, message: str) -> list[bytes]:
    """Return a stream cut after `cut` events, then the dialect's own `error` event (a
    profile's error type as its code): no server's chat quirks reach this stream."""
    error = {"type": "error", "code": kind, "message": message, "param": None,
             "sequence_number": cut}  # fmt: skip
    return [*stream[:cut], frame(error)]


# ---- the documented rules ----------------------------------------------------------


def _list(value: Any) -> list:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _responses_item(i: int, item: Any, open_ids: list, called: set, store: Any) -> list[str]:
    """Return the problems of one input item; updates the open and seen call ids."""
    if not isinstance(item, Mapping):
        return [f"input[{i}]: not an object"]
    kind = item.get("type", "message")
    if kind == "function_call":
        cid = item.get("call_id")
        if cid in called:
            return [f"input[{i}]: duplicate function_call call_id {cid!r}"]
        called.add(cid)
        open_ids.append(cid)
        return []
    if kind == "function_call_output":
        cid = item.get("call_id")
        if cid not in open_ids:
            return [f"input[{i}]: function_call_output for {cid!r} answers no function_call"
                    " before it"]  # fmt: skip
        open_ids.remove(cid)
        return []
    nulls = [k for k, v in item.items() if v is None]
    if nulls:  # what a gateway adds (LiteLLM: "async": null, "namespace": null)
        return [f"input[{i}].{nulls[0]}: null is not a valid value for an input item's field"]
    if kind == "reasoning" and store is False and not item.get("encrypted_content"):
        return [f"input[{i}]: a reasoning item without encrypted_content cannot be replayed"
                " with store false (the server kept nothing)"]  # fmt: skip
    if kind == "message" and not item.get("content"):
        return [f"input[{i}]: a message needs content"]
    return []


def _led(items: list, i: int) -> bool:
    """Return whether the reasoning at `i` leads to an output of the model's own: a
    message of the assistant or a call, after any further reasoning."""
    for following in items[i + 1 :]:
        if not isinstance(following, Mapping):
            return False
        kind = following.get("type")
        if kind == "reasoning":
            continue
        if kind in (None, "message"):
            return following.get("role") == "assistant"
        return kind != "function_call_output"
    return False


# OpenAI's models that do not reason refuse to be asked for encrypted reasoning.
_NO_ENCRYPTED = re.compile(r"(chatgpt-4o|gpt-4o|gpt-4\.1)(-|$)")


def _include_problems(body: Mapping) -> list[str]:
    include = body.get("include")
    model = body.get("model")
    if not isinstance(model, str) or not isinstance(include, list):
        return []
    if "reasoning.encrypted_content" in include and _NO_ENCRYPTED.match(model):
        return ["include: Encrypted content is not supported with this model."]
    return []


def validate_responses_request(body: Mapping) -> list[str]:
    """Return the problems of a Responses request body (empty when valid): every
    function_call_output answers a function_call before it (each once), every
    function_call is answered, a reasoning item is followed by the item it led to, and
    with `store: false` it carries its encrypted_content; no message without content;
    no item id given twice; no null field on an item; no encrypted reasoning asked of a
    model that does not reason (gpt-4o, gpt-4.1).

    >>> validate_responses_request({"input": [{"type": "function_call_output",
    ...                                        "call_id": "c", "output": "4"}]})
    ["input[0]: function_call_output for 'c' answers no function_call before it"]
    """
    given = body.get("input")
    if isinstance(given, str):
        return [] if given else ["input: empty"]
    items = _list(given)
    if not items and body.get("previous_response_id") is None:
        return ["input: must be a non-empty list (or text)"]
    problems: list = _include_problems(body)
    open_ids: list = []
    called: set = set()
    store = body.get("store", True)
    seen: set = set()  # item ids: the API refuses one given twice
    for i, item in enumerate(items):
        problems += _responses_item(i, item, open_ids, called, store)
        iid = item.get("id") if isinstance(item, Mapping) else None
        if isinstance(iid, str):
            if iid in seen:
                problems.append(f"input[{i}]: duplicate item id {iid!r}")
            seen.add(iid)
        if isinstance(item, Mapping) and item.get("type") == "reasoning" and not _led(items, i):
            problems.append(f"input[{i}]: a reasoning item was provided without its"
                            " following item")  # fmt: skip
    if open_ids:
        problems.append(f"function_calls {open_ids!r} have no function_call_output")
    return problems


# ---- drawn transcripts (testing.strategies) ------------------------------------------


def _said(draw: Any, n: str, kit: Any) -> list[dict]:
    """Return the lead items of a turn: maybe reasoning, maybe a message."""
    lead = []
    if draw(kit.st.booleans()):
        lead.append({"type": "reasoning", "id": f"rs_{n}", "summary": [],
                     "encrypted_content": "gAAAA-encrypted"})  # fmt: skip
    if draw(kit.st.booleans()):
        part = {"type": "output_text", "text": draw(kit.text), "annotations": [], "logprobs": []}
        lead.append({"type": "message", "id": f"msg_{n}", "role": "assistant",
                     "status": "completed", "content": [part]})  # fmt: skip
    return lead


def _tool_round(draw: Any, ids: list[str], kit: Any) -> list[dict]:
    """Return a tool round: a turn holding its items (maybe reasoning and a message, the
    function calls), then one message of their function_call_output items."""
    made = [{"type": "function_call", "call_id": i, "name": draw(kit.names),
             "arguments": json.dumps(draw(kit.args))} for i in ids]  # fmt: skip
    outputs = [{"type": "function_call_output", "call_id": i, "output": draw(kit.text)}
               for i in ids]  # fmt: skip
    return [
        {"role": "assistant", "items": [*_said(draw, ids[0], kit), *made]},
        {"role": "tool", "items": outputs},
    ]


def _answer(draw: Any, n: int, kit: Any) -> dict | None:
    """Return, half the time, a final answer of its items (maybe led by reasoning)."""
    if not draw(kit.st.booleans()):
        return None
    part = {"type": "output_text", "text": draw(kit.text), "annotations": [], "logprobs": []}
    said = {"type": "message", "id": f"msg_answer_{n}", "role": "assistant",
            "status": "completed", "content": [part]}  # fmt: skip
    lead = _said(draw, f"answer_{n}", kit)[:1] if draw(kit.st.booleans()) else []
    return {"role": "assistant", "items": [*[i for i in lead if i["type"] == "reasoning"], said]}


FAKE = Fake(
    name="responses",
    path="/responses",
    response=responses_response,
    stream=_served_stream,
    refusal=openai_refusal,  # OpenAI's API: its envelope
    rules=validate_responses_request,
    spec=("openai-responses.json", "CreateResponse"),
    expand=expand,
    keep=keep,
    stream_failed=_failed,
    flourishes=Flourishes(calls=_tool_round, answer=_answer, block="input_text"),
)
