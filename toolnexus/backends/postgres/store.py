"""The PostgreSQL store: one row per message, a head row per conversation (psycopg 3 + pool)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from ...core.bounds import memo_bytes_bound
from ...core.extras import needs_extra
from ...core.transcript import freeze_transcript
from ...store import _rows
from ...store.errors import StoreCorruptError, StoreUnavailableError
from ...store.fused import derive, fuse, view
from ...store.locks import LockLostError, paired_lock
from . import connect as _connect
from . import sql as _sql
from .lock import postgres_lock

__all__ = ["postgres_store"]


def _array(texts: Sequence[str]) -> str:
    """Return message rows as one JSON array parameter: psycopg escapes a text[] element by
    element with a regular expression, json.dumps does the lot in C."""
    return json.dumps(texts, ensure_ascii=False)


def run(conn: Any, query: str, params: Sequence[Any] = (), binary: bool = False) -> Any:
    """Execute one statement of the store's on `conn` through psycopg; return its cursor.

    Prepared by psycopg once per session (`prepare=True`: the statements run on every
    exchange), unless the connection's `prepare_threshold` is None (PgBouncer in
    transaction mode), which psycopg honours by preparing nothing. `binary`: results in
    psycopg's binary format (the reads: an array of bodies is received without parsing).
    """
    return conn.execute(query, params, prepare=True, binary=binary)


class StoreRefusedError(StoreUnavailableError):
    """The server answered, and refused the statement (not a lost connection)."""


def _check_id(id: Any) -> str:
    _rows.check_text_id(id, "postgres_store")
    if "\x00" in id:
        raise ValueError("a PostgreSQL store cannot keep a conversation id containing NUL")
    return id


def postgres_store(
    pool_or_dsn: Any,
    table: str = "toolnexus_messages",
    *,
    timeout: float = 10.0,
    lock_timeout: float = 60.0,
) -> dict:
    """Return a durable store in PostgreSQL (a psycopg_pool pool or a DSN).

    Messages go in `table` (one row each), heads in `{table}_heads`; both are created
    if missing. Each save is one transaction: it appends only the new messages when
    the stored transcript is a prefix of the new one, else replaces them. A pool made
    from a DSN opens on first use and is closed by the store's "close".

    Its "lock" is a `postgres_lock` (an advisory lock per id), which the client takes by
    default around get -> run -> save: processes and hosts asking on one id lose no
    turn. From a DSN the lock has a pool of its own (closed by "close" too); given a
    pool, the lock shares it and holds at most `max_size - 1` of its connections (one
    per exchange in flight), so the store always has one: size the pool for the
    exchanges you run at once, plus one. A lock not taken within `lock_timeout` seconds
    raises LockTimeoutError. `postgres_backend` bundles it with a message log.
    """
    with needs_extra("postgres_store"):
        import psycopg  # noqa: F401

    pool, address, owned = _connect.pg_pool(pool_or_dsn, timeout=timeout)
    return open_store(pool, address, owned, table, timeout, lock_timeout)


def open_store(
    pool: Any,
    address: str,
    owned: bool,
    table: str,
    timeout: float,
    lock_timeout: float,
    keep: int = 1,
) -> dict:
    """Return the store on `pool`; a lock sharing `pool` holds at most all but `keep` of
    its connections.

    Its fused calls (see store.fused): "view", "fork", "lock_load" and "save_release" (on
    the connection the lock holds), and "save_logged" and "save_logged_release", which
    record a message log's rows in the save's own statement when the log is in this
    database (its "rows" declare the same `where`).
    """
    st = _Pg(
        pool, address, owned, table, timeout, _store_lock(pool, owned, timeout, lock_timeout, keep)
    )

    def get(id: str):
        return _get(st, id)

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        _write(st, id, transcript)

    def delete(id: str) -> None:
        _delete(st, id)

    def ids() -> tuple:
        return _ids(st)

    def close() -> None:
        """Close the pools the store made from a DSN (a pool you gave stays yours)."""
        st.lock.close()
        if owned:
            pool.close()

    return derive(
        {
            "get": get,
            "save": save,
            "delete": delete,
            "ids": ids,
            "close": close,
            "lock": st.lock,
            "desc": st.desc,
            "fused": _fused_calls(st, address),
        }
    )  # binds the fused calls to these operations


def _fused_calls(st: _Pg, address: str) -> dict:
    """Return the store's fused calls, each a top-level function on its state."""
    where = _connect.database(address)
    return {
        "view": view(freeze_transcript),
        "fork": fuse(partial(_fork_in, st), "get", "save"),
        "lock_load": fuse(partial(_lock_load, st), "get", "lock"),
        "save_release": fuse(partial(_save_release, st), "save", "lock"),
        "save_logged": fuse(partial(_save_logged, st), "save", where=where),
        "save_logged_release": fuse(
            partial(_save_logged_release, st), "save", "lock", where=where
        ),  # fmt: skip
    }


