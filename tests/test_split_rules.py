"""The rules of store/_split.py: `Numbered` rows are their `(seq, text)` pairs in every way
a read looks at them, and a read given them gives what it gives for the pairs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.frozen import freeze, known_json
from toolnexus.store import _rows
from toolnexus.store._split import Numbered, split_aggregated
from toolnexus.store.errors import StoreCorruptError

_texts = st.lists(st.text(max_size=5), max_size=6).map(tuple)


@given(st.integers(0, 50), _texts, st.data())
def test_numbered_rows_are_their_pairs(start, texts, data):
    rows, pairs = (
        Numbered(start, texts),
        list(zip(range(start, start + len(texts)), texts, strict=True)),
    )
    assert list(rows) == pairs and len(rows) == len(pairs) and bool(rows) == bool(pairs)
    assert rows == pairs and rows == Numbered(start, texts) and rows != [*pairs, (0, "")]
    for i in range(-len(pairs), len(pairs)):
        assert rows[i] == pairs[i]
    for i in (len(pairs), -len(pairs) - 1):
        with pytest.raises(IndexError):
            rows[i]
    lo, hi = data.draw(st.integers(-8, 8)), data.draw(st.integers(-8, 8))
    step = data.draw(st.sampled_from([1, 2, -1]))
    assert rows[lo:hi:step] == pairs[lo:hi:step]
    assert repr(rows) == f"Numbered({start}, {texts!r})"


T4 = freeze(
    [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "meta": [1, {"a": None}]},
        {"role": "user", "content": "bye"},
    ]
)
TEXTS = tuple(_rows.encode_message(m) for m in T4)
UTF8 = tuple(text.encode() for text in TEXTS)  # what the memo keeps of the rows
HEAD = (1, len(T4), _rows.digest_of(T4))


def _memo(known: int | None, changed: bool = False) -> _rows.Memo:
    """A memo that saw the first `known` messages stored (None: nothing; `changed`: with
    another first message)."""
    memo = _rows.Memo()
    if known is not None:
        t = T4[:known]
        if changed and known:
            t = t.set(0, freeze({"role": "system", "content": "be long"}))
        texts = [_rows.encode_message(m).encode() for m in t]
        memo.remember("c", t, _rows.digest_of(t), 0, texts, "s1", True)
    return memo


@pytest.mark.parametrize("known", [None, 0, 2, 4])
@pytest.mark.parametrize("changed", [False, True])
def test_a_read_of_numbered_rows_is_a_read_of_their_pairs(known, changed):
    pairs = list(enumerate(TEXTS))
    a, b = _memo(known, changed), _memo(known, changed)
    got_pairs = a.read("db", "c", *HEAD, pairs, "s2")
    got = b.read("db", "c", *HEAD, Numbered(0, TEXTS), "s2")
    assert got == got_pairs == T4
    # the same messages reused from what the memo knew (by identity), the same remembered
    assert [m is t for m, t in zip(got, T4, strict=True)] == [
        m is t for m, t in zip(got_pairs, T4, strict=True)
    ]
    assert tuple(b.known("c").texts) == tuple(a.known("c").texts) == UTF8


def test_numbered_rows_that_are_not_all_the_rows_are_corrupt_as_pairs_are():
    for rows in (Numbered(1, TEXTS[1:]), Numbered(0, TEXTS[:3])):
        for given_rows in (rows, list(rows)):
            with pytest.raises(StoreCorruptError):
                _rows.Memo().read("db", "c", *HEAD, given_rows)


@pytest.mark.parametrize("k", [0, 1, 3, 4])
def test_read_past_takes_numbered_rows_as_their_pairs(k):
    def past(rows):
        memo = _memo(k)
        got = memo.read_past("c", memo.known("c"), HEAD, "s1", rows)
        return got, memo

    got, memo = past(Numbered(k, TEXTS[k:]))
    want, _ = past(list(enumerate(TEXTS[k:], k)))
    assert got == want == T4 and tuple(memo.known("c").texts) == UTF8
    assert past(Numbered(k + 1, TEXTS[k:]))[0] is None  # numbered from elsewhere


def _aggregated(bodies, k, n=None, lo=None, hi=None):
    n = len(bodies) if n is None else n
    lo = k if lo is None else lo
    hi = k + len(bodies) - 1 if hi is None else hi
    return [(1, 9, "d", "s", n, lo, hi, list(bodies) if bodies else None)]


@given(st.integers(0, 9), st.lists(st.text()))
def test_split_aggregated_gives_numbered_rows_or_none(k, bodies):
    head, rows, stamp = split_aggregated(_aggregated(bodies, k), k)
    assert head == (1, 9, "d") and stamp == "s"
    assert rows == list(zip(range(k, k + len(bodies)), bodies, strict=True))
    assert type(rows) is Numbered or rows == []
    if bodies:
        assert split_aggregated(_aggregated(bodies, k, n=len(bodies) + 1), k) is None
        assert split_aggregated(_aggregated(bodies, k, lo=k + 1), k) is None
        assert split_aggregated(_aggregated(bodies, k, hi=k + len(bodies)), k) is None
        assert split_aggregated(_aggregated([*bodies, "x"], k, n=len(bodies)), k) is None
        utf8 = [body.encode(errors="surrogatepass") for body in bodies]  # bytea, say
        _, rows, _ = split_aggregated(_aggregated(utf8, k), k)
        assert type(rows) is Numbered and rows == list(enumerate(utf8, k))
        assert split_aggregated(_aggregated([*bodies[:-1], None], k), k) is None  # a NULL
        if len(bodies) > 1:  # rows of both kinds
            assert split_aggregated(_aggregated([*bodies[:-1], utf8[-1]], k), k) is None


@pytest.mark.parametrize("as_bytes", [True, False])
def test_a_list_read_keeps_bytes_as_each_message_json(as_bytes):
    bodies = [t.encode() for t in TEXTS] if as_bytes else list(TEXTS)
    got = _rows.Memo().read_list("db", "c", *HEAD, bodies)
    assert got == T4 and [known_json(m) for m in got] == [t.encode() for t in TEXTS]
    if as_bytes:  # the driver's own bytes, not made again
        assert all(known_json(m) is b for m, b in zip(got, bodies, strict=True))
    mixed = [bodies[0], *(t.encode() if type(t) is str else t.decode() for t in bodies[1:])]
    got = _rows.Memo().read_list("db", "c", *HEAD, mixed)
    assert got == T4 and [known_json(m) for m in got] == [t.encode() for t in TEXTS]
