"""Row-store algebra shared by the durable backends: one JSON row per message.

A conversation is stored as a head `(version, count, digest)` plus `count` message
rows. The digest is a hash chain over the encoded messages, so a save can tell
"the stored transcript is a prefix of the new one" from the head alone, without
reading the stored rows back: it then appends only what is new. Pure, no I/O
(apart from a small per-store memo of digests, which only saves CPU).
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from typing import NamedTuple

from pyrsistent import PVector, pvector

from ..core.bounds import DEFAULT_MEMO_BYTES, UNENCODED_MESSAGE_BYTES
from ..core.frozen import FrozenMap, known_jsons
from ..core.rowvector import starts_with as _starts  # by identity (see there)
from ..core.transcript import FORMAT_VERSION, freeze_transcript
from ._decode import READERS as _READERS
from ._decode import read_message_row as _read_v1
from ._decode import read_rows_at_once, read_rows_lazily
from ._encode import GENESIS as GENESIS  # re-exported
from ._encode import chain as chain
from ._encode import digest_of as digest_of
from ._encode import encode_message as encode_message
from ._encode import encode_rows as encode_rows
from ._ids import check_id as check_id  # re-exported
from ._ids import check_text_id as check_text_id
from ._split import Numbered, split_joined
from ._split import split_aggregated as split_aggregated
from .errors import StoreCorruptError


class Head(NamedTuple):
    """What a backend keeps per conversation besides its rows."""

    version: int
    count: int
    digest: str


class _Unknown:
    """The edit stamp of a transcript whose stored stamp this process does not know."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


# A backend whose database marks every changed or deleted row (a trigger sets a fresh
# "edited" stamp on the conversation's head) tells a read "nothing you know has changed"
# by an equal stamp; UNKNOWN equals no stamp, so a transcript remembered with it is never
# extended from the head alone (the next read compares every row instead).
UNKNOWN = _Unknown()


class Plan(NamedTuple):
    """How to save: `encoded` rows go after the first `start` (start 0 replaces)."""

    append: bool
    start: int
    encoded: tuple[str, ...]
    head: Head
    frozen_upto: int  # this many leading messages are known to be pmaps (a memo hit)
    # Every stored row's UTF-8 after the save, when known (None for a row that would
    # not read back as its message: see encode_rows); a message's own JSON where equal.
    texts: Sequence[bytes | None] | None = None
    stamp: object = UNKNOWN  # the edit stamp the rows before `start` were seen with
    exact: bool = False  # every text is known and reads back as its message


class Seen(NamedTuple):
    """A transcript the memo remembers: its chained digest, its rows' UTF-8 (None where
    unknown), the stored edit stamp it was seen with, and whether every row's text is
    known and reads back as the very message (so a read may give the value itself)."""

    transcript: PVector
    digest: str
    # A pvector (extended in O(new)) or the tuple a read made; the very bytes the
    # messages keep as their JSON (or a RowVector as its rows): a row is held once.
    texts: Sequence[bytes | None] | None
    stamp: object
    exact: bool
    size: int = 0  # the JSON bytes it stands for (see Memo's max_bytes)


MEMO_BYTES = DEFAULT_MEMO_BYTES  # a store value's memo (backends pass TOOLNEXUS_MEMO_BYTES)


def _sized(seen: Seen, kept: Sequence[Seen]) -> Seen:
    """Return `seen` with its size: in O(new) when it extends a remembered one's rows."""
    texts = seen.texts  # the rows' UTF-8, None where unknown
    if texts is None:
        return seen._replace(size=len(seen.transcript) * UNENCODED_MESSAGE_BYTES)
    base = next((e for e in kept if e.texts is not None and len(e.texts) <= len(texts)), None)
    if base is None:  # no slice: a pvector's is a copy
        return seen._replace(size=sum(map(len, filter(None, texts))))
    return seen._replace(size=base.size + sum(map(len, filter(None, texts[len(base.texts) :]))))


