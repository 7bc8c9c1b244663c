"""The SQLite store: the embedded durable default (stdlib sqlite3, WAL, one row per message)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..core.transcript import freeze_transcript
from . import _rows
from ._connect import read_only, sqlite_wal
from .errors import StoreCorruptError, StoreReadOnlyError, StoreUnavailableError
from .file import file_lock_beside
from .locks import paired_lock

__all__ = ["sqlite_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolnexus_conversations (
    id TEXT PRIMARY KEY, version INTEGER NOT NULL, count INTEGER NOT NULL, digest TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS toolnexus_messages (
    id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (id, seq)
) WITHOUT ROWID;
"""

# One statement, so it reads one consistent snapshot even while another process writes.
# One statement, so it reads one consistent snapshot even while another process writes;
# keyed on the id first, so "no head, yet rows" (corrupt) differs from "absent".
_GET = """
SELECT c.version, c.count, c.digest, m.seq, m.body FROM (SELECT ? AS id) k
LEFT JOIN toolnexus_conversations c ON c.id = k.id
LEFT JOIN toolnexus_messages m ON m.id = k.id ORDER BY m.seq
"""
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
    if Path(name).parent != Path(""):
        Path(name).parent.mkdir(parents=True, exist_ok=True)
    desc = f"sqlite({name!r})"
    local = threading.local()
    memo = _rows.Memo()

    def conn() -> sqlite3.Connection:
        # A connection per thread (and per process, should the store cross a fork).
        c = getattr(local, "conn", None)
        if c is None or local.pid != os.getpid():
            c = local.conn = _connect(name, timeout, durable)
            local.pid = os.getpid()
        return c

    @contextmanager
    def errors(id: str | None):
        try:
            yield
        except sqlite3.OperationalError as e:  # locked past the timeout, unopenable file
            if read_only(e):
                raise StoreReadOnlyError(
                    f"{desc} is read-only ({e}): nothing can be saved there; make the file "
                    "and its directory writable, or use another path"
                ) from None
            raise StoreUnavailableError(f"{desc} is unavailable: {e}") from None
        except sqlite3.DatabaseError as e:  # not a database, malformed, constraint broken
            what = f"conversation {id!r:.120} in " if id is not None else ""
            raise StoreCorruptError(f"{what}{desc} is corrupt: {e}") from None

    @contextmanager
    def transaction():
        c = conn()
        c.execute("BEGIN IMMEDIATE")  # take the write lock first: no upgrade deadlocks
        try:
            yield c
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:  # also after a failed COMMIT: never leave one open
                c.execute("ROLLBACK")
            raise

    def get(id: str):
        _rows.check_id(id)
        with errors(id):
            rows = conn().execute(_GET, (id,)).fetchall()
        return _rows.decode_joined(desc, id, *_rows.split_joined(rows), memo)

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        _rows.check_id(id)
        frozen = _rows.frozen(transcript)
        with errors(id), transaction() as c:
            stored = c.execute(_HEAD, (id,)).fetchone()
            plan = _rows.plan_save(id, _rows.Head(*stored) if stored else None, frozen, memo)
            if not plan.append:
                c.execute("DELETE FROM toolnexus_messages WHERE id = ?", (id,))
            c.executemany(
                "INSERT INTO toolnexus_messages (id, seq, body) VALUES (?, ?, ?)",
                ((id, plan.start + i, body) for i, body in enumerate(plan.encoded)),
            )
            c.execute(_PUT_HEAD, (id, *plan.head))
        memo.saved(id, frozen, plan)

    def delete(id: str) -> None:
        memo.forget(id)
        with errors(id), transaction() as c:
            c.execute("DELETE FROM toolnexus_messages WHERE id = ?", (id,))
            c.execute("DELETE FROM toolnexus_conversations WHERE id = ?", (id,))

    def ids() -> tuple:
        with errors(None):
            rows = conn().execute("SELECT id FROM toolnexus_conversations ORDER BY id").fetchall()
        return tuple(r[0] for r in rows)

    def fork(src: str, dst: str, at: int | None = None, check=None) -> int:
        """Copy `src` (its first `at` messages) to `dst` in the database: see store.fork."""
        memo.forget(dst)
        with errors(src), transaction() as c:
            return _fork(c, desc, src, dst, at, check)

    fork.get, fork.save = get, save  # type: ignore[attr-defined]  # the store it belongs to
    save.stored_view = freeze_transcript  # type: ignore[attr-defined]  # get returns it
    lock = paired_lock(lambda: file_lock_beside(name, lock_timeout))
    return {
        "get": get,
        "save": save,
        "delete": delete,
        "ids": ids,
        "fork": fork,
        "lock": lock,
        "desc": desc,
    }


def _fork(c: sqlite3.Connection, desc: str, src: str, dst: str, at, check) -> int:
    """Copy the rows of `src` (the first `at`) to `dst` with one INSERT ... SELECT."""
    from .forks import decode_row, forked_digest

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
