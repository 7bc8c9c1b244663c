"""The SQLite store: the embedded durable default (stdlib sqlite3, WAL, one row per message)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path

from ...core.bounds import memo_bytes_bound
from ...core.transcript import freeze_transcript
from ...store import _rows
from ...store._split import Numbered
from ...store.fused import derive, fuse, view
from ...store.locks import paired_lock
from ..file.lock import file_lock_beside
from ..paths import require_parent_dir
from .connect import read_only, sqlite_errors, sqlite_wal

__all__ = ["sqlite_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolnexus_conversations (
    id TEXT PRIMARY KEY, version INTEGER NOT NULL, count INTEGER NOT NULL, digest TEXT NOT NULL,
    edited TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS toolnexus_messages (
    id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (id, seq)
) WITHOUT ROWID;
"""

# Every message row changed or deleted, by this library (a replace, a delete) or by
# anyone else (by hand, another tool), gives the conversation's head a fresh "edited"
# stamp: a read that finds the stamp it knew (and the digest chained on over the new
# rows) knows that no row it holds has changed, and reads only the rows past them.
# Inserts need none: a new row is past what a reader knows, or its count says so.
_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS toolnexus_messages_updated AFTER UPDATE ON toolnexus_messages
BEGIN
  UPDATE toolnexus_conversations SET edited = hex(randomblob(8)) WHERE id IN (OLD.id, NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS toolnexus_messages_deleted AFTER DELETE ON toolnexus_messages
BEGIN
  UPDATE toolnexus_conversations SET edited = hex(randomblob(8)) WHERE id = OLD.id;
END;
"""

# The head, then the rows from seq ? on (what this process knows is not read again: see
# _rows.read_joined), in one read transaction: one consistent snapshot even while another
# process writes. Apart, not joined: a join repeats the head's four columns on every row,
# which more than doubles what reading a long conversation costs here. The head is read
# by id alone, so "no head, yet rows" (corrupt) differs from "absent".
# With the head, the least and greatest seq of its rows (an index seek each): with the
# head's count they tell whether the rows can be read as their bodies alone (_numbered).
_GET_HEAD = """
SELECT version, count, digest, edited,
  (SELECT min(seq) FROM toolnexus_messages WHERE id = c.id),
  (SELECT max(seq) FROM toolnexus_messages WHERE id = c.id)
FROM toolnexus_conversations AS c WHERE id = ?
"""
# Rows come as their bytes: SQLite gives back a TEXT value as it was written, and one that
# is not UTF-8 is then a corrupt row that decoding names, where reading it as text would
# fail the whole read as if the file were unavailable. And bytes are what the memo keeps
# and a request carries: read as text, each row would be decoded here, then encoded again.
_GET_ROWS = (
    "SELECT seq, CAST(body AS BLOB) FROM toolnexus_messages WHERE id = ? AND seq >= ? ORDER BY seq"
)
_GET_BODIES = (
    "SELECT CAST(body AS BLOB) FROM toolnexus_messages WHERE id = ? AND seq >= ? ORDER BY seq"
)
# The same on a read-only file made before edit stamps (nothing could give it them): its
# stamp is never known, so every read compares all rows, as reads always did.
_GET_HEAD_UNSTAMPED = _GET_HEAD.replace("edited", "NULL")
_first = itemgetter(0)
_HEAD = "SELECT version, count, digest FROM toolnexus_conversations WHERE id = ?"
_PUT_HEAD = """
INSERT INTO toolnexus_conversations (id, version, count, digest) VALUES (?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET version = excluded.version, count = excluded.count,
digest = excluded.digest
"""


def _connect(path: str, timeout: float, durable: bool) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=True)
    try:
        sqlite_wal(conn, timeout)
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        conn.executescript(_SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def _upgrade(conn: sqlite3.Connection) -> bool:
    """Give a file made before edit stamps its "edited" column and triggers (a second
    process doing it at the same time finds it done); return whether the file has them
    (not a read-only one that lacked them)."""
    names = "('toolnexus_messages_updated', 'toolnexus_messages_deleted')"
    found = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE name IN {names}").fetchone()
    if found[0] == 2:
        return True
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(toolnexus_conversations)")}
        if "edited" not in columns:
            conn.execute("ALTER TABLE toolnexus_conversations ADD COLUMN edited TEXT")
        conn.executescript(_TRIGGERS)
    except sqlite3.OperationalError as e:
        if read_only(e):
            return False
        if "duplicate column" not in str(e):
            raise
        conn.executescript(_TRIGGERS)
    return True


def sqlite_store(
    path: str | os.PathLike,
    *,
    timeout: float = 30.0,
    durable: bool = True,
    lock_timeout: float = 60.0,
) -> dict:
    """Return a durable store in the SQLite file at `path` (created if missing).

    One row per message: a save that extends the stored transcript appends only the
    new messages; one that rewrites history replaces it, in one transaction. Each save
    and get is atomic from several threads (a connection per thread) and processes
    (WAL; writers wait up to `timeout` seconds for each other). Its "lock" is a
    `file_lock` in the directory `PATH-locks` beside the file, which the client takes
    by default around get -> run -> save: processes on one host asking on one id lose
    no turn (a lock not taken within `lock_timeout` seconds raises LockTimeoutError).
    Every save is fsynced; `durable=False` skips that (synchronous=NORMAL): much
    faster, and a power cut may then lose the last saves, though never corrupt the file.
    """
    name = str(path)
    if name == ":memory:" or name.startswith("file::memory:"):
        raise ValueError("sqlite_store needs a file path; use in_memory_store() for memory")
    require_parent_dir(Path(name), f"sqlite_store({name!r})")
    st = _Sqlite(name, timeout, durable)

    def get(id: str):
        return _get(st, id)

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        _save(st, id, transcript)

    def delete(id: str) -> None:
        _delete(st, id)

    def ids() -> tuple:
        return _ids(st)

    def fork(src: str, dst: str, at: int | None = None, check=None) -> int:
        """Copy `src` (its first `at` messages) to `dst` in the database: see store.fork."""
        for id in (src, dst):
            _rows.check_text_id(id, st.desc)
        st.memo.forget(dst)
        with _errors(st, src), _transaction(st) as c:
            return _fork(c, st.desc, src, dst, at, check)

    lock = paired_lock(lambda: file_lock_beside(name, lock_timeout))
    return derive(
        {
            "get": get,
            "save": save,
            "delete": delete,
            "ids": ids,
            "lock": lock,
            "desc": st.desc,
            "fused": {"view": view(freeze_transcript), "fork": fuse(fork, "get", "save")},
        }
    )  # binds the fused calls to these operations


class _Sqlite:
    """What one SQLite store holds: its file, a connection per thread, its memo."""

    __slots__ = ("name", "timeout", "durable", "desc", "local", "memo")

    def __init__(self, name: str, timeout: float, durable: bool):
        self.name, self.timeout, self.durable = name, timeout, durable
        self.desc = f"sqlite({name!r})"
        self.local = threading.local()
        self.memo = _rows.Memo(max_bytes=memo_bytes_bound(os.environ))


def _conn(st: _Sqlite) -> sqlite3.Connection:
    # A connection per thread (and per process, should the store cross a fork).
    local = st.local
    c = getattr(local, "conn", None)
    if c is None or local.pid != os.getpid():
        c = local.conn = _connect(st.name, st.timeout, st.durable)
        local.pid = os.getpid()
        try:
            local.get = _GET_HEAD if _upgrade(c) else _GET_HEAD_UNSTAMPED
        except BaseException:
            local.conn = None
            c.close()
            raise
    return c


def _errors(st: _Sqlite, id: str | None):
    """Turn sqlite3's errors into the store's: read-only, unavailable, corrupt."""
    return sqlite_errors(st.desc, f"conversation {id!r:.120} in " if id is not None else "")


@contextmanager
def _transaction(st: _Sqlite):
    c = _conn(st)
    c.execute("BEGIN IMMEDIATE")  # take the write lock first: no upgrade deadlocks
    try:
        yield c
        c.execute("COMMIT")
    except BaseException:
        if c.in_transaction:  # also after a failed COMMIT: never leave one open
            c.execute("ROLLBACK")
        raise


def _get(st: _Sqlite, id: str):
    _rows.check_text_id(id, st.desc)
    with _errors(st, id):
        c = _conn(st)
    head = st.local.get

    def query(k: int) -> tuple:
        with _errors(st, id):
            return _snapshot(c, head, id, k)

    return _rows.read_joined(st.desc, id, query, st.memo, head is _GET_HEAD, split=tuple)


def _snapshot(c: sqlite3.Connection, head_sql: str, id: str, k: int) -> tuple:
    """Return (head, the (seq, body) rows from seq k on, edit stamp) of one snapshot."""
    own = not c.in_transaction  # a read inside a caller's transaction is in its snapshot
    if own:
        c.execute("BEGIN")
    try:
        found = c.execute(head_sql, (id,)).fetchone()
        rows = _numbered(c, id, k, found)
        if rows is None:  # read a (seq, body) row per message: decoding names the bad one
            rows = c.execute(_GET_ROWS, (id, k)).fetchall()
    finally:
        if own:
            c.execute("COMMIT")  # a read transaction: nothing to write, its snapshot ends
    if found is None:
        return (None, None, None), rows, None
    return tuple(found[:3]), rows, found[3]


def _numbered(c: sqlite3.Connection, id: str, k: int, found: tuple | None) -> Numbered | None:
    """Return the rows from seq `k` on as their bodies alone, when the head `found` proves
    them rows k..count-1 (else None).

    Its count and least and greatest seq say the rows from seq k on are exactly
    k..count-1 whenever count - k of them come (seqs are unique: the key; none lies past
    count-1, and with k 0 none below 0 goes unread); rows below a k over 0 are not read,
    what the memo knows of them vouched for by the edit stamp. Bodies alone skip a
    (seq, body) pair per row, a pass checking the seqs, and the row tuples the collector
    would walk while they are held (each here is dropped as soon as its body is taken).
    """
    if found is None or type(found[1]) is not int or not 0 <= k <= found[1]:
        return None
    count = found[1]
    if found[4:] != ((0, count - 1) if count else (None, None)):
        return None
    bodies = tuple(map(_first, c.execute(_GET_BODIES, (id, k))))
    if len(bodies) != count - k or not all(map(bytes.__instancecheck__, bodies)):
        return None  # a gap, or a NULL body (written by another tool)
    return Numbered(k, bodies)


def _save(st: _Sqlite, id: str, transcript: Sequence[Mapping]) -> None:
    _rows.check_text_id(id, st.desc)
    frozen = _rows.frozen(transcript)
    with _errors(st, id), _transaction(st) as c:
        stored = c.execute(_HEAD, (id,)).fetchone()
        plan = _rows.plan_save(id, _rows.Head(*stored) if stored else None, frozen, st.memo)
        if not plan.append:
            c.execute("DELETE FROM toolnexus_messages WHERE id = ?", (id,))
        c.executemany(
            "INSERT INTO toolnexus_messages (id, seq, body) VALUES (?, ?, ?)",
            ((id, plan.start + i, body) for i, body in enumerate(plan.encoded)),
        )
        c.execute(_PUT_HEAD, (id, *plan.head))
    st.memo.saved(id, frozen, plan)


def _delete(st: _Sqlite, id: str) -> None:
    _rows.check_text_id(id, st.desc)
    st.memo.forget(id)
    with _errors(st, id), _transaction(st) as c:
        c.execute("DELETE FROM toolnexus_messages WHERE id = ?", (id,))
        c.execute("DELETE FROM toolnexus_conversations WHERE id = ?", (id,))


def _ids(st: _Sqlite) -> tuple:
    with _errors(st, None):
        rows = _conn(st).execute("SELECT id FROM toolnexus_conversations ORDER BY id").fetchall()
    return tuple(r[0] for r in rows)


def _fork(c: sqlite3.Connection, desc: str, src: str, dst: str, at, check) -> int:
    """Copy the rows of `src` (the first `at`) to `dst` with one INSERT ... SELECT."""
    from ...store.forks import decode_row, forked_digest

    head = c.execute(_HEAD, (src,)).fetchone()
    if head is None:
        raise KeyError(f"no conversation {src!r} to fork")
    version, count, digest = head
    n = count if at is None else at
    if n > count:
        raise ValueError(f"at={at} is past the end of {src!r} ({count} messages)")
    if check is not None and n < count:
        row = c.execute("SELECT body FROM toolnexus_messages WHERE id = ? AND seq = ?", (src, n))
        check(decode_row(desc, src, version, row.fetchone()[0]))
    c.execute("DELETE FROM toolnexus_messages WHERE id = ?", (dst,))
    c.execute(
        "INSERT INTO toolnexus_messages (id, seq, body)"
        " SELECT ?, seq, body FROM toolnexus_messages WHERE id = ? AND seq < ?",
        (dst, src, n),
    )
    c.execute(_PUT_HEAD, (dst, version, n, forked_digest(digest, count, n)))
    return n
