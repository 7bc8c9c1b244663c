"""Streaming of the Anthropic messages dialect: SSE events -> deltas -> the messages
response a stream amounts to (pure). `anthropic` (the dialect's codec) exposes these as
its own and turns the response into the normalized turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from pyrsistent import PVector, pvector

from .common import MALFORMED, MalformedResponse, malformed
from .jsonload import load
from .sse import load_json, stream_error

__all__ = ["stream_body", "AnthropicStream", "stream_start", "stream_event", "stream_response"]


def stream_body(body: Mapping) -> dict:
    """Return a copy of a request body that asks for a stream.

    >>> stream_body({"model": "m"})
    {'model': 'm', 'stream': True}
    """
    return {**body, "stream": True}


class AnthropicStream(NamedTuple):
    """The accumulator of a messages stream: an immutable value (see stream_event).

    `log` holds (index, field, value) in arrival order: field "start" with the
    content_block_start block, or "text" / "thinking" / "signature" / "input" /
    "citations" with a fragment. Appending is all an event costs; `stream_turn` folds
    the log once. Usage counts are cumulative: the latest non-null input/output_tokens
    win (output from the last message_delta). `done` turns True on message_stop.
    """

    log: PVector = pvector()
    model: str | None = None
    stop_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    done: bool = False
    block: tuple = (None, None)  # (index, type) of the latest started block
    cache_read: int | None = None  # cache_read_input_tokens
    cache_write: int | None = None  # cache_creation_input_tokens


def stream_start() -> AnthropicStream:
    """Return the accumulator of a stream that has delivered nothing yet."""
    return AnthropicStream()


# delta type -> (its payload key, the block field it extends)
_DELTA_FIELD = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
    "input_json_delta": ("partial_json", "input"),
    "citations_delta": ("citation", "citations"),
}


def _delta(**fields: Any) -> Mapping:
    # A read-only map: built once per event on the hot path, where a pmap costs as much
    # as decoding the event's JSON.
    return MappingProxyType(fields)


def _block_type(acc: AnthropicStream, index: int) -> Any:
    if acc.block[0] == index:  # the common case: a delta of the latest block
        return acc.block[1]
    starts = (v for i, f, v in acc.log if i == index and f == "start")
    return next(starts, {}).get("type")


def _on_delta(acc: AnthropicStream, obj: Mapping) -> tuple[AnthropicStream, tuple]:
    delta = obj.get("delta") or {}
    kind = delta.get("type")
    spec = _DELTA_FIELD.get(kind) if isinstance(kind, str) else None
    if spec is None:
        return acc, ()  # a delta type this version does not know: nothing to keep
    index = _index(obj)
    field_ = spec[1]
    piece = delta.get(spec[0])
    if field_ != "citations" and not isinstance(piece, str):
        piece = ""
    acc = acc._replace(log=acc.log.append((index, field_, piece)))
    if piece and field_ == "text" and _block_type(acc, index) in ("text", None):
        return acc, (_delta(type="text", delta=piece),)  # thinking never counts as text
    if piece and field_ == "thinking":
        return acc, (_delta(type="thinking", delta=piece),)
    return acc, ()


def _on_block_start(acc: AnthropicStream, obj: Mapping) -> tuple[AnthropicStream, tuple]:
    block = obj.get("content_block") or {}
    if not isinstance(block, Mapping):
        raise MalformedResponse("content_block is not an object")
    index, kind = _index(obj), block.get("type")
    acc = acc._replace(log=acc.log.append((index, "start", block)), block=(index, kind))
    if kind == "tool_use":
        start = _delta(
            type="tool_call_start", index=index, id=block.get("id"), name=block.get("name", "")
        )
        return acc, (start,)
    if kind == "text" and block.get("text"):
        return acc, (_delta(type="text", delta=block["text"]),)
    return acc, ()


_USAGE_FIELDS = {"input_tokens": "input_tokens", "output_tokens": "output_tokens",
                 "cache_read_input_tokens": "cache_read",
                 "cache_creation_input_tokens": "cache_write"}  # fmt: skip


def _usage_changes(u: Any) -> dict:
    if not isinstance(u, Mapping):
        return {}
    return {f: u[k] for k, f in _USAGE_FIELDS.items() if u.get(k) is not None}


def stream_event(
    acc: AnthropicStream, event: Mapping
) -> tuple[AnthropicStream, tuple[Mapping, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries (read-only maps).

    Deltas: {"type": "text", "delta"} (text blocks only), {"type": "thinking", "delta"}
    and {"type": "tool_call_start", "index", "id", "name"}. An `error` event raises
    ProviderError with the provider's message; pings and unknown events change nothing;
    anything malformed is a ProviderError too.
    """
    try:
        return _stream_event(acc, event)
    except MALFORMED as e:
        raise malformed(e, "stream event") from None


