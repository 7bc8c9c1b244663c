"""Streaming of the Responses dialect: SSE events -> deltas -> the normalized turn (pure).

`responses` (the dialect's codec) exposes these as its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from pyrsistent import pvector

from ..frozen import FrozenMap
from .common import MALFORMED, MalformedResponse, malformed, name_text, stream_cut
from .sse import load_json, stream_error

__all__ = ["ResponsesStream", "stream_body", "stream_start", "stream_event", "final_response"]


# ---- streaming -------------------------------------------------------------------------


def stream_body(body: Mapping) -> dict:
    """Return a copy of a request body that asks for a stream.

    >>> stream_body({"model": "m"})
    {'model': 'm', 'stream': True}
    """
    return {**body, "stream": True}


class ResponsesStream(NamedTuple):
    """The accumulator of a Responses stream: an immutable value (see stream_event).

    `items` holds the output items by output_index (as added, then as done); `args`
    the argument fragments of function calls not done yet; `final` the response of the
    closing event (response.completed or response.incomplete): without it the stream was
    cut short (`final_response` raises).
    """

    items: FrozenMap = FrozenMap()
    args: FrozenMap = FrozenMap()  # output_index -> pvector of argument fragments
    text: FrozenMap = FrozenMap()  # output_index -> pvector of text fragments
    final: Mapping | None = None
    model: str | None = None


def stream_start() -> ResponsesStream:
    """Return the accumulator of a stream that has delivered nothing yet."""
    return ResponsesStream()


def _delta(**fields: Any) -> Mapping:
    return MappingProxyType(fields)


def _index(acc: ResponsesStream, data: Mapping, adding: bool = False, done: bool = False) -> int:
    """Return the output index an event is about. Some compatible servers leave
    `output_index` out: an added item then takes the next index, and a delta the item its
    `item_id` (or `call_id`) names, else the latest item."""
    index = data.get("output_index")
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    if adding:
        item = data.get("item") if isinstance(data.get("item"), Mapping) else {}
        if done:  # the item added before it
            known = _named(acc, item)
            same = [i for i, x in acc.items.items() if x.get("type") == item.get("type")]
            known = known if known is not None else (max(same) if same else None)
            if known is not None:
                return known
        return max(acc.items) + 1 if acc.items else 0
    known = _named(acc, data)
    return known if known is not None else (max(acc.items) if acc.items else 0)


def _named(acc: ResponsesStream, data: Mapping) -> int | None:
    ids = {data.get(k) for k in ("item_id", "id", "call_id")} - {None}
    hits = [i for i, item in acc.items.items() if {item.get("id"), item.get("call_id")} & ids]
    return hits[0] if hits else None


def _append(table: FrozenMap, index: int, piece: str) -> FrozenMap:
    return table.set(index, table.get(index, pvector()).append(piece))


def stream_event(
    acc: ResponsesStream, event: Mapping
) -> tuple[ResponsesStream, tuple[Mapping, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries.

    Deltas: {"type": "text"|"refusal"|"thinking", "delta"} and {"type":
    "tool_call_start", "index", "id", "name"}. `error` and `response.failed` raise a
    ProviderError with the provider's message; anything malformed is one too.
    """
    try:
        return _stream_event(acc, event)
    except MALFORMED as e:
        raise malformed(e, "stream event") from None


_THINKING = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


def _stream_event(acc: ResponsesStream, event: Mapping) -> tuple[ResponsesStream, tuple]:
    raw = event["data"]
    if raw == "[DONE]" or raw.strip() == "[DONE]":
        return acc, ()
    data = load_json(raw)
    kind = data.get("type") or event.get("event")
    if kind == "error" or event.get("event") == "error":
        raise stream_error(data)
    if kind == "response.failed":
        raise stream_error(data.get("response") or data)
    if kind in ("response.completed", "response.incomplete"):
        response = data.get("response", {})  # some compatible servers send none
        if not isinstance(response, Mapping):
            raise MalformedResponse(f"{kind} holds no response object")
        return acc._replace(final=response), ()
    if kind in ("response.created", "response.in_progress"):
        response = data.get("response") or {}
        model = response.get("model") if isinstance(response, Mapping) else None
        return acc._replace(model=model if isinstance(model, str) else acc.model), ()
    if kind == "response.output_text.delta":
        piece = data.get("delta")
        if not isinstance(piece, str) or not piece:
            return acc, ()
        return acc._replace(text=_append(acc.text, _index(acc, data), piece)), (
            _delta(type="text", delta=piece),
        )
    if kind == "response.refusal.delta" and isinstance(data.get("delta"), str):
        return acc, (_delta(type="refusal", delta=data["delta"]),)
    if kind in _THINKING and isinstance(data.get("delta"), str):
        return acc, (_delta(type="thinking", delta=data["delta"]),)
    if kind == "response.function_call_arguments.delta" and isinstance(data.get("delta"), str):
        return acc._replace(args=_append(acc.args, _index(acc, data), data["delta"])), ()
    if kind in ("response.output_item.added", "response.output_item.done"):
        item = data.get("item")
        if not isinstance(item, Mapping):
            raise MalformedResponse(f"{kind} holds no item")
        index = _index(acc, data, adding=True, done=kind.endswith("done"))
        deltas: tuple = ()
        if kind.endswith("added") and item.get("type") == "function_call":
            deltas = (_delta(type="tool_call_start", index=index, id=item.get("call_id"),
                             name=name_text(item.get("name"))),)  # fmt: skip
        if kind.endswith("done"):  # the done item is the whole one; keep what it leaves out
            item = {**acc.items.get(index, {}), **item}
        return acc._replace(items=acc.items.set(index, item)), deltas
    return acc, ()  # content_part.added, output_text.done, ...: the items say it all


def _assembled(acc: ResponsesStream) -> list:
    """Return the output items the events gave (an item not done: its fragments joined)."""
    out = []
    for index in sorted({*acc.items, *acc.text}):  # text with no item: a message of it
        item = acc.items.get(index) or {"type": "message", "role": "assistant"}
        if item.get("type") == "function_call" and index in acc.args and not item.get("arguments"):
            item = {**item, "arguments": "".join(acc.args[index])}
        if item.get("type") == "message" and index in acc.text and not item.get("content"):
            text = "".join(acc.text[index])
            item = {**item, "content": [{"type": "output_text", "text": text, "annotations": []}]}
        out.append(item)
    return out


def final_response(acc: ResponsesStream) -> dict:
    """Return the response a finished stream stands for: the closing event's response
    (its output, else the items the events assembled), for the codec's parse_response.

    A stream that ended without response.completed or response.incomplete (cut short,
    or a 200 with no event) is a ProviderError marked `network` (see common.stream_cut).
    """
    if acc.final is None:
        raise stream_cut("no response.completed or response.incomplete")
    response = dict(acc.final)
    if not response.get("output"):
        response["output"] = _assembled(acc)
    if not response.get("model") and acc.model:
        response["model"] = acc.model
    return response
