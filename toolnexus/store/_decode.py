"""Reading message rows, pure: one row (`read_message_row`), every row of a
transcript in one pass of json's C decoder (`read_rows_at_once`), or every row checked
and its plain text messages left to build when read (`read_rows_lazily`, a RowVector:
what a cold read returns).

Rule 1: imports core/ only; no I/O.

A cold load (a conversation this process never saw) decodes every row. Row by row, that
is a call of the bounded loader, a check and a freeze per message: several times what
encoding the history costs. Here the rows are joined into one JSON array and decoded
at once, every object made a FrozenMap by the decoder itself; only the messages whose
rows hold an array are walked again (their lists made pvectors). Each message keeps its
row's text as its JSON (`keep_json`): the row is exactly what `message_json` would
write for it (compact, its keys in its order), so the next request reuses it instead
of encoding the message again.

Anything unusual (a row that is not one message, may nest too deep, or mixes str and
bytes) returns None: the caller reads row by row, which names the corrupt row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import compress, repeat
from operator import add, contains, le, methodcaller
from typing import Any

from pyrsistent import pvector

from ..core.frozen import FrozenMap, keep_json, keep_jsons
from ..core.rowvector import RowVector
from ..core.transcript import check_message
from ..core.wire.jsonload import MAX_BYTES, MAX_DEPTH, load

__all__ = ["READERS", "read_message_row", "read_rows_at_once", "read_rows_lazily"]


def _freeze_json(value: Any) -> Any:
    """Return parsed JSON as FrozenMaps and pvectors (faster than a generic freeze)."""
    kind = type(value)
    if kind is dict:
        return FrozenMap({k: _freeze_json(v) for k, v in value.items()})
    if kind is list:
        return pvector([_freeze_json(v) for v in value])
    return value


def read_message_row(text: str | bytes) -> FrozenMap:
    """Return the message of one row (format version 1), keeping the row as its JSON;
    ValueError when the row is not one (corrupt)."""
    message = load(text)  # bounded: a row nested 100,000 deep is only corrupt
    if type(message) is not dict:
        raise ValueError(f"not a message (a map with a string 'role'): {message!r:.100}")
    check_message(message)  # a TranscriptFormatError is a ValueError: the row is corrupt
    frozen = _freeze_json(message)
    keep_json(frozen, text.encode("utf-8") if type(text) is str else bytes(text))
    return frozen


# Per format version, how to read one message row; older versions get a reader here.
READERS = {1: read_message_row}


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Objects become FrozenMaps in the C decoder itself (a type is the cheapest hook there is).
_DECODER = json.JSONDecoder(object_hook=FrozenMap, parse_constant=_not_json)


def _joined(texts: Sequence) -> tuple[type, str | bytes] | None:
    """Return the rows' type and their JSON array text, or None (not all str or bytes).

    str rows need no check of their own: str.join refuses anything else. bytes.join
    takes any buffer, so bytes rows are checked (a bytearray would be kept as a text).
    """
    kind = type(texts[0])
    if kind is bytes:
        if not all(map(bytes.__instancecheck__, texts)):
            return None
        return kind, b"[%s]" % b",".join(texts)
    if kind is not str:
        return None
    try:
        return kind, f"[{','.join(texts)}]"  # one C format, not "[" + ... + "]": no copies
    except TypeError:
        return None


def _shallow(texts: Sequence, kind: type) -> bool:
    """Whether no row can nest deeper than MAX_DEPTH (at C speed): a row that could holds
    MAX_DEPTH opening brackets, so is twice as long at least; only those are counted."""
    long = list(compress(texts, map(le, repeat(2 * MAX_DEPTH), map(len, texts))))
    if not long:
        return True
    curly, square = ("{", "[") if kind is str else (b"{", b"[")
    opens = map(add, map(methodcaller("count", curly), long),
                map(methodcaller("count", square), long))  # fmt: skip
    return max(opens) < MAX_DEPTH  # the array around them adds one level


def _frozen_lists(value: Any) -> Any:
    """Return a decoded value (objects already FrozenMaps) with every list a pvector."""
    kind = type(value)
    if kind is list:
        return pvector([_frozen_lists(v) for v in value])
    if kind is FrozenMap and any(type(v) in (list, FrozenMap) for v in value.values()):
        return FrozenMap({k: _frozen_lists(v) for k, v in value.items()})
    return value


def read_rows_at_once(texts: Sequence[str | bytes], encoded: Sequence | None = None) -> list | None:
    """Return the messages of message rows (JSON texts) decoded at once, each keeping its
    row's text as its JSON; None when the rows need reading one by one. `encoded`: str
    rows' UTF-8 bytes, when the caller has them (they came so): kept, not made again."""
    if not texts:
        return []
    got = _joined(texts)
    if got is None:
        return None
    kind, joined = got
    if len(joined) > MAX_BYTES and max(map(len, texts)) > MAX_BYTES:  # no row is longer
        return None
    if not _shallow(texts, kind):
        return None
    try:
        out = _DECODER.decode(joined if kind is str else joined.decode("utf-8"))
    except (ValueError, TypeError, RecursionError):
        return None
    if type(out) is not list or len(out) != len(texts):
        return None  # a row that is not one value
    # A message: a map with a string role, and tool calls (if any) a list (or null).
    # Checked at C speed over every message (dict.get through map: no Python frame per
    # message; it refuses what is not a map); only those whose row holds an array are
    # walked again. Every object the decoder made is a FrozenMap.
    try:
        if not all(map(str.__instancecheck__, map(_get, out, repeat("role")))):
            return None
    except TypeError:  # a row that is not an object
        return None
    if not set(map(type, map(_get, out, repeat("tool_calls")))) <= _CALLS:
        return None
    # bytes' `in` tries the needle as an int first (an exception made and dropped per
    # row): count, at C speed too
    arrays = map(contains, texts, repeat("[")) if kind is str else map(_count_arrays, texts)
    for i in compress(range(len(out)), arrays):
        out[i] = _frozen_lists(out[i])
    raw = texts if kind is bytes else map(str.encode, texts) if encoded is None else encoded
    keep_jsons(out, raw)
    return out


_get = dict.get
_count_arrays = methodcaller("count", b"[")
_CALLS = frozenset({list, type(None)})  # what json makes of a list, or null


def read_rows_lazily(
    texts: Sequence[str] | None, encoded: Sequence[bytes] | None = None, size: int | None = None
) -> Any:
    """Return the transcript of message rows as a `RowVector`: every row checked now, the
    plain text ones built when first read; None when the rows need reading one by one
    (as `read_rows_at_once`). The rows as str `texts`, or as their UTF-8 `encoded` (then
    `texts`, if given, are what they encode); `size`: their bytes, if counted."""
    if encoded is None:
        if not texts or not all(map(str.__instancecheck__, texts)):
            return None
        encoded = list(map(str.encode, texts))
    if not encoded:
        return None
    # What the bounded loader refuses, named there (no row is longer than all of them).
    if (size is None or size > MAX_BYTES) and max(map(len, encoded)) > MAX_BYTES:
        return None
    return RowVector.of(encoded, read_rows_at_once, texts)