def frozen(transcript: Sequence[Mapping]) -> PVector:
    """Return the transcript as a pvector; a pvector is taken as is (checked as it is encoded).

    Re-checking every message of a long frozen transcript on each save would make an
    append cost O(history); `encode_message` checks each message that is written.
    """
    return transcript if isinstance(transcript, PVector) else freeze_transcript(transcript)


class Memo:
    """The last transcripts seen per id (saved and read), each a `Seen` (a bounded LRU,
    one per store).

    It lets a save recognise "the same objects as before, plus new ones" by an identity
    scan instead of re-encoding every message, and a read recognise "the rows this
    process saw last" without decoding them: by the head and edit stamp alone where the
    database keeps one (`read_past`), else by comparing their texts. A miss only costs
    CPU, never correctness. Two per id (`run` saves an extension of what it read, a
    reader may read in between); only fully frozen transcripts. Bounded: `size` ids,
    `max_bytes` of JSON."""

    def __init__(self, size: int = 256, per_id: int = 2, max_bytes: int = MEMO_BYTES) -> None:
        self._size, self._per_id, self._max_bytes = size, per_id, max_bytes
        self._items: OrderedDict = OrderedDict()
        self._bytes: dict[str, int] = {}  # per id, the JSON bytes its largest Seen stands for
        self._total = 0
        # Per id, the reads taken by the head alone since one compared every row.
        self._unchecked: dict[str, int] = {}
        self._lock = threading.Lock()

    def remember(
        self,
        id: str,
        transcript: Sequence[Mapping],
        digest: str,
        frozen_upto: int = 0,
        texts: Sequence[bytes | None] | None = None,
        stamp: object = UNKNOWN,
        exact: bool = False,
        size: int | None = None,
    ) -> None:
        """Record that `transcript` has chained digest `digest` (its rows' UTF-8 `texts`
        and their bytes `size`, if counted: see Seen; edit stamp `stamp`; `exact`: see Seen).

        `frozen_upto` leading messages are known to be pmaps: only the rest is checked.
        """
        # A slice, not islice: checking the rest costs O(the rest), not O(all).
        rest = transcript[frozen_upto:] if isinstance(transcript, PVector) else None
        if rest is None or not all(isinstance(m, FrozenMap) for m in rest):
            return
        if texts is not None and not isinstance(texts, PVector | tuple):
            texts = tuple(texts)  # immutable, so what a caller holds cannot change it
        seen = Seen(transcript, digest, texts, stamp, exact and texts is not None, size or 0)
        with self._lock:
            kept = [e for e in self._items.get(id, ()) if e.transcript is not transcript]
            first = seen if size else _sized(seen, kept)  # a size given: counted already
            self._items[id] = entries = (first, *kept)[: self._per_id]
            self._items.move_to_end(id)
            largest = max(e.size for e in entries)
            self._total += largest - self._bytes.get(id, 0)
            self._bytes[id] = largest
            while len(self._items) > self._size or (
                self._total > self._max_bytes and len(self._items) > 1
            ):
                gone, _ = self._items.popitem(last=False)
                self._total -= self._bytes.pop(gone, 0)
                self._unchecked.pop(gone, None)

    def remembered_bytes(self) -> int:
        """Return the JSON bytes of the transcripts remembered (see MEMO_BYTES)."""
        with self._lock:
            return self._total

    def saved(self, id: str, transcript: PVector, plan: Plan) -> None:
        """Record a transcript just saved by `plan`."""
        self.remember(
            id, transcript, plan.head.digest, plan.frozen_upto, plan.texts, plan.stamp, plan.exact
        )

    def _seen(self, id: str) -> tuple[Seen, ...]:
        with self._lock:
            return self._items.get(id, ())

    def known(self, id: str) -> Seen | None:
        """Return the longest remembered transcript of `id` that a read may extend from the
        stored head alone (its stamp is known and it reads back exactly), or None."""
        best = None
        for seen in self._seen(id):
            if seen.exact and seen.stamp is not UNKNOWN:
                if best is None or len(seen.transcript) > len(best.transcript):
                    best = seen
        return best

    def read_past(
        self,
        id: str,
        known: Seen,
        head: Sequence,
        stamp: object,
        rows: Sequence,
        recheck: int | None = None,
    ) -> PVector | None:
        """Return `known`'s transcript extended by the `(seq, text)` rows past it, or None.

        Taken only when the stored head vouches that nothing `known` holds has changed:
        the same format version and edit stamp, a count of exactly the rows known plus
        these, rows numbered on from the known ones, and a digest equal to the known one
        chained over these rows (a rewrite of any earlier row, through any store, moves
        the digest; one behind the stores' back moves the stamp). The first messages are
        `known`'s own objects; with no new rows it is `known`'s very transcript. None
        means: read and check every row (which names any corruption). `recheck`, for a
        database that keeps no edit stamp: None after that many reads of `id` by the head
        alone, so a row changed by hand shows within that many reads.
        """
        version, count, digest = head
        k = len(known.transcript)
        if version != FORMAT_VERSION or stamp != known.stamp or known.texts is None:
            return None
        if recheck is not None and self._unchecked.get(id, 0) >= recheck:
            return None
        if type(count) is not int or count != k + len(rows):
            return None
        texts = _as_str(_bodies(rows))
        if texts is None or chain(known.digest, texts) != digest:
            return None
        if not _numbered_from(rows, k):
            return None
        try:
            new = read_rows_at_once(texts)
            new = [_read_v1(text) for text in texts] if new is None else new
        except (ValueError, TypeError):
            return None  # the whole read names the row
        transcript = known.transcript.extend(new) if new else known.transcript
        rows = _joined(known.texts, _row_bytes(new, _utf8(texts)))  # chain encoded them
        self.remember(id, transcript, digest, count, rows, stamp, True)
        with self._lock:
            self._unchecked[id] = self._unchecked.get(id, 0) + 1
        return transcript

    def read(
        self,
        backend: str,
        id: str,
        version: object,
        count: object,
        digest: str,
        rows: Sequence,
        stamp: object = UNKNOWN,
    ) -> PVector:
        """Return the transcript of a head and ALL its `(seq, text)` rows (see
        `decode_rows`), and remember it (with the edit stamp read with them).

        Rows whose texts are exactly those of a remembered transcript (same digest) give
        that very value back, so a client that keeps what it derived from it (the
        runtime memo) need not derive it again; rows that begin with the texts of one
        give it back extended by the rest, decoded; a changed row is never hidden, since
        every text is compared (at C speed: one tuple comparison). Otherwise the rows
        are decoded, reusing the remembered messages whose rows are unchanged.
        """
        texts, raw = _texts_and_utf8(_bodies(rows))
        return self._read(backend, id, (version, count, digest), lambda: rows, texts, raw,
                          _numbered(rows, count), stamp)  # fmt: skip

    def read_list(
        self,
        backend: str,
        id: str,
        version: object,
        count: object,
        digest: str,
        bodies: list,
        stamp: object = UNKNOWN,
    ) -> PVector:
        """`read` for a backend whose rows are a list (row i is bodies[i]): the same checks,
        without building `(seq, text)` pairs unless rows must be decoded one by one."""
        texts, raw = _texts_and_utf8(bodies)
        rows = lambda: list(enumerate(bodies))  # noqa: E731
        return self._read(backend, id, (version, count, digest), rows, texts, raw,
                          count == len(bodies), stamp)  # fmt: skip

    def _read(
        self,
        backend: str,
        id: str,
        head: tuple,
        rows: Callable[[], Sequence],
        texts: Sequence[str] | None,
        raw: tuple[bytes, ...] | None,
        numbered: bool,
        stamp: object,
    ) -> PVector:
        """`read` of rows' UTF-8 `raw` (None: a row has none), and `texts` if they came as str."""
        version, count, digest = head
        with self._lock:  # every row is compared below
            self._unchecked.pop(id, None)
        best = None
        for seen in self._seen(id):
            if seen.texts is None:
                continue
            same = raw is not None and len(seen.texts) == len(raw)
            if same and seen.digest == digest and version == FORMAT_VERSION:
                if seen.exact and numbered and _equal(seen.texts, raw):
                    self.remember(id, seen.transcript, digest, len(raw), seen.texts, stamp, True)
                    return seen.transcript
            if best is None or len(seen.texts) > len(best.texts):
                best = seen
        if best is not None and best.exact and raw is not None and version == FORMAT_VERSION:
            k = len(best.texts)
            if numbered and len(raw) >= k and _equal(best.texts, raw[:k]):
                new = decode_rows(backend, id, version, count - k, rows()[k:], start=k)
                transcript = best.transcript.extend(new)
                rows_now = _joined(best.texts, _row_bytes(new, raw[k:]))
                self.remember(id, transcript, digest, count, rows_now, stamp, True)
                return transcript
        if best is None and numbered and raw is not None and version == FORMAT_VERSION:
            # The usual cold read: every row checked at once, its plain messages built when
            # first read (a RowVector: each row kept once, as the UTF-8 the memo shares).
            size = sum(map(len, raw))  # the memo's size, and a bound on the longest row
            at_once = read_rows_lazily(texts, raw, size)
            if at_once is not None and len(at_once) == count:
                self.remember(id, at_once, digest, count, raw, stamp, True, size)
                return at_once
        reuse = (best.transcript, best.texts) if best is not None else None
        transcript = decode_rows(backend, id, version, count, rows(), reuse)
        kept = _row_bytes(transcript, raw) if raw is not None else None
        self.remember(id, transcript, digest, len(transcript), kept, stamp, raw is not None)
        return transcript

    def forget(self, id: str) -> None:
        """Drop what is known of `id`."""
        with self._lock:
            self._items.pop(id, None)
            self._total -= self._bytes.pop(id, 0)
            self._unchecked.pop(id, None)

    def prefix_of(self, id: str, transcript: Sequence[Mapping], count: int) -> Seen | None:
        """Return the remembered transcript that is `transcript[:count]` by identity, or None."""
        for seen in self._seen(id):
            if len(seen.transcript) == count and _starts(transcript, seen.transcript):
                return seen
        return None

    def known_prefix(self, id: str, transcript: Sequence[Mapping]) -> Seen | None:
        """Return the longest remembered transcript that is a prefix of `transcript` by
        identity, or None."""
        longest_first = sorted(self._seen(id), key=lambda s: -len(s.transcript))
        for seen in longest_first:
            if len(seen.transcript) <= len(transcript) and _starts(transcript, seen.transcript):
                return seen
        return None