class _Pg:
    """What one PostgreSQL store holds: its pool, statements, memo and lock."""

    __slots__ = ("pool", "owned", "table", "timeout", "sql", "fork_sql", "desc", "memo",
                 "ready", "created", "lock", "stamped")  # fmt: skip

    def __init__(self, pool: Any, address: str, owned: bool, table: str, timeout: float, lock):
        self.pool, self.owned, self.table, self.timeout = pool, owned, table, timeout
        self.sql, self.fork_sql = _sql.statements(table), _sql.fork_statements(table)
        self.desc = f"postgres({address!r}, table={table!r})"
        self.memo = _rows.Memo(max_bytes=memo_bytes_bound(os.environ))
        self.ready = threading.Lock()
        self.created: list[bool] = []
        self.lock = lock
        self.stamped = False  # the table has edit stamps (known once created: _prepare)


def _store_lock(pool: Any, owned: bool, timeout: float, lock_timeout: float, keep: int) -> Any:
    """Return the store's lock: on connections of its own from a DSN (it holds one for a
    whole exchange, and a pool of one connection could not serve both), else sharing
    `pool` and holding at most all but `keep` of its connections."""
    size = getattr(pool, "max_size", None) or 2
    if owned or (size < 2 and getattr(pool, "conninfo", None)):
        target = pool.conninfo
        return paired_lock(
            lambda: postgres_lock(target, timeout=lock_timeout, connect_timeout=timeout)
        )
    held = max(1, size - keep)
    return paired_lock(
        lambda: postgres_lock(pool, timeout=lock_timeout, connect_timeout=timeout, max_held=held)
    )


@contextmanager
def _errors(st: _Pg, id: str | None):
    """Turn psycopg's errors into the store's: too long an id, corrupt, down, refused."""
    import psycopg

    try:
        yield
    except StoreUnavailableError:
        raise
    except psycopg.errors.ProgramLimitExceeded as e:  # an id over the index's row size
        size = len(id.encode("utf-8", "surrogatepass")) if isinstance(id, str) else 0
        raise ValueError(
            f"{st.desc}: conversation id {id!r:.60} is too long for PostgreSQL's index "
            f"({size:,} bytes; keep ids under about 2,000): use a shorter id, or hash "
            f"long ones (sanitize_ids): {' '.join(str(e).split()):.200}"
        ) from None
    except (psycopg.IntegrityError, psycopg.DataError) as e:
        what = f"conversation {id!r:.120} in " if id is not None else ""
        raise StoreCorruptError(f"{what}{st.desc} is corrupt: {e}") from None
    except Exception as e:
        if _connect.is_pg_unavailable(e):
            raise _connect.pg_unavailable(st.pool, e, st.desc) from None
        if isinstance(e, psycopg.Error):
            raise StoreRefusedError(f"{st.desc} refused: {type(e).__name__}: {e}") from None
        raise


def _prepare(st: _Pg) -> None:
    """Open a pool we own and create the tables (and the edit stamps), on first use."""
    if st.created and not st.owned:
        return
    with st.ready:
        if st.owned:
            st.pool.open(st.desc)  # an OwnedPool (connect.py): a server that is down fails
        if not st.created:
            with st.pool.connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_sql.ddl_key(st.table),))
                conn.execute(st.sql["create"])
                st.stamped = _sql.add_stamps(conn, st.table)
            st.created.append(True)


@contextmanager
def _connection(st: _Pg, held: Any = None):
    """A pooled connection (or `held`, a lock's), the tables created on first use."""
    _prepare(st)
    if held is not None:
        yield held
        return
    with st.pool.connection() as conn:
        yield conn


