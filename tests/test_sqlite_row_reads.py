"""The SQLite store reads a conversation's rows as their bodies alone (their bytes, TEXT
or BLOB alike) only when its head proves them numbered 0..count-1; any other rows are read
as (seq, body) pairs, which name the bad one. Over real SQLite files."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolnexus.backends.sqlite import store as sq
from toolnexus.core.frozen import thaw
from toolnexus.store import StoreCorruptError
from toolnexus.store._split import Numbered


def _db(seqs, count, bodies=None) -> sqlite3.Connection:
    """A store's schema in memory: conversation 'a' with the head `count` and a row per seq."""
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.executescript(sq._SCHEMA)
    c.execute("INSERT INTO toolnexus_conversations VALUES ('a', 1, ?, 'd', 'e')", (count,))
    bodies = bodies or {}
    rows = [("a", s, bodies.get(s, f'{{"role":"user","content":"{s}"}}')) for s in seqs]
    c.executemany("INSERT INTO toolnexus_messages VALUES (?, ?, ?)", rows)
    return c


def _pairs(c, k):
    """The (seq, body) rows from seq k on, each body as text (a BLOB's decoded)."""
    sql = "SELECT seq, body FROM toolnexus_messages WHERE id = 'a' AND seq >= ? ORDER BY seq"
    return _as_text(c.execute(sql, (k,)))


def _as_text(rows):
    return [(seq, body.decode() if type(body) is bytes else body) for seq, body in rows]


@given(
    seqs=st.sets(st.integers(-2, 12), max_size=12),
    count=st.one_of(st.integers(0, 12), st.just("four")),
    k=st.integers(0, 12),
    blob=st.booleans(),
)
@example(seqs={0, 1, 2, 3}, count=4, k=1, blob=False)  # numbered: bodies alone
@example(seqs={0, 1, 3, 4}, count=4, k=0, blob=False)  # a gap, one past the count
@example(seqs={-1, 0, 1, 2}, count=4, k=0, blob=False)  # as many rows, one below 0
@example(seqs={-1, 0, 1, 2, 3}, count=4, k=0, blob=False)  # all, and one below 0
@example(seqs={0, 1, 2}, count=4, k=0, blob=False)  # one short
@example(seqs={0, 1, 2, 3}, count=4, k=0, blob=True)  # a body stored as a BLOB: bytes too
@example(seqs={0, 1, 2, 3}, count="four", k=0, blob=False)  # a count that is not an int
@example(seqs=set(), count=0, k=0, blob=False)
@example(seqs={0, 2}, count=3, k=2, blob=False)  # a gap below k: what is read is numbered
def test_a_snapshot_reads_what_the_pairs_say_and_bodies_alone_only_when_numbered(
    seqs, count, k, blob
):
    bodies = {min(seqs): b'{"role":"user","content":"b"}'} if blob and seqs else {}
    c = _db(sorted(seqs), count, bodies)
    head, rows, stamp = sq._snapshot(c, sq._GET_HEAD, "a", k)
    assert head == (1, count, "d") and stamp == "e"
    assert _as_text(rows) == _pairs(c, k)  # the very rows, whichever way they were read
    assert all(type(body) is bytes for _, body in rows)  # as stored: decoding names a bad one
    if type(rows) is Numbered:  # only rows k..count-1, exactly (rows below k: not read)
        assert sorted(s for s in seqs if s >= k) == list(range(k, count))
    if type(count) is int and sorted(seqs) == list(range(count)) and k <= count:
        assert type(rows) is Numbered


def test_an_absent_conversation_reads_no_rows():
    c = _db([], 0)
    assert sq._snapshot(c, sq._GET_HEAD, "b", 0) == ((None, None, None), [], None)


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE toolnexus_messages SET seq = 9 WHERE id = 'a' AND seq = 2",  # a gap, one past
        "UPDATE toolnexus_messages SET seq = -1 WHERE id = 'a' AND seq = 3",  # one below 0
        'INSERT INTO toolnexus_messages VALUES (\'a\', 4, \'{"role":"user","content":"x"}\')',
    ],
)
def test_rows_numbered_otherwise_are_corrupt_read_cold_or_warm(tmp_path, edit):
    path = tmp_path / "chat.db"
    messages = [{"role": "user", "content": str(i)} for i in range(4)]
    warm = sq.sqlite_store(path)
    warm["save"]("a", messages)
    with sqlite3.connect(path) as c:
        c.execute(edit)
    for store in (sq.sqlite_store(path), warm):
        with pytest.raises(StoreCorruptError, match="'a'"):
            store["get"]("a")


def test_a_body_stored_as_a_blob_reads_as_its_text(tmp_path):
    path = tmp_path / "chat.db"
    messages = [{"role": "user", "content": str(i)} for i in range(4)]
    sq.sqlite_store(path)["save"]("a", messages)
    with sqlite3.connect(path) as c:
        c.execute("UPDATE toolnexus_messages SET body = CAST(body AS BLOB) WHERE seq = 1")
        body = c.execute("SELECT body FROM toolnexus_messages WHERE seq = 1").fetchone()[0]
    assert type(body) is bytes
    assert thaw(sq.sqlite_store(path)["get"]("a")) == messages


@pytest.mark.parametrize("known", [False, True])
def test_a_row_that_is_not_utf8_is_corrupt_and_named_not_unavailable(tmp_path, known):
    """SQLite hands back a TEXT value as it was written; one that is not UTF-8 is a
    corrupt row (named), not an unavailable store (which a caller would retry)."""
    path = tmp_path / "chat.db"
    store = sq.sqlite_store(path)
    store["save"]("a", [{"role": "user", "content": str(i)} for i in range(3)])
    if known:
        store["get"]("a")  # a reader that remembers it (the edit below moves the
        # edit stamp, so its next read is whole)
        store["save"]("a", [*store["get"]("a"), {"role": "user", "content": "3"}])
    bad = '{"role":"user","content":"\xff"}'.encode("latin-1").hex()
    with sqlite3.connect(path) as c:
        c.execute(f"UPDATE toolnexus_messages SET body = CAST(X'{bad}' AS TEXT) WHERE seq = 2")
    for reader in (sq.sqlite_store(path), store):
        with pytest.raises(StoreCorruptError, match="'a'.*row 2"):
            reader["get"]("a")