def _as_str(texts: Sequence) -> Sequence[str] | None:
    """Return rows' texts as str (a driver may give bytes), or None if one is not UTF-8
    (decoding then names the row)."""
    if all(map(str.__instancecheck__, texts)):  # the usual case, checked at C speed
        return texts
    try:
        return tuple(t.decode() if type(t) is bytes else t for t in texts)
    except UnicodeDecodeError:
        return None


def _bodies(rows: Sequence) -> Sequence:
    """Return the texts (str or UTF-8) of `(seq, text)` rows."""
    return rows.texts if type(rows) is Numbered else tuple(map(_second, rows))


def _texts_and_utf8(bodies: Sequence) -> tuple[Sequence[str] | None, tuple[bytes, ...] | None]:
    """Return rows' texts when they came as str (else None), and their UTF-8: bytes rows
    as they came (checked when read: a row not UTF-8 is named then), str rows encoded;
    None when a row has none."""
    if all(map(bytes.__instancecheck__, bodies)):  # most drivers: bytes, never decoded
        return None, tuple(bodies)
    texts = _as_str(bodies)
    return texts, None if texts is None else _utf8(texts)


def _utf8(texts: Sequence[str]) -> tuple[bytes, ...] | None:
    """Return the UTF-8 of str rows, or None if one cannot be (decoding names the row)."""
    try:
        return tuple(map(str.encode, texts))
    except UnicodeEncodeError:
        return None


