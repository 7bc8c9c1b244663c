"""A transcript read from a store's rows, its plain text messages decoded when first read.

Rule 1: pure; imports json's string scanner, pyrsistent and frozen.py only.

A cold load (a conversation this process never saw) used to decode every row into a
FrozenMap before the exchange could start, though a request needs only the rows' JSON
texts (a message keeps its row as its JSON) and the loop's checks need only the
messages that are not plain text (see `loading`). Most of a chat is plain text:
`{"role":"user"|"assistant","content":"..."}`, written compact in that key order.

`RowVector` is a transcript (a pyrsistent `PVector`: immutable, equal to and hashed as
the pvector of its messages) over such rows. Every row is checked when the vector is
made, as a decode would: a run of plain rows as a whole, over their UTF-8 joined
(`all_plain`: a few C passes, none per row), else each plain row by its exact shape and
json's own string scanner (its content a well-formed JSON string that ends the row),
any other row decoded there and then. So a corrupt row is still named by the load.
What is deferred is only building a plain row's FrozenMap: on first read, kept (the
same object every read after, so identity checks hold), all rows at once when the
vector is walked.

Each row is kept once, as its UTF-8 (what a request carries, and what the stores' memo
compares and shares): the texts it was checked as are not kept, so what a process holds
for a conversation read cold is about its JSON, not twice it. A plain row's text is
decoded from its bytes again when its message is built (once).

Appending or slicing keeps the rows shared and undecoded: the exchange that loads a
conversation, answers and saves it never builds the maps of its plain messages. Any
other verb (set, delete, evolver, ...) works on the pvector of the messages, made once.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from itertools import chain, compress, repeat
from json.decoder import scanstring
from operator import getitem, is_, itemgetter, not_, sub
from typing import Any

from pyrsistent import PVector, pvector

from .frozen import FrozenMap, keep_json, known_jsons

__all__ = ["RowVector", "all_plain", "plain_rows", "starts_with"]

# The two plain shapes a row is written in (compact, keys in this order), by the offset
# of the content's first character.
_USER, _ASSISTANT = '{"role":"user","content":"', '{"role":"assistant","content":"'
_ROLE_AT = {len(_USER): "user", len(_ASSISTANT): "assistant"}
_PLAIN = (_USER, _ASSISTANT)
_CONTENT = ',"content":"'  # in a plain row, where the prefix ends: its content follows
_START = {role[0]: k for k, role in _ROLE_AT.items()}  # by the role's first letter
_ROLE_LETTER = itemgetter(len('{"role":"'))
_UNBUILT = 1  # a cell of a plain row whose message is not built yet (any int says so)
_EMPTY_END = (len(_USER) + 1, len(_ASSISTANT) + 1)  # where an empty content's string ends


def _plain_at(text: str) -> int:
    """Return where a plain row's content starts, or 0 when the row is not plain text.

    Plain: exactly `{"role":"user"|"assistant","content":"<non-empty string>"}`, the
    string well formed (json's scanner, strict, finds its end at the row's last `"`).
    """
    if not text.startswith(_PLAIN):
        return 0
    k = text.find(_CONTENT) + len(_CONTENT)
    try:
        _, end = scanstring(text, k, True)
    except ValueError:
        return 0
    return k if end == len(text) - 1 and end > k + 1 and text.endswith("}") else 0


# The same shapes as UTF-8, what rows come as from most stores.
_PLAIN_UTF8 = tuple(p.encode() for p in _PLAIN)
_EMPTY_UTF8 = tuple(p + b'"}' for p in _PLAIN_UTF8)  # a plain shape with empty content
# Rows joined by a newline (no plain row holds one: a string's is escaped): where one
# row ends and a plain one begins, in either shape.
_BOUNDARY = tuple(b'"}\n' + p for p in _PLAIN_UTF8)
# What a JSON string may hold as it is: every byte but the quote, the backslash and the
# control characters (bytes of 0x80 and up are UTF-8 sequences, checked by decoding).
_STRING_BYTE = bytes(b for b in range(0x20, 0x100) if b not in b'"\\')
# A backslash and what it escapes, but for \uXXXX (rare: json.dumps writes one only for
# a control character or a lone surrogate), which is left to json's own scanner.
_SHORT_ESCAPES = tuple(b"\\" + c for c in (b'"', b"/", b"b", b"f", b"n", b"r", b"t"))
_LAST_QUOTES = b'"' * 8  # a plain row's quotes: its shape's seven and its content's close
_ROW_QUOTES = _LAST_QUOTES + b"\n"  # and the joint after it, but after the last row


def all_plain(rows: Sequence[bytes]) -> bool:
    """Whether every row (UTF-8) is a plain text message (see `_plain_at`), told in a
    few passes over all of them joined, not a call per row; False also when some row
    holds a \\u escape (`plain_rows` then tells it, row by row).

    Joined by newlines, every escape dropped (pairs of backslashes first: they pair from
    the left, as json reads them), the rows are plain exactly when: they are UTF-8; each
    row keeps exactly eight quotes, and no backslash or control character (deleting
    every byte a string may hold leaves eight quotes per row between the newlines);
    each newline sits between a row ending `"}` and one beginning as a plain row (a
    newline is only ever a joint, so each is counted once), as do the first and last
    rows; and no row is a plain shape with empty content. Its shape's seven quotes and
    the `"` before its `}` are then a row's eight: its content holds none unescaped,
    so it is one well-formed string, closed where the row ends.
    """
    n = len(rows)
    try:
        joined = b"\n".join(rows)
    except TypeError:  # a row that is not bytes
        return False
    if not n or not rows[0].startswith(_PLAIN_UTF8) or not rows[-1].endswith(b'"}'):
        return False
    if not joined.isascii():
        try:
            joined.decode()
        except UnicodeDecodeError:
            return False
    if b"\\" in joined:
        joined = joined.replace(b"\\\\", b"")
        for escape in _SHORT_ESCAPES:  # what is left of a backslash stays in the skeleton
            joined = joined.replace(escape, b"")
    return (
        joined.translate(None, _STRING_BYTE) == _ROW_QUOTES * (n - 1) + _LAST_QUOTES
        and sum(map(joined.count, _BOUNDARY)) == n - 1
        and _EMPTY_UTF8[0] not in rows
        and _EMPTY_UTF8[1] not in rows
    )


def plain_rows(texts: Sequence[str]) -> list[int]:
    """Return, per row, where its content starts when it is a plain text message, else 0.

    `_plain_at` of each, told at C speed when every row that begins as a plain one is
    one (the usual case): a pass per check over them all, no Python frame per row; else
    row by row.
    """
    n = len(texts)
    where = list(compress(range(n), map(str.startswith, texts, repeat(_PLAIN, n))))
    rows = texts if len(where) == n else [texts[i] for i in where]
    # Each begins as a plain row: its role's first letter says where its content starts.
    starts = list(map(_START.__getitem__, map(_ROLE_LETTER, rows)))
    try:
        # strict (no control character in a string) is scanstring's default: not passed,
        # which spares its argument parser a conversion per row (about 7% of this pass)
        ends = list(map(itemgetter(1), map(scanstring, rows, starts)))
        # What follows each string: a "}" (an IndexError: nothing follows it).
        closed = "".join(map(getitem, rows, ends)) == "}" * len(rows)
    except (ValueError, IndexError):  # a string not well formed (a corrupt row): row by row
        return list(map(_plain_at, texts))
    # Each string ends its row but for the row's "}", and none is empty. A "}" follows
    # each string, so none ends past its row's last character: equal sums of where they
    # end and of the rows' lengths then say each ends exactly there. An empty one ends
    # one past its start: at _EMPTY_END[0] or [1], where a short user row may end too.
    if (
        not closed
        or sum(map(len, rows)) != sum(ends) + len(rows)
        or ((_EMPTY_END[0] in ends or _EMPTY_END[1] in ends) and min(map(sub, ends, starts)) < 2)
    ):
        return list(map(_plain_at, texts))
    if len(where) == n:
        return starts
    out = [0] * n
    for i, k in zip(where, starts, strict=True):
        out[i] = k
    return out


class _Rows:
    """Rows shared by every vector made from them: each row once, as its UTF-8 (the JSON
    a request carries; its text is decoded from it again when a plain row is first
    read), and per row its message once built (or, for a plain row not yet read, an
    int)."""

    __slots__ = ("encoded", "cells", "plain", "decode")  # pragma: no mutate

    def __init__(
        self,
        encoded: Sequence[bytes],
        cells: list,
        decode: Callable[[Sequence[bytes], None], list | None],
        plain: bytes,
    ) -> None:
        self.encoded, self.cells, self.decode = encoded, cells, decode
        self.plain = plain  # per row, 1 when it was plain text at load (fixed)

    def message(self, i: int) -> FrozenMap:
        """Return row i's message, built on first read."""
        cell = self.cells[i]
        if type(cell) is not int:
            return cell
        text = self.encoded[i].decode()  # checked plain at load: UTF-8, its shape known
        start = _START[_ROLE_LETTER(text)]  # where its content starts: told by its role
        content, _ = scanstring(text, start, True)
        built = FrozenMap({"role": _ROLE_AT[start], "content": content})
        keep_json(built, self.encoded[i])
        self.cells[i] = built  # a racing reader may build its own: only a later miss
        return self.cells[i]

    def messages(self, lo: int, hi: int) -> list:
        """Return rows lo..hi-1's messages, building the unread ones at once."""
        cells = self.cells[lo:hi]
        todo = [i for i, c in enumerate(cells, lo) if type(c) is int]
        if todo:
            built = self.decode([self.encoded[i] for i in todo], None)
            if built is None:  # cannot be (each was checked at load): build one by one
                built = [self.message(i) for i in todo]
            for i, m in zip(todo, built, strict=True):
                if type(self.cells[i]) is int:
                    self.cells[i] = m
            cells = self.cells[lo:hi]
        return cells