def _index(obj: Mapping) -> int:
    index = obj.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int):
        raise MalformedResponse("a stream event's index is not an integer")
    return index


def _stream_event(
    acc: AnthropicStream, event: Mapping
) -> tuple[AnthropicStream, tuple[Mapping, ...]]:
    name, data = event["event"], event["data"]
    if name == "error":
        raise stream_error(data)
    if not data.strip() or not name.startswith(("message", "content_block_")):  # as the SDK
        return acc, ()  # skips them: events it does not read (ping, new kinds), no data
    obj = load_json(data)
    kind = obj.get("type") or name
    if kind == "content_block_delta":
        return _on_delta(acc, obj)
    if kind == "content_block_start":
        return _on_block_start(acc, obj)
    if kind == "message_start":
        message = obj.get("message") or {}
        changes = _usage_changes(message.get("usage"))
        model, stop = message.get("model"), message.get("stop_reason")
        acc = acc._replace(
            model=model if isinstance(model, str) else None,
            stop_reason=stop if isinstance(stop, str) else None,
            **changes,
        )
    elif kind == "message_delta":
        changes = _usage_changes(obj.get("usage"))
        stop = (obj.get("delta") or {}).get("stop_reason")
        if isinstance(stop, str) and stop:
            changes["stop_reason"] = stop
        acc = acc._replace(**changes) if changes else acc
    elif kind == "message_stop":
        acc = acc._replace(done=True)
    elif kind == "error":
        raise stream_error(obj)
    return acc, ()


def _input_of(raw: str, start: Any) -> tuple[Any, str | None]:
    """Return (input for the message, raw text when it is not a JSON object)."""
    if not raw.strip():
        return (start if isinstance(start, Mapping) else {}), None
    try:
        value = load(raw)
    except ValueError:
        value = None
    # Cut off at max_tokens: the message keeps a valid empty input (the API requires an
    # object) while the call carries the raw text, which the loop reports as invalid.
    return (value, None) if isinstance(value, Mapping) else ({}, raw)


# The block type to assume for fragments whose content_block_start never came.
_GUESSED_TYPE = {"text": "text", "thinking": "thinking", "signature": "thinking",
                 "input": "tool_use", "citations": "text"}  # fmt: skip


def _blocks(log: PVector) -> list[tuple[dict, str | None]]:
    """Fold the log into [(content block, raw input text if not a JSON object)], by index."""
    starts: dict = {}
    parts: dict = {}
    for index, field_, value in log:
        if field_ == "start":
            starts[index] = value
        else:
            parts.setdefault(index, {}).setdefault(field_, []).append(value)
            starts.setdefault(index, {"type": _GUESSED_TYPE[field_]})
    out = []
    for index in sorted(starts):
        block, got, bad = dict(starts[index]), parts.get(index, {}), None
        for field_ in ("text", "thinking", "signature"):
            if field_ in got:
                block[field_] = (block.get(field_) or "") + "".join(got[field_])
        if "citations" in got:
            block["citations"] = [*(block.get("citations") or ()), *got["citations"]]
        if "input" in got:
            block["input"], bad = _input_of("".join(got["input"]), block.get("input"))
        out.append((block, bad))
    return out


def stream_response(acc: AnthropicStream) -> tuple[dict, list]:
    """Return (the messages response a stream amounts to, raw arguments per tool_use block).

    The second item holds, for each tool_use block in order, its raw input text when
    that text is not a JSON object (else None).
    """
    built = _blocks(acc.log)
    response = {
        "model": acc.model,
        "content": [b for b, _ in built],
        "stop_reason": acc.stop_reason,
        "usage": {"input_tokens": acc.input_tokens, "output_tokens": acc.output_tokens,
                  "cache_read_input_tokens": acc.cache_read,
                  "cache_creation_input_tokens": acc.cache_write},
    }  # fmt: skip
    return response, [bad for b, bad in built if b.get("type") == "tool_use"]