def _read(st: _Pg, id: str, conn: Any, first: Any = None):
    """Read `id` on `conn` (see _rows.read_joined); `first` is (k, the cursor of "get"
    from seq k, already sent: the fused take's), or None."""

    def query(k: int) -> tuple:
        if first is not None and first[0] == k:
            got = _rows.split_aggregated(first[1].fetchall(), k)
        else:
            with _connect.pg_autocommit(conn):  # one statement, one snapshot
                got = _rows.split_aggregated(run(conn, st.sql[get], (id, k), True).fetchall(), k)
        if got is not None:
            return got
        with _connect.pg_autocommit(conn):  # a row per message: the bad one is named
            return _rows.split_joined(run(conn, st.sql[get + "_rows"], (id, k)).fetchall())

    get = "get" if st.stamped else "get_unstamped"
    return _rows.read_joined(st.desc, id, query, st.memo, st.stamped, split=tuple)


def _get(st: _Pg, id: str):
    _check_id(id)
    with _errors(st, id), _connection(st) as conn:
        return _read(st, id, conn)


def _write(
    st: _Pg, id: str, transcript: Sequence[Mapping], log: Any = None, held: Any = None
) -> None:
    """Save: one autocommit statement when it extends what this process last saw, else
    the general way (in a transaction, the head row locked)."""
    _check_id(id)
    frozen = _rows.frozen(transcript)
    extend = _rows.plan_extend(id, frozen, st.memo)
    if held is None:
        held = _lock_conn(st, id)
    with _fenced(st, id, held), _errors(st, id), _connection(st, held) as conn:
        done = extend is not None and _extend(st, conn, id, *extend, log)
        plan = extend[1] if done else _save_whole(st, conn, id, frozen, log)
    st.memo.saved(id, frozen, plan)


def _extend(st: _Pg, conn: Any, id: str, expected: Any, plan: Any, log: Any) -> bool:
    """Append in one statement if the head is still `expected`; return whether it was."""
    rows = (plan.start, _array(plan.encoded))
    if expected.count == 0 and expected.digest == _rows.GENESIS:  # seen absent
        kind, params = "start", (id, *plan.head, *rows)
    else:
        kind, params = "extend", (*plan.head, id, *expected, *rows)
    with _connect.pg_autocommit(conn):
        if log is None:
            return run(conn, st.sql[kind], params).fetchone()[0] == 1
        log_sql, log_params = log("head")
        query = st.sql[kind + "_logged"].replace("{log}", log_sql)
        return run(conn, query, (*params, *log_params)).fetchone()[0] == 1


def _save_whole(st: _Pg, conn: Any, id: str, frozen: Any, log: Any) -> Any:
    """Save the general way: lock the head row, append or replace; return the plan."""
    sql = st.sql
    with conn.transaction():
        stored = _rows.Head(*conn.execute(sql["lock_head"], (id,)).fetchone())
        plan = _rows.plan_save(id, stored, frozen, st.memo)
        if not plan.append:
            conn.execute(sql["clear"], (id,))
        conn.execute(sql["write"], (id, plan.start, _array(plan.encoded), *plan.head, id))
        if log is not None:
            query, values = log("saved")
            conn.execute("WITH saved AS (SELECT 1) " + query, values)
    return plan


def _lock_conn(st: _Pg, id: str) -> Any:
    """Return the connection whose session holds `id`'s lock in this process, or None:
    a save while the lock is held runs on it, so it fails if that session died (and
    with it the lock, which another writer may have taken since)."""
    made = st.lock.peek()
    return made.conn_of(id) if made is not None else None


@contextmanager
def _fenced(st: _Pg, id: str, held: Any):
    try:
        yield
    except StoreUnavailableError:
        if held is None or not held.closed:
            raise
        raise LockLostError(
            f"{st.desc}: the session holding the lock on conversation {id!r:.120} ended "
            "while its exchange ran (terminated, or the server restarted): the save was "
            "refused, so nothing another writer saved since is overwritten; this exchange "
            "was not saved, ask again"
        ) from None


def _delete(st: _Pg, id: str) -> None:
    _check_id(id)
    st.memo.forget(id)
    with _errors(st, id), _connection(st) as conn, conn.transaction():
        conn.execute(st.sql["clear"], (id,))
        conn.execute(st.sql["drop_head"], (id,))


def _ids(st: _Pg) -> tuple:
    with _errors(st, None), _connection(st) as conn:
        return tuple(r[0] for r in conn.execute(st.sql["ids"]).fetchall())


