"""Connecting to Redis, PostgreSQL and SQLite for stores, locks and logs (imports the
drivers lazily).

Every address that can reach an error or a `desc` goes through `redact` first:
a password never leaves this module.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...core.errors import scrub_chain
from ...core.extras import needs_extra
from ...core.secrets import dsn_passwords, redact_dsn, scrubber
from ...store.errors import StoreUnavailableError


def redact(address: str) -> str:
    """Return a URL or conninfo string with any password replaced by '***' (lenient).

    A DSN psycopg cannot parse (a raw '%' or '@' in the password) is still redacted.

    >>> redact("redis://:s3cret@host:6379/0"), redact("host=db password=s3cret user=me")
    ('redis://:***@host:6379/0', 'host=db password=*** user=me')
    >>> redact("postgresql://me:s3cret@db/app?sslmode=require&password=x")
    'postgresql://me:***@db/app?sslmode=require&password=***'
    >>> redact("postgresql://u:my%secret@host/db")
    'postgresql://u:***@host/db'
    """
    return redact_dsn(address)


def scrub(text: str, secrets: tuple[str | None, ...]) -> str:
    """Return `text` with every form of every secret (fragments, escapes) replaced by '***'."""
    return scrubber(secrets)(text)


# ---- Redis -----------------------------------------------------------------


def redis_client(client_or_url: Any) -> Any:
    """Return a redis-py client: the one given, or one for a redis:// URL."""
    if isinstance(client_or_url, str):
        with needs_extra("a redis:// URL"):
            import redis

        return redis.Redis.from_url(client_or_url, socket_connect_timeout=5, socket_timeout=30)
    if not callable(getattr(client_or_url, "execute_command", None)):
        raise TypeError(f"expected a redis client or a redis:// URL, got {type(client_or_url)}")
    return client_or_url


def redis_address(client: Any) -> str:
    """Return where a redis-py client connects, without its password."""
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}) or {}
    if kw.get("path"):
        return f"unix:{kw['path']}/{kw.get('db', 0)}"
    return f"{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}"


def redis_password(client: Any) -> str | None:
    """Return the client's password (only to scrub it from driver messages)."""
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}) or {}
    return kw.get("password")


def redis_unavailable(client: Any, e: BaseException, what: str) -> StoreUnavailableError:
    """Return the error for a Redis server that is down or refused (`what` names it)."""
    scrub_chain(e, (redis_password(client),))  # it stays as the new error's __context__
    return StoreUnavailableError(f"{what} is unavailable: {type(e).__name__}: {e}")


# ---- PostgreSQL ------------------------------------------------------------


def pg_pool(pool_or_dsn: Any, *, timeout: float, max_size: int = 8) -> tuple[Any, str, bool]:
    """Return `(pool, redacted address, owned)` for a psycopg_pool pool or a DSN.

    A pool built here opens lazily (see `pg_open`) and is `owned` (ours to close).
    """
    if isinstance(pool_or_dsn, str):
        with needs_extra("a PostgreSQL DSN"):
            from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            pool_or_dsn,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            open=False,
            # Autocommit: a single statement needs no BEGIN/COMMIT, and a connection that
            # stays in one mode costs no driver call per statement to switch it (a
            # transaction is always opened explicitly with conn.transaction()).
            kwargs={"connect_timeout": max(1, int(timeout)), "autocommit": True},
            # A session the server dropped while idle (a restart, idle_session_timeout, a
            # proxy) is found as it is taken and replaced, never handed out to fail.
            check=ConnectionPool.check_connection,
        )
        return pool, redact(pool_or_dsn), True
    if not callable(getattr(pool_or_dsn, "connection", None)):
        raise TypeError(f"expected a psycopg_pool pool or a DSN, got {type(pool_or_dsn)}")
    return pool_or_dsn, redact(str(getattr(pool_or_dsn, "conninfo", "") or "pool")), False


def pg_passwords(pool: Any) -> tuple[str, ...]:
    """Return the passwords the pool's conninfo holds, raw and decoded (only to scrub).

    Read leniently: psycopg's own parser refuses a DSN with a raw '%' in its password,
    which is exactly the DSN whose error message quotes the password.
    """
    return dsn_passwords(str(getattr(pool, "conninfo", "") or ""))


def pg_unavailable(pool: Any, e: BaseException, what: str) -> StoreUnavailableError:
    """Return the error for a PostgreSQL server that is down or refused (`what` names it)."""
    scrub_chain(e, pg_passwords(pool))  # it stays as the new error's __context__
    return StoreUnavailableError(f"{what} is unavailable: {type(e).__name__}: {e}")


def pg_bad_dsn(pool: Any, e: BaseException, what: str) -> StoreUnavailableError:
    """Return the error for a DSN libpq cannot parse, without the fragments libpq quotes
    from it (a piece of the password, cut at a space or a raw '%')."""
    scrub_chain(e, lambda text: _QUOTED.sub('"..."', text))
    scrub_chain(e, pg_passwords(pool))
    return StoreUnavailableError(
        f"{what} is unavailable: the DSN is not valid ({' '.join(str(e).split())}): fix it"
    )


_QUOTED = re.compile(r'"[^"]*"')


def pg_open(pool: Any, timeout: float, what: str) -> None:
    """Open a pool we own (idempotent); a server that is down fails fast, with its reason."""
    import psycopg

    if not getattr(pool, "closed", False):
        return
    try:
        # One direct connection first: a refused port fails at once with libpq's reason,
        # where the pool would only time out after `timeout` seconds. On failure the pool
        # stays unopened (a psycopg pool cannot be reopened once closed), so a later call
        # tries again.
        psycopg.connect(pool.conninfo, connect_timeout=max(1, int(timeout))).close()
    except psycopg.ProgrammingError as e:  # libpq could not parse the DSN
        raise pg_bad_dsn(pool, e, what) from None
    except Exception as e:
        raise pg_unavailable(pool, e, what) from None
    pool.open(wait=False)


def is_pg_unavailable(e: BaseException) -> bool:
    """Whether an exception means the server is down or unreachable (not bad data)."""
    import psycopg
    from psycopg_pool import PoolTimeout

    return isinstance(e, (psycopg.OperationalError, PoolTimeout))


@contextmanager
def pg_autocommit(conn: Any) -> Iterator[Any]:
    """Run one statement on a pooled connection without BEGIN and COMMIT round trips.

    For a single statement (atomic on its own) on an idle connection; the connection's
    own setting is restored for whoever borrows it next.
    """
    if conn.autocommit:  # nothing to set or restore (setting it costs a driver call)
        yield conn
        return
    conn.autocommit = True
    try:
        yield conn
    finally:
        conn.autocommit = False


# ---- SQLite ----------------------------------------------------------------


def read_only(e: BaseException) -> bool:
    """Whether a sqlite3 error says the database (or its directory) cannot be written."""
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == 8:  # SQLITE_READONLY and its extended codes
        return True
    return "readonly database" in str(e) or "read-only" in str(e)


def sqlite_wal(conn: Any, timeout: float) -> None:
    """Switch a SQLite connection's file to WAL (a plain read once the file is in WAL).

    Switching a new file needs it to itself, and SQLite answers "locked" at once, without
    its busy wait, while another connection holds the file's write lock (a second process
    setting the same new file up): retry until `timeout` seconds have passed.
    """
    import sqlite3

    deadline = time.monotonic() + timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
