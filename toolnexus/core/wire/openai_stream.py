"""Streaming of the chat completions dialect: SSE events -> deltas -> the chat
completions response a stream amounts to (pure). `openai` (the dialect's codec) exposes
these as its own and turns the response into the normalized turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from types import MappingProxyType
from typing import Any, NamedTuple

from pyrsistent import PVector, pvector

from .common import MALFORMED, malformed, merge_extra, text_of
from .openai_read import READ_CALL, args_text, array, extra_fields, mapping
from .sse import load_json, stream_error

__all__ = [
    "stream_body",
    "OpenAIStream",
    "StreamCall",
    "stream_start",
    "stream_event",
    "stream_response",
]


def stream_body(body: Mapping) -> dict:
    """Return a copy of a request body that asks for a stream ending in a usage chunk.

    >>> stream_body({"model": "m"})
    {'model': 'm', 'stream': True, 'stream_options': {'include_usage': True}}
    """
    options = {**(body.get("stream_options") or {}), "include_usage": True}
    return {**body, "stream": True, "stream_options": options}


class StreamCall(NamedTuple):
    """One tool call being assembled from a stream's fragments."""

    index: int
    id: str | None
    name: str
    args: PVector  # the argument text fragments, joined at the end
    extra: Mapping | None = None  # fields of the call the loop does not read (extra_content)
    wire: int | None = None  # the index the server sent (may repeat: see _position)


class OpenAIStream(NamedTuple):
    """The accumulator of a chat completions stream: an immutable value (see stream_event).

    `done` turns True once `data: [DONE]` arrived; a stream that ends without it and
    without a `finish_reason` was cut short (`stream_turn` raises). Some compatible
    servers send a finish_reason and no [DONE]: that stream is complete.
    """

    text: PVector = pvector()  # content fragments
    refusal: PVector = pvector()
    calls: PVector = pvector()  # StreamCall values, in first-seen order
    usage: Mapping | None = None  # the chunk with a non-null usage (include_usage)
    finish: str | None = None  # the last non-null finish_reason
    model: str | None = None
    done: bool = False
    extra: Mapping | None = None  # other delta fields, accumulated (reasoning_content, ...)


_START = OpenAIStream()  # a value: every stream may start from the same one
# Builds an accumulator or call from its fields without the NamedTuple's Python-level
# __new__ (what its _make does): one frame less per event on the hot path.
_new = tuple.__new__


def stream_start() -> OpenAIStream:
    """Return the accumulator of a stream that has delivered nothing yet."""
    return _START


def _delta(**fields: Any) -> Mapping:
    # A read-only map: built once per event on the hot path, where a pmap costs as much
    # as decoding the event's JSON.
    return MappingProxyType(fields)


def _position(calls: PVector, fragment: Mapping) -> tuple[int, int]:
    """Return (index, position in `calls` or -1) of a tool call fragment."""
    index = fragment.get("index")
    fid = fragment.get("id")
    if index is None:
        # Every OpenAI fragment has an index; some compatible servers omit it and send
        # each call whole, so a fragment with a new id opens the next index.
        known = [p for p, c in enumerate(calls) if fid and c.id == fid]
        if known:
            return calls[known[0]].index, known[0]
        if fid or not calls:
            return (max(c.index for c in calls) + 1 if calls else 0), -1
        return calls[-1].index, len(calls) - 1
    index = int(index)
    # The latest call sent under that index (a plain loop: a generator costs more than
    # the few calls a turn holds); the common case is fragments of the latest call.
    pos = -1
    for p in range(len(calls) - 1, -1, -1):
        if calls[p].wire == index:
            pos = p
            break
    if pos >= 0 and fid and calls[pos].id and calls[pos].id != fid:
        # A repeated index with a new id is another call (Ollama streams parallel calls
        # all with index 0): it gets the next index of ours.
        return max(c.index for c in calls) + 1, -1
    if pos < 0 and any(c.index == index for c in calls):  # a new call: once per call
        return max(c.index for c in calls) + 1, -1
    return (calls[pos].index if pos >= 0 else index), pos


def _add_fragment(calls: PVector, fragment: Mapping, deltas: list) -> PVector:
    index, pos = _position(calls, fragment)
    fn = fragment.get("function") or {}
    args = fn.get("arguments")
    piece = (args if type(args) is str else args_text(args)) if args else None
    extra = None if fragment.keys() <= READ_CALL else (extra_fields(fragment, READ_CALL) or None)
    if pos < 0:
        wire = fragment.get("index")
        fid, name = fragment.get("id"), fn.get("name") or ""
        call = (index, fid, name, pvector(() if piece is None else (piece,)), extra,
                None if wire is None else int(wire))  # fmt: skip
        deltas.append(MappingProxyType({"type": "tool_call_start", "index": index, "id": fid,
                                        "name": name}))  # fmt: skip
        return calls.append(_new(StreamCall, call))
    # One new call from the old one's fields (a _replace per field costs a frame each:
    # this runs for every argument fragment of a streamed call).
    at, fid, name, pieces, was, wire = calls[pos]
    if extra:
        was = merge_extra(was, extra, concat=False)
    if piece is not None:
        pieces = pieces.append(piece)
    if not fid and fragment.get("id"):
        fid = fragment["id"]
    if not name and fn.get("name"):
        name = fn["name"]
    return calls.set(pos, _new(StreamCall, (at, fid, name, pieces, was, wire)))


