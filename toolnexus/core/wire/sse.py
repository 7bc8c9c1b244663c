"""A pure, incremental Server-Sent Events decoder: bytes in, events out.

    state = start()
    for chunk in network_chunks:
        state, events = feed(state, chunk)
        ...                              # each event is a read-only {"event", "data"}
    events = end(state)                  # the unterminated last event, if any

It follows the WHATWG event-stream rules: lines end in CRLF, CR or LF (a CRLF split
across two chunks counts once); `:` lines are comments (keep-alive pings); `event:` names
the event (default "message"); `data:` lines are joined with "\\n"; `id:`, `retry:` and
unknown fields are ignored; one leading space after the colon is dropped; a blank line
dispatches. Chunks may split anywhere, even inside a multi-byte UTF-8 character: bytes
are decoded only once a whole line has arrived. Unlike a browser, `end` dispatches an
event that has data but no final blank line (some recorded streams end that way), and
an `error:` line, a field the standard does not define, is read as an `error` event
with that data (llama.cpp's server sent its stream errors so until late 2025, where a
browser would drop them and see a complete, empty answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from pyrsistent import PVector, pvector

from ..errors import ProviderError, excerpt
from ..frozen import FrozenMap, known_whole
from ..walk import map_strings
from .inband import envelope, error_fields
from .jsonload import MAX_BYTES, load

__all__ = [
    "SSEState",
    "start",
    "feed",
    "end",
    "decode",
    "stream_error",
    "load_json",
    "whole_characters",
    "surrogate_free",
    "hold_half",
    "MAX_LINE",
]

# The longest line a stream may send: an event's data the JSON decoder could still take.
MAX_LINE = MAX_BYTES + 1024

# Line terminators are ASCII, so they never occur inside a multi-byte UTF-8 sequence:
# splitting bytes on them is safe before decoding.
_EOL = re.compile(r"\r\n|\r|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")


class SSEState(NamedTuple):
    """The decoder state: an immutable value, replaced (never mutated) by `feed`."""

    buffer: tuple[bytes, ...] = ()  # the pieces of the line not yet terminated
    held: int = 0  # their total length (bounded by MAX_LINE)
    skip_lf: bool = False  # the last chunk ended in CR: a leading LF is its CRLF's tail
    event: str = ""  # the `event:` field of the event being built
    data: tuple[str, ...] = ()  # its `data:` lines
    fresh: bool = True  # nothing decoded yet (a leading BOM is dropped)


_BETWEEN = SSEState(fresh=False)  # the state after a whole event, with nothing held


_START = SSEState()  # a value: every stream may start from the same one


def start() -> SSEState:
    """Return the state of a decoder that has seen no bytes."""
    return _START


def _event(name: str, data: tuple[str, ...]) -> Mapping:
    # A read-only map (stdlib): on the hot path a pmap costs as much as the JSON decode.
    return MappingProxyType({"event": name or "message", "data": "\n".join(data)})


def _lines(event: str, data: tuple, lines: list[str], out: list) -> tuple[str, tuple]:
    # Apply complete lines to the event being built; dispatched events go to `out`.
    for line in lines:
        # The hot path: a data line, then the blank line that dispatches it (tested first:
        # the cheaper test, and half the lines of a stream).
        if not line:
            if data:
                out.append(_event(event, data))
            event, data = "", ()
        elif line.startswith("data:"):
            value = line[6:] if line[5:6] == " " else line[5:]
            data = (*data, value) if data else (value,)
        elif line[0] != ":":  # ":" starts a comment: keep-alive pings
            name, colon, value = line.partition(":")
            if name == "event":
                event = value[1:] if value[:1] == " " else value
            elif name == "data":  # "data" alone: an empty data line
                data = (*data, "")
            elif name == "error":  # not an SSE field: llama.cpp's errors until late 2025
                event, data = "error", (*data, value[1:] if value[:1] == " " else value)
            # `id`, `retry` and unknown fields carry nothing a model turn needs.
    return event, data


def _text(raw: bytes, fresh: bool) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text[1:] if fresh and text[:1] == "\ufeff" else text


def _split(text: str) -> list[str]:
    return text.split("\n") if "\r" not in text else _EOL.split(text)


def _decode(raw: bytes, fresh: bool) -> list[str]:
    return _split(_text(raw, fresh))


def _data_events(text: str) -> tuple[Mapping, ...] | None:
    """Return the events of `text` if it is whole events of one `data: ` line each, LF
    ended (what OpenAI-style servers send), else None: what `_lines` makes of it from
    between events, without a pass per line."""
    if text[-2:] != "\n\n" or not text.startswith("data: ") or "\r" in text:
        return None  # (Anthropic's, `event:` first, declined before any split)
    out = []
    for block in text[:-2].split("\n\n"):
        if not block.startswith("data: ") or "\n" in block:
            return None  # other fields, comments, several lines: read line by line
        out.append(MappingProxyType({"event": "message", "data": block[6:]}))
    return tuple(out)


def feed(state: SSEState, chunk: bytes) -> tuple[SSEState, tuple[Mapping, ...]]:
    """Return the new state and the events completed by `chunk`; does not modify `state`.

    >>> s, ev = feed(start(), b'event: ping\\ndata: {"a"')
    >>> ev
    ()
    >>> s, ev = feed(s, b': 1}\\r\\n: keep-alive\\r\\ndata: 2\\r')
    >>> ev
    ()
    >>> s, ev = feed(s, b'\\n\\r\\n')
    >>> [(e["event"], e["data"]) for e in ev]
    [('ping', '{"a": 1}\\n2')]
    """
    if state.skip_lf and chunk[:1] == b"\n":
        chunk = chunk[1:]
        if not chunk:  # that LF alone: skipped, and only that one
            return state._replace(skip_lf=False), ()
    if not chunk:
        return state, ()
    # Search only the new bytes, and keep a line's pieces apart until it ends, so a long
    # line arriving in tiny chunks costs linear time, never quadratic.
    cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
    if cut < 0:  # still inside one line: keep its bytes, decode nothing yet
        held = state.held + len(chunk)
        if held > MAX_LINE:
            raise ProviderError(f"a stream line is over {MAX_LINE:,} bytes: not read further")
        return state._replace(buffer=(*state.buffer, chunk), held=held, skip_lf=False), ()
    whole = not state.buffer and cut == len(chunk) - 1  # the usual chunk: whole lines
    raw = chunk if whole else b"".join((*state.buffer, chunk[: cut + 1]))
    text = _text(raw, state.fresh)
    if whole and not state.event and not state.data:  # from between events
        events = _data_events(text)
        if events is not None:
            return _BETWEEN, events
    # The split leaves "" after the final terminator: drop it, it is not a line.
    lines = _split(text)
    lines.pop()
    out: list = []
    event, data = _lines(state.event, state.data, lines, out)
    rest = b"" if whole else chunk[cut + 1 :]
    # A final CR may be the first half of a CRLF whose LF opens the next chunk.
    ends_cr = not rest and chunk[cut] == 13
    if len(rest) > MAX_LINE:
        raise ProviderError(f"a stream line is over {MAX_LINE:,} bytes: not read further")
    if not rest and not ends_cr and not event and not data:
        return _BETWEEN, tuple(out)  # between events, nothing held: no new state to build
    return SSEState((rest,) if rest else (), len(rest), ends_cr, event, data, False), tuple(out)


def end(state: SSEState) -> tuple[Mapping, ...]:
    """Return the events still held at end of stream: an unterminated last line and event.

    >>> [(e["event"], e["data"]) for e in end(feed(start(), b'data: {"stop": 1}')[0])]
    [('message', '{"stop": 1}')]
    """
    if not state.buffer and not state.data:  # the usual end: between events, nothing held
        return ()
    out: list = []
    lines = _decode(b"".join(state.buffer), state.fresh) if state.buffer else []
    event, data = _lines(state.event, state.data, lines, out)
    if data:
        out.append(_event(event, data))
    return tuple(out)


def decode(raw: bytes) -> tuple[Mapping, ...]:
    """Return every event of a whole stream (a convenience over `feed` and `end`)."""
    state, events = feed(start(), raw)
    return events + end(state)


def stream_error(payload: Any) -> ProviderError:
    """Return the ProviderError for an in-stream error event (its message, the data as body).

    `payload` is the event's data: JSON text or an already decoded object, shaped
    {"error": {"message", "type"?}} (openai-compatible, anthropic) or {"message"} (see
    core.wire.inband); the provider's type and code are kept, and a status read from them.
    The codec knows no secrets: the driver passes the error through
    `errors.scrub_error` before it leaves (an error event may echo the key).

    >>> e = stream_error('{"type":"error","error":{"type":"overloaded_error","message":"Busy"}}')
    >>> str(e), e.status
    ('Busy', 529)
    """
    if isinstance(payload, str):
        text = payload
        try:
            obj = load(payload)
        except ValueError:
            obj = None
    else:
        obj = payload
        try:
            text = json.dumps(payload, default=str)
        except (ValueError, RecursionError):  # a cyclic or absurd object: say so, briefly
            text = repr(type(payload))
    err = envelope(obj) if isinstance(obj, Mapping) else None
    if err is None:  # an `event: error` whose data is no envelope: {"message"} or text
        err = obj if isinstance(obj, Mapping) else {"message": obj}
    message = err.get("message")
    if not isinstance(message, str) or not message:
        message = f"error event in stream: {excerpt(text, limit=200)}"
    return ProviderError(excerpt(message, limit=1000), body=excerpt(text), **error_fields(err))


def load_json(data: str) -> dict:
    """Return the JSON object of an event's data (bounded); anything else is a ProviderError."""
    try:
        obj = load(data)
    except ValueError as e:
        raise ProviderError(
            f"unreadable stream event ({e}): {excerpt(data, limit=200)}", body=excerpt(data)
        ) from None
    if type(obj) is not dict:  # json.loads makes plain dicts; skip the slow ABC check
        raise ProviderError(
            f"unreadable stream event: {excerpt(data, limit=200)}", body=excerpt(data)
        )
    return obj


