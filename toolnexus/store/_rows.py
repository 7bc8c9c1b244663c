"""Row-store algebra shared by the durable backends: one JSON row per message.

A conversation is stored as a head `(version, count, digest)` plus `count` message
rows. The digest is a hash chain over the encoded messages, so a save can tell
"the stored transcript is a prefix of the new one" from the head alone, without
reading the stored rows back: it then appends only what is new. Pure, no I/O
(apart from a small per-store memo of digests, which only saves CPU).
"""

from __future__ import annotations

import hashlib
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import NamedTuple

from pyrsistent import PVector, thaw

from ..transcript import FORMAT_VERSION, freeze_transcript
from .errors import StoreCorruptError

GENESIS = "0" * 32  # the digest of the empty transcript


class Head(NamedTuple):
    """What a backend keeps per conversation besides its rows."""

    version: int
    count: int
    digest: str


class Plan(NamedTuple):
    """How to save: rows `start..` of `encoded` go after the kept prefix (start 0 replaces)."""

    append: bool
    start: int
    encoded: tuple[str, ...]
    head: Head


def encode_message(message: Mapping) -> str:
    """Return the canonical JSON of one message (sorted keys: value-equal -> same text).

    >>> encode_message({"role": "user", "content": "hi"})
    '{"content":"hi","role":"user"}'
    """
    return json.dumps(thaw(message), ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def chain(digest: str, encoded: Iterable[str]) -> str:
    """Return the digest after appending the encoded messages to a transcript of `digest`.

    >>> chain(chain(GENESIS, ["a"]), ["b"]) == chain(GENESIS, ["a", "b"])
    True
    """
    for text in encoded:
        digest = hashlib.blake2b((digest + text).encode("utf-8"), digest_size=16).hexdigest()
    return digest


def digest_of(messages: Iterable[Mapping]) -> str:
    """Return the chained digest of a whole transcript."""
    return chain(GENESIS, map(encode_message, messages))


class Memo:
    """The last transcript seen per id with its digest (bounded LRU).

    It lets a save recognise "same objects as last time, plus new ones" by an identity
    scan instead of re-encoding every message; a miss only costs CPU, never correctness.
    """

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, id: str, transcript: Sequence[Mapping], digest: str) -> None:
        """Record that `transcript` has chained digest `digest`."""
        with self._lock:
            self._items[id] = (transcript, digest)
            self._items.move_to_end(id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def forget(self, id: str) -> None:
        """Drop what is known of `id`."""
        with self._lock:
            self._items.pop(id, None)

    def prefix_digest(self, id: str, transcript: Sequence[Mapping], count: int) -> str:
        """Return the digest of `transcript[:count]`, from the memo when it is the same objects."""
        with self._lock:
            known = self._items.get(id)
        if known is not None and len(known[0]) == count:
            if all(map(operator.is_, known[0], islice(transcript, count))):
                return known[1]
        return digest_of(islice(transcript, count))


def plan_save(id: str, stored: Head | None, transcript: Sequence[Mapping], memo: Memo) -> Plan:
    """Return how to save `transcript` over the `stored` head: append the new tail or replace.

    Appends only when the stored transcript (same format version) is a value-equal
    prefix of the new one, as told by the digest chain.
    """
    n = len(transcript)
    if stored is not None and stored.version == FORMAT_VERSION and stored.count <= n:
        prefix = memo.prefix_digest(id, transcript, stored.count)
        if prefix == stored.digest:
            tail = tuple(map(encode_message, islice(transcript, stored.count, None)))
            return Plan(True, stored.count, tail, Head(FORMAT_VERSION, n, chain(prefix, tail)))
    encoded = tuple(map(encode_message, transcript))
    return Plan(False, 0, encoded, Head(FORMAT_VERSION, n, chain(GENESIS, encoded)))


def _fail(backend: str, id: str, why: str) -> StoreCorruptError:
    return StoreCorruptError(
        f"{backend}: conversation {id!r:.120} is not a valid transcript: {why}"
    )


def _read_v1(text: str | bytes):
    return json.loads(text)


# Per format version, how to read one message row; older versions get a reader here.
_READERS = {1: _read_v1}


def decode_rows(
    backend: str, id: str, version: object, count: object, rows: Iterable[tuple[object, object]]
) -> PVector:
    """Return the transcript of a head and its `(seq, text)` rows, in seq order.

    Anything but rows 0..count-1 of readable messages is a StoreCorruptError naming
    the id: a missing, extra or unreadable row is never skipped.
    """
    reader = _READERS.get(version)  # type: ignore[arg-type]
    if reader is None:
        raise _fail(
            backend,
            id,
            f"unknown format version {version!r} (this toolnexus reads {sorted(_READERS)})",
        )
    messages = []
    for expected, (seq, text) in enumerate(rows):
        if seq != expected:
            raise _fail(backend, id, f"message row {expected} is missing (found row {seq!r})")
        try:
            messages.append(reader(text))
        except (ValueError, TypeError) as e:
            raise _fail(backend, id, f"message row {seq} is not JSON ({e})") from None
    if not isinstance(count, int) or len(messages) != count:
        raise _fail(backend, id, f"the head says {count!r} messages but {len(messages)} rows exist")
    try:
        return freeze_transcript(messages)
    except ValueError as e:
        raise _fail(backend, id, str(e)) from None