def stream_event(acc: OpenAIStream, event: Mapping) -> tuple[OpenAIStream, tuple[Mapping, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries (read-only maps).

    Deltas: {"type": "text", "delta"}, {"type": "refusal", "delta"} and
    {"type": "tool_call_start", "index", "id", "name"}. An `error` event, or a chunk
    holding "error", raises ProviderError with the provider's message; anything
    malformed is a ProviderError too.
    """
    try:
        data = event["data"]
        if event["event"] == "error":
            raise stream_error(data)
        if data[:1] != "{":
            if data.strip() == "[DONE]":  # a chunk is an object: "{..."
                return _new(OpenAIStream, (*acc[:6], True, acc[7])), ()  # done=True
            if not data.strip():  # an event with no data carries nothing: skipped
                return acc, ()
        chunk = load_json(data)
        # An error chunk ({"error": {...}}, vLLM's {"object": "error", ...}) ends the turn:
        # inband.envelope's test, inline (plain dict lookups: this runs for every chunk).
        if chunk.get("error") is not None or "error" in (chunk.get("object"), chunk.get("type")):
            raise stream_error(chunk)
        text, refusal, calls, usage, finish, model, done, extra = acc
        if model is None and type(chunk.get("model")) is str:
            model = chunk["model"]
        given = chunk.get("usage")
        if given is not None and (type(given) is dict or isinstance(given, Mapping)):
            usage = given  # the include_usage chunk (its choices may be empty)
        deltas: list = []
        # The shape checks run as exact type tests first (what json.loads makes), the
        # helpers only for anything else: they name what is wrong (per chunk, per choice).
        choices = chunk.get("choices")
        for choice in choices if type(choices) is list else array(choices, "choices"):
            if type(choice) is not dict:
                choice = mapping(choice, "choice")
            if choice.get("index", 0) != 0:  # parse_response reads choices[0] only
                continue
            delta = choice.get("delta")
            if type(delta) is not dict:
                delta = mapping(delta, "delta")
            content = delta.get("content")
            if content:
                # a list of parts joins into text
                piece = content if type(content) is str else text_of(content, "delta.content")
                if piece:
                    text = text.append(piece)
                    deltas.append(MappingProxyType({"type": "text", "delta": piece}))
            if delta.get("refusal"):
                piece = text_of(delta["refusal"], "delta.refusal")
                refusal = refusal.append(piece)
                deltas.append(MappingProxyType({"type": "refusal", "delta": piece}))
            fragments = delta.get("tool_calls")
            if fragments is not None:
                for fragment in array(fragments, "delta.tool_calls"):
                    calls = _add_fragment(calls, mapping(fragment, "tool call fragment"), deltas)
            if not delta.keys() <= _READ_DELTA:  # inline: this runs for every chunk
                more = extra_fields(delta, _READ_DELTA)
                if more:
                    extra = _more(extra, more, deltas)
            if isinstance(choice.get("finish_reason"), str):  # a later null never resets it
                finish = choice["finish_reason"]
        acc = _new(OpenAIStream, (text, refusal, calls, usage, finish, model, done, extra))
        return acc, (tuple(deltas) if deltas else ())
    except MALFORMED as e:
        raise malformed(e, "stream event") from None


_READ_DELTA = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
# Delta fields that carry a model's reasoning as text: shown as "thinking" deltas.
_REASONING = ("reasoning_content", "reasoning")


def _more(extra: Mapping | None, more: Mapping, deltas: list) -> Mapping:
    """Return the accumulated extra fields after a delta's (reasoning shown as thinking)."""
    for key in _REASONING:
        piece = more.get(key)
        if isinstance(piece, str) and piece:
            deltas.append(_delta(type="thinking", delta=piece))
    out = dict(extra) if extra else {}
    for key, value in more.items():  # a top-level string field arrives in pieces
        out[key] = merge_extra(out.get(key), value)
    return out


_INDEX = itemgetter(0)  # a StreamCall's index (a C key function: no frame per call)


def stream_response(acc: OpenAIStream) -> dict:
    """Return the chat completions response a stream amounts to (what parse_response reads)."""
    calls = [
        {
            **(c.extra or {}),
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": "".join(c.args)},
        }
        for c in sorted(acc.calls, key=_INDEX)
    ]
    message: dict = {**(acc.extra or {}), "role": "assistant",
                     "content": "".join(acc.text) or None}  # fmt: skip
    if calls:
        message["tool_calls"] = calls
    if acc.refusal:
        message["refusal"] = "".join(acc.refusal)
    return {
        "model": acc.model,
        "choices": [{"index": 0, "message": message, "finish_reason": acc.finish}],
        "usage": acc.usage,
    }