class RowVector(PVector):
    """A transcript over store rows (see the module): a PVector of FrozenMaps whose plain
    text messages are built when first read."""

    __slots__ = ("_rows", "_lo", "_hi", "_more", "_vector")  # pragma: no mutate

    def __init__(self, rows: _Rows, lo: int, hi: int, more: PVector) -> None:
        self._rows, self._lo, self._hi, self._more = rows, lo, hi, more
        self._vector: PVector | None = None

    @staticmethod
    def of(
        encoded: Sequence[bytes],
        decode: Callable[[Sequence[str | bytes], Sequence[bytes] | None], list | None],
        texts: Sequence[str] | None = None,
    ) -> RowVector | None:
        """Return the transcript of message rows (their UTF-8, and their texts if the
        caller has them), every row checked now, only their UTF-8 kept (shared, not
        copied); None when a row is not UTF-8 or a row that is not plain text does not
        decode (`decode`, given rows' texts and their UTF-8, or their UTF-8 alone and
        None, returns their messages or None)."""
        n = len(encoded)
        if all_plain(encoded):  # the usual chat: told over all rows joined
            return RowVector(_Rows(encoded, [_UNBUILT] * n, decode, b"\x01" * n), 0, n, pvector())
        if texts is None:
            try:
                texts = tuple(map(bytes.decode, encoded))
            except UnicodeDecodeError:
                return None
        cells: list = plain_rows(texts)
        odd = list(compress(range(len(cells)), map(not_, cells))) if 0 in cells else []
        if odd:
            got = decode([texts[i] for i in odd], [encoded[i] for i in odd])
            if got is None or len(got) != len(odd):
                return None
            for i, m in zip(odd, got, strict=True):
                cells[i] = m
        plain = bytes(map(int.__instancecheck__, cells)) if odd else b"\x01" * len(cells)
        rows = _Rows(encoded, cells, decode, plain)  # type: ignore[arg-type]
        return RowVector(rows, 0, n, pvector())

    # ---- what the loop asks of a loaded transcript, without building plain rows

    def odd_rows(self) -> list[int]:
        """Return the indexes of the rows that were not plain text at load."""
        plain = self._rows.plain[self._lo : self._hi]
        if b"\x00" not in plain:  # the usual chat: every row plain text
            return []
        return list(compress(range(len(plain)), map(not_, plain)))

    def rows_count(self) -> int:
        """Return how many of the messages are rows (the rest came after them)."""
        return self._hi - self._lo

    def after_rows(self) -> PVector:
        """Return the messages after the rows."""
        return self._more

    def jsons(self) -> list[bytes | None]:
        """Return each message's JSON text (None where a later message keeps none)."""
        return [*self._rows.encoded[self._lo : self._hi], *known_jsons(self._more)]

    def frozen(self, freeze: Callable[[Any], PVector]) -> RowVector:
        """Return the vector with the messages after its rows frozen by `freeze`."""
        more = self._more
        if all(type(m) is FrozenMap for m in more):
            return self
        return RowVector(self._rows, self._lo, self._hi, freeze(list(more)))

    def _starts_with(self, prefix: RowVector) -> bool | None:
        """Whether self begins with prefix's very messages, told from how both were made;
        None when that cannot tell."""
        if prefix._rows is not self._rows or prefix._lo != self._lo:
            return None
        if prefix._hi != self._hi:  # a shorter window of the same rows, and nothing more
            return None if prefix._more or prefix._hi > self._hi else True
        m = len(prefix._more)
        return m <= len(self._more) and all(map(is_, prefix._more, self._more[:m]))

    # ---- a sequence

    def __len__(self) -> int:
        return self._hi - self._lo + len(self._more)

    def __getitem__(self, index: Any) -> Any:
        n = self._hi - self._lo
        if type(index) is slice:
            start, stop, step = index.indices(n + len(self._more))
            if step != 1:
                return self.tovector()[index]
            stop = max(start, stop)
            lo, hi = self._lo + min(start, n), self._lo + min(stop, n)
            return RowVector(self._rows, lo, hi, self._more[max(start - n, 0) : max(stop - n, 0)])
        i = operator.index(index)
        if i < 0:
            i += n + len(self._more)
        if 0 <= i < n:
            return self._rows.message(self._lo + i)
        if i < 0:
            raise IndexError("RowVector index out of range")
        return self._more[i - n]

    def __iter__(self) -> Iterator:
        return chain(self._rows.messages(self._lo, self._hi), self._more)

    def tovector(self) -> PVector:
        """Return the pyrsistent pvector of the messages (made once)."""
        if self._vector is None:
            self._vector = pvector(self)
        return self._vector

    def __reversed__(self) -> Iterator:
        return reversed(self.tovector())

    def __contains__(self, value: Any) -> bool:
        return value in self.tovector()

    def __eq__(self, other: Any) -> Any:
        if type(other) is RowVector:
            other = other.tovector()
        return self.tovector().__eq__(other)

    def __ne__(self, other: Any) -> Any:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __lt__(self, other: Any) -> Any:
        return self.tovector() < _plain_vector(other)

    def __le__(self, other: Any) -> Any:
        return self.tovector() <= _plain_vector(other)

    def __gt__(self, other: Any) -> Any:
        return self.tovector() > _plain_vector(other)

    def __ge__(self, other: Any) -> Any:
        return self.tovector() >= _plain_vector(other)

    def __hash__(self) -> int:
        return hash(self.tovector())

    def __repr__(self) -> str:
        return repr(self.tovector())

    def __reduce__(self) -> tuple:
        return (pvector, (list(self),))  # pickled and copied as the pvector it equals

    # ---- pyrsistent's verbs: appending keeps the rows; the rest works on the pvector

    def append(self, val: Any) -> RowVector:
        """Return the vector with `val` after its last message."""
        return RowVector(self._rows, self._lo, self._hi, self._more.append(val))

    def extend(self, obj: Iterable) -> RowVector:
        """Return the vector with `obj`'s items after its last message."""
        return RowVector(self._rows, self._lo, self._hi, self._more.extend(obj))

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, PVector | list | tuple):
            return NotImplemented
        return self.extend(other)

    def __mul__(self, times: int) -> PVector:
        return self.tovector() * times

    __rmul__ = __mul__

    def set(self, i: int, val: Any) -> PVector:
        """pvector's `set`."""
        return self.tovector().set(i, val)

    def mset(self, *args: Any) -> PVector:
        """pvector's `mset`."""
        return self.tovector().mset(*args)

    def delete(self, index: int, *stop: int) -> PVector:
        """pvector's `delete`."""
        return self.tovector().delete(index, *stop)

    def remove(self, value: Any) -> PVector:
        """pvector's `remove`."""
        return self.tovector().remove(value)

    def evolver(self) -> Any:
        """pvector's `evolver`."""
        return self.tovector().evolver()

    def transform(self, *transformations: Any) -> PVector:
        """pvector's `transform`."""
        return self.tovector().transform(*transformations)

    def index(self, value: Any, *args: Any, **kwargs: Any) -> int:
        """pvector's `index`."""
        return self.tovector().index(value, *args, **kwargs)

    def count(self, value: Any) -> int:
        """pvector's `count`."""
        return self.tovector().count(value)

    def tolist(self) -> list:
        """pvector's `tolist`: the messages as a list."""
        return list(self)


Sequence.register(RowVector)
Hashable.register(RowVector)


def _plain_vector(other: Any) -> Any:
    return other.tovector() if type(other) is RowVector else other


def starts_with(transcript: Sequence, prefix: Sequence) -> bool:
    """Whether `transcript` begins with the very objects of `prefix` (by identity),
    told without building a RowVector's rows where how they were made tells."""
    if type(transcript) is RowVector and type(prefix) is RowVector:
        told = transcript._starts_with(prefix)
        if told is not None:
            return told
    n = len(prefix)
    if n > len(transcript) or (n and transcript[n - 1] is not prefix[n - 1]):
        return False
    return all(map(is_, prefix, transcript))
