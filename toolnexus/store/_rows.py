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
from typing import Any, NamedTuple

from pyrsistent import PMap, PVector, pmap, pvector, thaw

from ..core.transcript import (
    FORMAT_VERSION,
    TranscriptFormatError,
    check_message,
    freeze_transcript,
    json_text,
    readable,
)
from ..core.wire.jsonload import load
from .errors import StoreCorruptError

GENESIS = "0" * 32  # the digest of the empty transcript


class Head(NamedTuple):
    """What a backend keeps per conversation besides its rows."""

    version: int
    count: int
    digest: str


class Plan(NamedTuple):
    """How to save: `encoded` rows go after the first `start` (start 0 replaces)."""

    append: bool
    start: int
    encoded: tuple[str, ...]
    head: Head
    frozen_upto: int  # this many leading messages are known to be pmaps (a memo hit)
    # Every stored row after the save, when known (None for a row that would not read
    # back as its message: see encode_rows).
    texts: tuple[str | None, ...] | None = None


def check_id(id: Any) -> str:
    """Return `id` if it is a conversation id (a non-empty string), else raise ValueError:
    every store refuses a bad id the same way."""
    if not isinstance(id, str) or not id:
        raise ValueError(f"a conversation id must be a non-empty string, got {id!r}")
    return id


def frozen(transcript: Sequence[Mapping]) -> PVector:
    """Return the transcript as a pvector; a pvector is taken as is (checked as it is encoded).

    Re-checking every message of a long frozen transcript on each save would make an
    append cost O(history); `encode_message` checks each message that is written.
    """
    return transcript if isinstance(transcript, PVector) else freeze_transcript(transcript)


def encode_message(message: Mapping) -> str:
    """Return the canonical JSON of one message (sorted keys: value-equal -> same text).

    >>> encode_message({"role": "user", "content": "hi"})
    '{"content":"hi","role":"user"}'
    """
    return json_text(_plain(message), sort_keys=True)


def _plain(message: Mapping) -> dict:
    plain = thaw(message)
    if not isinstance(plain, dict) or not isinstance(plain.get("role"), str):
        raise TranscriptFormatError(f"not a message (a map with a string 'role'): {message!r:.200}")
    return plain