def _utf8_of(text: object) -> object:
    """Return a row's UTF-8 to compare (a str row encoded: a lone surrogate equals none)."""
    return text.encode(errors="surrogatepass") if type(text) is str else text  # type: ignore


def _equal(a: Sequence, b: Sequence) -> bool:
    """Whether two sequences of rows are equal item by item (at C speed, no copy)."""
    return len(a) == len(b) and all(map(operator.eq, a, b))


def _row_bytes(messages: Sequence, rows: Sequence[bytes]) -> Sequence[bytes]:
    """Return the rows' UTF-8 as the messages keep it for their JSON (the very objects:
    a row held once) when each message keeps exactly its row, else `rows`."""
    kept = known_jsons(messages)
    return kept if _equal(kept, rows) else rows


_first, _second = operator.itemgetter(0), operator.itemgetter(1)


def _seqs(rows: Sequence) -> Iterable:
    return map(_first, rows)


def _numbered_from(rows: Sequence, start: int) -> bool:
    if type(rows) is Numbered:
        return rows.start == start
    return all(map(operator.eq, _seqs(rows), range(start, start + len(rows))))


def _numbered(rows: Sequence, count: object) -> bool:
    """Whether `rows` are exactly rows 0..count-1, in order."""
    if type(rows) is Numbered:
        return count == len(rows) and rows.start == 0
    return count == len(rows) and all(map(operator.eq, _seqs(rows), range(len(rows))))