def _whole(text: str, where: str) -> str:
    """Return `text` with UTF-16 surrogate pairs joined (halves that arrived in two JSON
    escapes, e.g. two stream deltas); a half with no partner is a ProviderError."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    lone = _SURROGATE.search(joined)
    if lone is not None:
        raise ProviderError(
            f"the provider sent half of a character in {where} (a lone UTF-16 surrogate "
            f"{lone.group()!r} at {lone.start()}): not text any store could keep",
            body=excerpt(joined.encode("utf-8", "backslashreplace").decode(), limit=200),
        )
    return joined


_FROZEN, _PVECTOR = FrozenMap, type(pvector())
# Leaves a decoded value holds besides strings: nothing to look into.
_LEAVES = frozenset({type(None), bool, int, float})


def _has_surrogate(value: Any) -> bool:
    # Whether any string in a decoded value holds a UTF-16 surrogate: an allocation-free
    # walk that dispatches on exact types first (a turn is pmaps, pvectors and strings;
    # ABC checks cost more than the test itself), the ABCs only for other containers.
    kind = type(value)
    if kind is str:
        return not value.isascii() and _SURROGATE.search(value) is not None
    if kind is _FROZEN:
        items = value.values()
    elif kind is _PVECTOR or kind is list or kind is tuple:
        items = value
    elif kind in _LEAVES:
        return False
    elif isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, (list, tuple, PVector)):
        items = value
    else:
        return False
    for item in items:
        kind = type(item)
        if kind is str:
            if not item.isascii() and _SURROGATE.search(item) is not None:
                return True
        elif kind not in _LEAVES and _has_surrogate(item):
            return True
    return False


def whole_characters(value: Any, where: str = "its answer") -> Any:
    """Return `value` (a decoded turn: maps, sequences, strings) with every string's split
    surrogate pairs joined (the same value when there are none); a lone surrogate is a
    ProviderError. Streams split an emoji into two escapes "\\ud83d" + "\\ude00".

    >>> whole_characters({"text": ["\\ud83d" + "\\ude00"]})["text"][0] == "\\U0001f600"
    True
    """
    # The usual case: a turn vouched for by the text it was decoded from (no walk), or
    # one walk that finds nothing and builds nothing.
    if known_whole(value) or not _has_surrogate(value):
        return value
    return map_strings(value, lambda text: _whole(text, where))


def surrogate_free(text: str | bytes) -> bool:
    """Return whether a JSON text is sure to decode (`jsonload.load`: UTF-8, strictly) to
    strings that hold no UTF-16 surrogate, also where one of them is JSON decoded in turn.

    Only a "\\u" escape makes a surrogate (strict UTF-8 never yields one), and a decoded
    string holds "\\u" only where its text had a "\\u" too ("\\\\u", "\\u005cu"...): so
    a text without one holds none at any depth. One C-speed search; a text with any
    "\\u" escape (rare from the providers) is left to `whole_characters`' walk.

    >>> surrogate_free(b'{"text": "caf\\xc3\\xa9"}'), surrogate_free('{"text": "\\\\ud83d"}')
    (True, False)
    """
    return ("\\u" if type(text) is str else b"\\u") not in text


def hold_half(held: str, delta: str) -> tuple[str, str]:
    """Return (the text to show now, the half character to hold) for a streamed text
    delta after `held`: a delta ending in the first half of a surrogate pair keeps it
    back until its other half arrives, so no consumer is handed half a character.

    >>> hold_half("", "smile \\ud83d")
    ('smile ', '\\ud83d')
    >>> hold_half("\\ud83d", "\\ude00!") == ("\\U0001f600!", "")
    True
    """
    text, held = held + delta, ""
    if text and "\ud800" <= text[-1] <= "\udbff":
        text, held = text[:-1], text[-1]
    if not text.isascii() and _SURROGATE.search(text) is not None:  # a pair: joined
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text, held