def encode_rows(messages: Iterable[Mapping]) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """Return the row texts of messages, and the same with None where a row would not read
    back as the very message (JSON makes a number key a string, a tuple a list): the
    memo's texts, which a read matches to give saved values back.

    >>> encode_rows([{"role": "user", "content": "hi"}, {"role": "user", "n": (1,)}])
    (('{"content":"hi","role":"user"}', '{"n":[1],"role":"user"}'), ('{"content":"hi","role":"user"}', None))
    """  # noqa: E501
    texts, kept = [], []
    for message in messages:
        plain = _plain(message)
        text = readable(json_text(plain, sort_keys=True))
        texts.append(text)
        kept.append(text if json.loads(text) == plain else None)
    return tuple(texts), tuple(kept)


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
    """The last transcripts seen per id (saved and read), each with its chained digest and,
    when known, its stored row texts (a bounded LRU, one per store).

    It lets a save recognise "the same objects as before, plus new ones" by an identity
    scan instead of re-encoding every message, and a read recognise "the rows this
    process saw last" by comparing their texts instead of decoding them: a miss only
    costs CPU, never correctness. Two per id, because `run` saves an extension of what
    it read while a reader may have read the conversation in between. Only fully frozen
    transcripts are kept: a dict inside could change after the fact while keeping its
    identity.
    """

    def __init__(self, size: int = 256, per_id: int = 2) -> None:
        self._size, self._per_id = size, per_id
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def remember(
        self,
        id: str,
        transcript: Sequence[Mapping],
        digest: str,
        frozen_upto: int = 0,
        texts: tuple[str, ...] | None = None,
    ) -> None:
        """Record that `transcript` has chained digest `digest` (and rows `texts`).

        `frozen_upto` leading messages are known to be pmaps: only the rest is checked.
        """
        if not isinstance(transcript, PVector) or not all(
            isinstance(m, PMap) for m in islice(transcript, frozen_upto, None)
        ):
            return
        with self._lock:
            kept = [e for e in self._items.get(id, ()) if e[0] is not transcript]
            self._items[id] = ((transcript, digest, texts), *kept)[: self._per_id]
            self._items.move_to_end(id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def saved(self, id: str, transcript: PVector, plan: Plan) -> None:
        """Record a transcript just saved by `plan`."""
        self.remember(id, transcript, plan.head.digest, plan.frozen_upto, plan.texts)

    def read(
        self, backend: str, id: str, version: object, count: object, digest: str, rows: Sequence
    ) -> PVector:
        """Return the transcript of a head and its `(seq, text)` rows (see `decode_rows`),
        and remember it.

        Rows whose texts are exactly those of a remembered transcript (same digest) give
        that very value back, so a client that keeps what it derived from it (the
        runtime memo) need not derive it again; a changed row is never hidden, since
        every text is compared. Otherwise the rows are decoded, reusing the remembered
        messages whose rows are unchanged.
        """
        texts = _texts(rows)
        with self._lock:
            known = self._items.get(id, ())
        best = None
        for seen, seen_digest, seen_texts in known:
            if seen_texts is None:
                continue
            if seen_texts == texts and seen_digest == digest and version == FORMAT_VERSION:
                if count == len(texts) and all(map(operator.eq, _seqs(rows), range(count))):
                    self.remember(id, seen, digest, len(seen), texts)
                    return seen
            if best is None or len(seen_texts) > len(best[1]):
                best = (seen, seen_texts)
        transcript = decode_rows(backend, id, version, count, rows, best)
        self.remember(id, transcript, digest, len(transcript), texts)
        return transcript

    def forget(self, id: str) -> None:
        """Drop what is known of `id`."""
        with self._lock:
            self._items.pop(id, None)

    def prefix_digest(
        self, id: str, transcript: Sequence[Mapping], count: int
    ) -> tuple[str, bool, tuple[str, ...] | None]:
        """Return the digest of `transcript[:count]`, whether the memo knew those objects,
        and their row texts when known."""
        with self._lock:
            known = self._items.get(id, ())
        for seen, digest, texts in known:
            if len(seen) == count and all(map(operator.is_, seen, islice(transcript, count))):
                return digest, True, texts
        return digest_of(islice(transcript, count)), False, None

    def known_prefix(
        self, id: str, transcript: Sequence[Mapping]
    ) -> tuple[int, str, tuple[str, ...] | None] | None:
        """Return `(count, digest, texts)` of the longest remembered transcript that is a
        prefix of `transcript` by identity, or None."""
        with self._lock:
            known = self._items.get(id, ())
        best = None
        for seen, digest, texts in known:
            n = len(seen)
            if n <= len(transcript) and (best is None or n > best[0]):
                if all(map(operator.is_, seen, islice(transcript, n))):
                    best = (n, digest, texts)
        return best


def _texts(rows: Sequence) -> tuple[str, ...] | None:
    """Return the rows' texts as str (a driver may give bytes), or None if one is not
    UTF-8 (decoding then names the row)."""
    try:
        return tuple(t.decode() if type(t) is bytes else t for _, t in rows)
    except UnicodeDecodeError:
        return None


def _seqs(rows: Sequence) -> Iterable:
    return (seq for seq, _ in rows)


def _joined(texts: tuple[str, ...] | None, tail: tuple[str, ...]) -> tuple[str, ...] | None:
    return None if texts is None else texts + tail


def plan_extend(id: str, transcript: Sequence[Mapping], memo: Memo) -> tuple[Head, Plan] | None:
    """Return `(expected stored head, plan)` to append to what this process last saw stored.

    None when the memo knows no stored prefix of `transcript`. The expectation must be
    checked where the plan is written (the stored head may have moved since): a backend
    writes the plan only if its head still equals the expected one, else it saves the
    general way (`plan_save` over the head it reads).
    """
    known = memo.known_prefix(id, transcript)
    if known is None:
        return None
    count, digest, texts = known
    tail, kept = encode_rows(islice(transcript, count, None))
    head = Head(FORMAT_VERSION, len(transcript), chain(digest, tail))
    plan = Plan(True, count, tail, head, count, _joined(texts, kept))
    return Head(FORMAT_VERSION, count, digest), plan


def plan_save(id: str, stored: Head | None, transcript: Sequence[Mapping], memo: Memo) -> Plan:
    """Return how to save `transcript` over the `stored` head: append the new tail or replace.

    Appends only when the stored transcript (same format version) is a value-equal
    prefix of the new one, as told by the digest chain.
    """
    n = len(transcript)
    if stored is not None and stored.version == FORMAT_VERSION and stored.count <= n:
        prefix, hit, texts = memo.prefix_digest(id, transcript, stored.count)
        if prefix == stored.digest:
            tail, kept = encode_rows(islice(transcript, stored.count, None))
            head = Head(FORMAT_VERSION, n, chain(prefix, tail))
            upto = stored.count if hit else 0
            return Plan(True, stored.count, tail, head, upto, _joined(texts, kept))
    encoded, kept = encode_rows(transcript)
    return Plan(False, 0, encoded, Head(FORMAT_VERSION, n, chain(GENESIS, encoded)), 0, kept)


def _fail(backend: str, id: str, why: str) -> StoreCorruptError:
    return StoreCorruptError(
        f"{backend}: conversation {id!r:.120} is not a valid transcript: {why}"
    )


def _freeze_json(value: Any) -> Any:
    """Return parsed JSON as pmaps and pvectors (faster than a generic freeze)."""
    kind = type(value)
    if kind is dict:
        return pmap({k: _freeze_json(v) for k, v in value.items()})
    if kind is list:
        return pvector([_freeze_json(v) for v in value])
    return value


def _read_v1(text: str | bytes) -> PMap:
    message = load(text)  # bounded: a row nested 100,000 deep is only corrupt
    if type(message) is not dict:
        raise ValueError(f"not a message (a map with a string 'role'): {message!r:.100}")
    check_message(message)  # a TranscriptFormatError is a ValueError: the row is corrupt
    return _freeze_json(message)


# Per format version, how to read one message row; older versions get a reader here.
_READERS = {1: _read_v1}


def decode_rows(
    backend: str,
    id: str,
    version: object,
    count: object,
    rows: Iterable[tuple[object, object]],
    reuse: tuple[PVector, tuple[str, ...]] | None = None,
) -> PVector:
    """Return the transcript of a head and its `(seq, text)` rows, in seq order.

    Anything but rows 0..count-1 of readable messages is a StoreCorruptError naming
    the id: a missing, extra or unreadable row is never skipped. `reuse` is a known
    transcript and its row texts: a row with the same text at the same place is that
    message (equal text, equal immutable value), not decoded again.
    """
    seen, seen_texts = reuse or ((), ())
    known = len(seen_texts)
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
        if expected < known and reader is _read_v1 and text == seen_texts[expected]:
            messages.append(seen[expected])
            continue
        try:
            messages.append(reader(text))
        except (ValueError, TypeError) as e:
            raise _fail(backend, id, f"message row {seq}: {e}") from None
    if not isinstance(count, int) or len(messages) != count:
        raise _fail(backend, id, f"the head says {count!r} messages but {len(messages)} rows exist")
    return pvector(messages)


def split_joined(rows: Sequence[Sequence]) -> tuple[tuple, list]:
    """Return the head and the `(seq, body)` rows of a key-first outer join's rows
    `(version, count, digest, seq, body)` (see `decode_joined`)."""
    head = tuple(rows[0][:3]) if rows else (None, None, None)
    return head, [(seq, body) for *_, seq, body in rows if seq is not None]


def decode_joined(
    backend: str, id: str, head: Sequence, messages: Sequence, memo: Memo
) -> PVector | None:
    """Return the transcript of a head `(version, count, digest)` and its `(seq, body)`
    rows, read by one SQL statement (one snapshot) that always yields the head's columns
    (see `Memo.read`), or None.

    No head and no messages means absent (the memo then knows it as the empty
    transcript, which a first save appends to), no head but messages is corrupt.
    """
    version, count, digest = head
    if version is None and count is None:
        if messages:
            raise _fail(backend, id, "it has message rows but no head")
        memo.remember(id, pvector(), GENESIS, 0, ())
        return None
    return memo.read(backend, id, version, count, digest, messages)