def _joined(texts: Sequence | None, tail: Sequence) -> PVector | None:
    """Return the rows' UTF-8 `texts` extended by `tail`, as a pvector (None: unknown)."""
    if texts is None:
        return None
    return (texts if isinstance(texts, PVector) else pvector(texts)).extend(tail)


def _saved_rows(messages: Sequence[Mapping], kept: Sequence[str | None]) -> tuple:
    """Return the UTF-8 of the rows `encode_rows` kept for `messages` (None stays None):
    a message's own JSON where it is that row (the very object: held once)."""
    rows = [None if t is None else t.encode() for t in kept]
    jsons = known_jsons(messages)  # None for a message that keeps none
    return tuple(j if r is not None and j == r else r for j, r in zip(jsons, rows, strict=True))


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
    count = len(known.transcript)
    new = transcript[count:]
    tail, kept = encode_rows(new)
    head = Head(FORMAT_VERSION, len(transcript), chain(known.digest, tail))
    exact = known.exact and None not in kept
    texts = _joined(known.texts, _saved_rows(new, kept))
    plan = Plan(True, count, tail, head, count, texts, known.stamp, exact)
    return Head(FORMAT_VERSION, count, known.digest), plan


def plan_save(id: str, stored: Head | None, transcript: Sequence[Mapping], memo: Memo) -> Plan:
    """Return how to save `transcript` over the `stored` head: append the new tail or replace.

    Appends only when the stored transcript (same format version) is a value-equal
    prefix of the new one, as told by the digest chain. An append keeps the edit stamp
    of the prefix it extends (when the memo knew it); a replace's is UNKNOWN (deleting
    the old rows moves the stored stamp).
    """
    n = len(transcript)
    if stored is not None and stored.version == FORMAT_VERSION and stored.count <= n:
        seen = memo.prefix_of(id, transcript, stored.count)
        prefix = seen.digest if seen is not None else digest_of(islice(transcript, stored.count))
        if prefix == stored.digest:
            new = transcript[stored.count :]
            tail, kept = encode_rows(new)
            head = Head(FORMAT_VERSION, n, chain(prefix, tail))
            if seen is None:
                return Plan(True, stored.count, tail, head, 0)
            exact = seen.exact and None not in kept
            texts = _joined(seen.texts, _saved_rows(new, kept))
            return Plan(True, stored.count, tail, head, stored.count, texts, seen.stamp, exact)
    encoded, kept = encode_rows(transcript)
    head = Head(FORMAT_VERSION, n, chain(GENESIS, encoded))
    rows = _saved_rows(transcript, kept)
    return Plan(False, 0, encoded, head, 0, rows, UNKNOWN, None not in kept)


def _fail(backend: str, id: str, why: str) -> StoreCorruptError:
    return StoreCorruptError(
        f"{backend}: conversation {id!r:.120} is not a valid transcript: {why}"
    )


