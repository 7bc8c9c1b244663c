"""A snapshot's message rows as the databases give them, made `(seq, text)` rows, pure.

A row per message (`split_joined`), or every row gathered into ONE array by the database
(`split_aggregated`): one value to receive instead of a row per message, made
`Numbered` rows: the rows k..k+n-1, held as their texts (or UTF-8) alone, so a read need
not build (seq, text) pairs nor check their numbering again (a pass each over the rows).
Whatever
is not exactly its rows gives None: the caller reads a row per message, which names the
bad one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Numbered", "split_joined", "split_aggregated"]


class Numbered(Sequence):
    """The `(seq, text)` rows start..start+len(texts)-1, as their texts alone (str, or
    UTF-8 bytes: as the database gave them).

    >>> rows = Numbered(3, ("a", "b"))
    >>> list(rows), rows[1], rows[1:], len(rows)
    ([(3, 'a'), (4, 'b')], (4, 'b'), [(4, 'b')], 2)
    """

    # (no mutate: the class is made before a mutant's code is swapped in)
    __slots__ = ("start", "texts")  # pragma: no mutate

    def __init__(self, start: int, texts: tuple[str, ...]) -> None:
        self.start, self.texts = start, texts

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: Any) -> Any:
        seqs = range(self.start, self.start + len(self.texts))
        if isinstance(i, slice):
            # a range and a tuple of one length, sliced alike (no mutate: strict or not)
            return list(zip(seqs[i], self.texts[i], strict=True))  # pragma: no mutate
        return (seqs[i], self.texts[i])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list of its pairs, like a list

    def __repr__(self) -> str:
        return f"Numbered({self.start}, {self.texts!r})"


def split_joined(rows: Sequence[Sequence]) -> tuple[tuple, list, object]:
    """Return the head, the `(seq, body)` rows and the edit stamp of a key-first outer
    join's rows `(version, count, digest, edited, seq, body)` (see `_rows.decode_joined`)."""
    if not rows:
        return (None, None, None), [], None
    head = tuple(rows[0][:3])
    # the join found no message row (seq and body are NULL together: no mutate on 4)
    if rows[0][4] is None:  # pragma: no mutate
        return head, [], rows[0][3]
    return head, [(seq, body) for *_, seq, body in rows], rows[0][3]


def split_aggregated(rows: Sequence[Sequence], k: int) -> tuple[tuple, Sequence, object] | None:
    """Return what `split_joined` returns, of ONE row `(version, count, digest, edited, n,
    lo, hi, bodies)`: the head, and the n message rows from seq k on as one array in seq
    order (`bodies`), with their first and last seq; None when they are not exactly the
    rows k..k+n-1, one text (or UTF-8) each (read them a row per message then:
    decode_rows names the bad one). Seqs are unique integers (the key), so first and
    last tell them."""
    version, count, digest, stamp, n, lo, hi, bodies = rows[0]
    head = (version, count, digest)
    if not n:
        return head, [], stamp
    if len(bodies) != n or lo != k or hi != k + n - 1:
        return None
    texts = tuple(bodies)
    if not all(map(bytes.__instancecheck__, texts)) and not all(map(str.__instancecheck__, texts)):
        return None  # a NULL body (another tool's), or rows of both kinds
    return head, Numbered(k, texts), stamp
