"""The PostgreSQL message log: a timestamptz index and, when pg_trgm is available, a trigram index.

Text search compares a casefolded copy of the text with `LIKE` and escaped wildcards,
so it is literal and means the same as in every other backend; the trigram GIN index
only makes it fast. psycopg and psycopg_pool are imported lazily.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache, partial
from typing import Any

from ...core.extras import needs_extra
from ...core.frozen import FrozenMap
from ...history.entry import check_query, cutoff, entry_fields, fold
from ...store.fused import derive, fuse
from .connect import (
    database,
    is_pg_unavailable,
    pg_autocommit,
    pg_pool,
    pg_unavailable,
)

__all__ = ["postgres_log", "like_pattern", "guarded_insert", "rows_in"]

logger = logging.getLogger("toolnexus.history")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}\Z")
# Serializes the DDL of concurrent first uses (CREATE ... IF NOT EXISTS can still race).
_SETUP_LOCK_KEY = 0x746E686973  # "tnhis"


def like_pattern(text: str) -> str:
    r"""Return a LIKE pattern matching `text` literally anywhere (escape character `\`).

    >>> like_pattern("100%_a\\b")
    '%100\\%\\_a\\\\b%'
    """
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _ddl(table: str) -> list:
    from psycopg import sql

    t = sql.Identifier(table)
    return [
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, "
            "conversation_id text, text text NOT NULL, folded text NOT NULL, "
            "ts timestamptz NOT NULL, "
            "direction text NOT NULL CHECK (direction IN ('user', 'ai')))"
        ).format(t),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (ts, seq)").format(
            sql.Identifier(f"{table}_ts"), t
        ),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (conversation_id, ts, seq)").format(
            sql.Identifier(f"{table}_conv_ts"), t
        ),
    ]


def _trigram_index(conn: Any, table: str) -> bool:
    """Create the pg_trgm GIN index if the extension exists or can be created; return success."""
    import psycopg
    from psycopg import sql

    try:
        with conn.transaction():  # a savepoint: a refusal must not abort the setup
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except psycopg.Error:
        pass  # maybe no privilege; it may still be installed already
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone()
    if row is None:
        return False
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (folded gin_trgm_ops)").format(
            sql.Identifier(f"{table}_trgm"), sql.Identifier(table)
        )
    )
    return True


def _setup(pool: Any, table: str, what: str) -> bool:
    with _connection(pool, what) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK_KEY,))
        for stmt in _ddl(table):
            conn.execute(stmt)
        return _trigram_index(conn, table)


def _to_entry(row: tuple):
    eid, cid, text, ts, direction = row
    return FrozenMap(
        {
            "id": eid,
            "conversation_id": cid,
            "text": text,
            "timestamp": ts.replace(tzinfo=UTC),  # selected as UTC wall time: exact
            "direction": direction,
        }
    )


def _where(q: Mapping) -> tuple[list[str], list]:
    conds, params = [], []
    if q["conversation_id"] is not None:
        conds.append("conversation_id = %s")
        params.append(q["conversation_id"])
    if q["since"] is not None:
        conds.append("ts >= %s")
        params.append(q["since"])
    if q["until"] is not None:
        conds.append("ts <= %s")
        params.append(q["until"])
    if q["contains"] is not None:
        conds.append("folded LIKE %s ESCAPE '\\'")
        params.append(like_pattern(q["contains"]))
    return conds, params


@contextmanager
def _connection(pool: Any, what: str) -> Iterator[Any]:
    """A pooled connection; a server that is down becomes StoreUnavailableError (no password)."""
    try:
        with pool.connection() as conn:
            yield conn
    except Exception as e:
        if is_pg_unavailable(e):
            raise pg_unavailable(pool, e, what) from None
        raise


_CHUNK = 500  # rows per INSERT: 6 parameters a row, well under PostgreSQL's 65535


def _rows_of(entries: Iterable[Mapping]) -> list[tuple]:
    # All or nothing: every entry is checked before any row is written.
    return [(id, cid, text, fold(text), ts, direction)
            for id, cid, text, ts, direction in map(entry_fields, entries)]  # fmt: skip


@lru_cache(maxsize=64)
def _guarded_sql(table: str, n: int, relation: str) -> str:
    from psycopg import sql

    values = sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s, %s::timestamptz, %s)")] * n)
    return (
        sql.SQL(
            "INSERT INTO {} (id, conversation_id, text, folded, ts, direction) "
            "SELECT v.* FROM (VALUES {}) v(id, conversation_id, text, folded, ts, direction) "
            "WHERE EXISTS (SELECT 1 FROM {}) ON CONFLICT (id) DO NOTHING"
        )
        .format(sql.Identifier(table), values, sql.Identifier(relation))
        .as_string(None)
    )


def guarded_insert(table: str, entries: Iterable[Mapping], relation: str) -> tuple[str, list]:
    """Return `(sql, params)`: an INSERT of `entries` (1 to 500) into log table `table`
    that adds rows only when `relation` (a CTE of the caller's statement) has a row.

    For a writer that records an exchange in the same statement as its own write (the
    PostgreSQL backend bundle saves a transcript and logs its exchange at once), as a
    data-modifying `WITH` part.
    """
    rows = _rows_of(entries)
    if not 0 < len(rows) <= _CHUNK or not _NAME.match(relation) or not _NAME.match(table):
        raise ValueError(f"1 to {_CHUNK} entries and plain names, got {len(rows)} entries")
    return _guarded_sql(table, len(rows), relation), [v for row in rows for v in row]


def rows_in(table: str, entries: Iterable[Mapping]) -> Callable[[str], tuple[str, list]]:
    """Return fn(relation) -> the guarded INSERT of `entries` into `table` (see
    `guarded_insert`): the log's rows for a statement of the store's."""
    return partial(guarded_insert, table, entries)


def postgres_log(pool_or_dsn: Any, table: str = "toolnexus_log", *, timeout: float = 10.0) -> dict:
    """Return a message log in PostgreSQL table `table` (created if needed).

    `pool_or_dsn` is a psycopg_pool.ConnectionPool (used as is) or a DSN string (a small
    pool is opened; "close" closes it). A server that is down raises StoreUnavailableError
    (never showing a password). When pg_trgm cannot be used the log still works
    by scanning, logs a warning, and says so in its "index" key ("trigram" or "scan").
    """
    if not isinstance(table, str) or not _NAME.match(table):
        raise ValueError(f"table must be a plain SQL identifier of at most 48 chars, got {table!r}")
    with needs_extra("postgres_log"):
        from psycopg import sql

    pool, address, owned = pg_pool(pool_or_dsn, timeout=timeout, max_size=4)
    what = f"postgres_log({address}, table={table!r})"
    if owned:
        pool.open(what)  # an OwnedPool (connect.py): a server that is down fails here
    trigram = _setup(pool, table, what)
    if not trigram:
        logger.warning(
            "%s: pg_trgm is not available, text search will scan the table "
            "(ask an administrator to run CREATE EXTENSION pg_trgm)",
            what,
        )
    st = _PgLog(pool, what, sql.Identifier(table))

    def record_many(entries: Iterable[Mapping]) -> None:
        _record_many(st, entries)

    def record(e: Mapping) -> None:
        _record_many(st, (e,))

    def query(
        *,
        contains: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        conversation_id: str | None = None,
    ) -> tuple:
        return _query(st, check_query(contains, since, until, limit, conversation_id))

    def clear(*, before: datetime | None = None, conversation_id: str | None = None) -> int:
        return _clear(st, before, conversation_id)

    def close() -> None:
        if owned:
            pool.close()

    return derive(
        {
            "record": record,
            "record_many": record_many,
            "query": query,
            "clear": clear,
            "close": close,
            "index": "trigram" if trigram else "scan",
            "desc": what,  # the address is redacted: never a password
            # Its rows as part of a store's statement in this database (see store.fused).
            "fused": {
                "rows": fuse(
                    partial(rows_in, table), "record", "record_many", where=database(address)
                )
            },  # fmt: skip
        }
    )  # binds the fused calls to these operations


class _PgLog:
    """What one PostgreSQL log holds: its pool, table and rendered INSERTs."""

    __slots__ = ("pool", "what", "t", "inserts")

    def __init__(self, pool: Any, what: str, t: Any):
        self.pool, self.what, self.t = pool, what, t
        self.inserts: dict[int, str] = {}  # rows -> one multi-row INSERT (a statement is atomic)


def _insert(st: _PgLog, n: int) -> str:
    from psycopg import sql

    if n not in st.inserts:
        rows = sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s, %s, %s)")] * n)
        # Rendered once: a composed statement would be rendered again on every execute.
        st.inserts[n] = (
            sql.SQL(
                "INSERT INTO {} (id, conversation_id, text, folded, ts, direction) "
                "VALUES {} ON CONFLICT (id) DO NOTHING"
            )
            .format(st.t, rows)
            .as_string(None)
        )
    return st.inserts[n]


def _record_many(st: _PgLog, entries: Iterable[Mapping]) -> None:
    rows = _rows_of(entries)
    if not rows:
        return
    chunks = [rows[i : i + _CHUNK] for i in range(0, len(rows), _CHUNK)]
    with _connection(st.pool, st.what) as conn:
        if len(chunks) > 1:  # all or nothing across statements: one transaction
            with conn.transaction():
                for chunk in chunks:
                    conn.execute(_insert(st, len(chunk)), [v for row in chunk for v in row])
            return
        with pg_autocommit(conn):  # one statement: all rows or none, no BEGIN/COMMIT
            conn.execute(_insert(st, len(rows)), [v for row in rows for v in row])


def _query(st: _PgLog, q: Mapping) -> tuple:
    from psycopg import sql

    if q["limit"] == 0:
        return ()
    conds, params = _where(q)
    where = sql.SQL(" WHERE " + " AND ".join(conds) if conds else "")
    stmt = sql.SQL(
        "SELECT id, conversation_id, text, ts AT TIME ZONE 'UTC', direction FROM "
        "(SELECT * FROM {}{} ORDER BY ts DESC, seq DESC LIMIT %s) AS newest ORDER BY ts, seq"
    ).format(st.t, where)
    with _connection(st.pool, st.what) as conn:
        rows = conn.execute(stmt, (*params, q["limit"])).fetchall()
    return tuple(_to_entry(r) for r in rows)


def _clear(st: _PgLog, before: datetime | None, conversation_id: str | None) -> int:
    from psycopg import sql

    conds, params = [], []
    if before is not None:
        conds, params = ["ts <= %s"], [cutoff(before)]
    if conversation_id is not None:
        conds.append("conversation_id = %s")
        params.append(conversation_id)
    where = " WHERE " + " AND ".join(conds) if conds else ""
    with _connection(st.pool, st.what) as conn:
        return conn.execute(sql.SQL("DELETE FROM {}" + where).format(st.t), params).rowcount