def decode_rows(
    backend: str,
    id: str,
    version: object,
    count: object,
    rows: Iterable[tuple[object, object]],
    reuse: tuple[PVector, Sequence[bytes | None]] | None = None,
    start: int = 0,
) -> PVector:
    """Return the transcript of a head and its `(seq, text)` rows, in seq order.

    Anything but rows 0..count-1 (`start`..start+count-1: the rows past those known) of
    readable messages is a StoreCorruptError naming the id: a missing, extra or
    unreadable row is never skipped. `reuse` is a known transcript and its row texts: a
    row with the same text at the same place is that message (equal text, equal
    immutable value), not decoded again (`reuse`'s texts: the rows' UTF-8).
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
    rows = list(rows)
    if reader is _read_v1 and not known and rows and _numbered_from(rows, start):
        at_once = read_rows_at_once(list(map(_second, rows)))  # the usual cold read
        if at_once is not None and count == len(at_once):
            return pvector(at_once)
    messages = []
    for expected, (seq, text) in enumerate(rows, start):
        if seq != expected:
            raise _fail(backend, id, f"message row {expected} is missing (found row {seq!r})")
        if expected < known and reader is _read_v1 and _utf8_of(text) == seen_texts[expected]:
            messages.append(seen[expected])
            continue
        try:
            messages.append(reader(text))
        except (ValueError, TypeError) as e:
            raise _fail(backend, id, f"message row {seq}: {e}") from None
    if not isinstance(count, int) or len(messages) != count:
        count = count + start if isinstance(count, int) else count
        found = len(messages) + start
        raise _fail(backend, id, f"the head says {count!r} messages but {found} rows exist")
    return pvector(messages)


def read_joined(
    backend: str,
    id: str,
    query: Callable[[int], Sequence],
    memo: Memo,
    stamped: bool = True,
    split: Callable[[Sequence], tuple] = split_joined,
) -> PVector | None:
    """Return the transcript `query(k)` reads (see `split_joined`: the head, edit stamp
    and message rows from seq `k` on, in ONE statement: one snapshot), or None.

    `k` is the count of the longest transcript the memo knows (0: none): when the head
    and stamp vouch for it (`Memo.read_past`) only the rows past it are read and decoded;
    otherwise `query(0)` reads every row and all of it is checked (`decode_joined`), the
    rare second statement (history rewritten by another writer, rows changed by hand).
    Without edit stamps (`stamped` False: a database the triggers could not be added
    to) nothing vouches for what is known: every read is `query(0)`, all checked.
    `split` makes (head, rows, stamp) of what `query` returns: a backend that reads the
    head and the rows apart (in one snapshot) returns that triple itself (`split=tuple`).
    """
    if not stamped:
        head, messages, _ = split(query(0))
        return decode_joined(backend, id, head, messages, memo)
    known = memo.known(id)
    k = len(known.transcript) if known is not None else 0
    head, messages, stamp = split(query(k))
    if known is not None and head[0] is not None:
        got = memo.read_past(id, known, head, stamp, messages)
        if got is not None:
            return got
    if k:
        head, messages, stamp = split(query(0))
    return decode_joined(backend, id, head, messages, memo, stamp)


def decode_joined(
    backend: str, id: str, head: Sequence, messages: Sequence, memo: Memo, stamp: object = UNKNOWN
) -> PVector | None:
    """Return the transcript of a head `(version, count, digest)` and ALL its `(seq, body)`
    rows, read by one SQL statement (one snapshot) that always yields the head's columns
    (see `Memo.read`; `stamp`: the edit stamp read with them), or None.

    No head and no messages means absent (the memo then knows it as the empty
    transcript, which a first save appends to), no head but messages is corrupt.
    """
    version, count, digest = head
    if version is None and count is None:
        if messages:
            raise _fail(backend, id, "it has message rows but no head")
        memo.remember(id, pvector(), GENESIS, 0, (), stamp, True)
        return None
    return memo.read(backend, id, version, count, digest, messages, stamp)