def _fork_in(st: _Pg, src: str, dst: str, at: int | None = None, check=None) -> int:
    """Copy `src` (its first `at` messages) to `dst` in the database: see store.fork."""
    _check_id(src), _check_id(dst)
    st.memo.forget(dst)
    with _errors(st, src), _connection(st) as conn, conn.transaction():
        return _fork(conn, st.sql, st.fork_sql, st.desc, src, dst, at, check)


def _lock_load(st: _Pg, id: str) -> tuple[Any, Any]:
    """Take the conversation's lock and read it on the lock's own connection (no second
    pooled connection); return (the entered lock, the transcript or None)."""
    _check_id(id)
    _prepare(st)  # the tables exist before the read that goes with the take
    known = st.memo.known(id) if st.stamped else None
    k = len(known.transcript) if known is not None else 0
    get = st.sql["get" if st.stamped else "get_unstamped"]
    read = partial(run, query=get, params=(id, k), binary=True)
    with _errors(st, id):  # the read's errors, raised as the take's
        # The usual case is one round trip: the read goes in the take's pipeline.
        held = st.lock.made().take_on(id, read)
    try:
        with _errors(st, id), _connection(st, held.conn) as conn:
            first = (k, held.first) if held.first is not None else None
            return held, _read(st, id, conn, first)
    except BaseException:
        held.release()  # the read's error is the one to raise
        raise


def _save_release(st: _Pg, held: Any, id: str, transcript: Sequence[Mapping]) -> Any:
    """Save on the lock's connection, then release the lock; return a failed release's
    error (the save stands), raise a failed save's (after releasing)."""
    try:
        _write(st, id, transcript, held=held.conn)
    except BaseException:
        held.release()
        raise
    return held.release()


def _save_logged(
    st: _Pg, id: str, transcript: Sequence[Mapping], rows: Callable, entries: Any, held=None
) -> bool:
    """Save, recording `entries` in the same statement (`rows(entries)`: the log's INSERT,
    a function of the CTE that guards it); return whether they went with it (else the
    caller records them). With `held` (the connection of the lock), on that connection."""
    alone = partial(_write, st, id, transcript, held=held)
    if not entries:
        alone()
        return False
    try:
        statement = rows(entries)  # the log's table exists before a statement writes to it
    except StoreUnavailableError:
        raise  # the save could not go either: nothing is saved, the run raises
    except Exception:  # the log cannot be set up: the save alone; the caller reports
        alone()
        return False
    try:
        _write(st, id, transcript, statement, held=held)
        return True
    except (StoreRefusedError, StoreCorruptError, ValueError):
        # Perhaps the log's part (its table gone, an entry it refuses): the save alone,
        # and the caller records the log as usual, which reports why. A fault of the
        # store's own raises again here.
        alone()
        return False


def _save_logged_release(
    st: _Pg, held: Any, id: str, transcript: Sequence[Mapping], rows: Callable, entries: Any
) -> tuple[bool, BaseException | None]:
    """`_save_logged` on the connection of `held` (lock_load's), then release it; return
    (logged, a failed release's error); a failed save raises after the release."""
    try:
        logged = _save_logged(st, id, transcript, rows, entries, held.conn)
    except BaseException:
        held.release()
        raise
    return logged, held.release()


def _fork(conn: Any, sql: dict, q: dict, desc: str, src: str, dst: str, at, check) -> int:
    """Copy the rows of `src` (the first `at`) to `dst` with one INSERT ... SELECT."""
    from ...store.forks import decode_row, forked_digest

    head = None
    for id in sorted((src, dst)):  # both head rows locked in one order: forks never deadlock
        if id == dst:
            conn.execute(sql["lock_head"], (dst,))
        else:
            head = conn.execute(q["src_head"], (src,)).fetchone()
    if head is None or head[0] == 0:  # absent, or a first save not yet committed
        raise KeyError(f"no conversation {src!r} to fork")
    version, count, digest = head
    n = count if at is None else at
    if n > count:
        raise ValueError(f"at={at} is past the end of {src!r} ({count} messages)")
    if check is not None and n < count:
        check(decode_row(desc, src, version, conn.execute(q["row"], (src, n)).fetchone()[0]))
    conn.execute(sql["clear"], (dst,))
    conn.execute(q["copy"], (dst, src, n))
    conn.execute(q["put_head"], (version, n, forked_digest(digest, count, n), dst))
    return n
