"""Connecting to PostgreSQL for the store, lock and log (psycopg imported lazily).

Every address that can reach an error or a `desc` is redacted first (`redact_dsn`):
a password never leaves this module.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...core.errors import scrub_chain
from ...core.extras import needs_extra
from ...core.secrets import dsn_passwords, redact_dsn
from ...store.errors import StoreUnavailableError


def pg_pool(pool_or_dsn: Any, *, timeout: float, max_size: int = 8) -> tuple[Any, str, bool]:
    """Return `(pool, redacted address, owned)` for a psycopg_pool pool or a DSN.

    A pool built here is an `OwnedPool` (ours to close): it opens on first use and fails
    fast while its server refuses connections.
    """
    if isinstance(pool_or_dsn, str):
        with needs_extra("a PostgreSQL DSN"):
            from psycopg_pool import ConnectionPool

        address = redact_dsn(pool_or_dsn)
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
            # No `check=`: OwnedPool checks each connection it takes itself (see _live),
            # without the pool's backoff sleep after each dead one.
        )
        return OwnedPool(pool, timeout, f"PostgreSQL at {address!r}"), address, True
    if not callable(getattr(pool_or_dsn, "connection", None)):
        raise TypeError(f"expected a psycopg_pool pool or a DSN, got {type(pool_or_dsn)}")
    return pool_or_dsn, redact_dsn(str(getattr(pool_or_dsn, "conninfo", "") or "pool")), False


FIRST_WAIT_S = 1.0  # a connection not handed out by then: the server itself is asked
PROBE_EVERY_S = 0.5  # at most one such question per pool in this long


class OwnedPool:
    """A psycopg pool built from a DSN: opened on first use, and failing fast while its
    server refuses connections.

    psycopg_pool waits its whole `timeout` for a connection when the server is down (it
    keeps reconnecting in the background). Here a call that got no connection within
    FIRST_WAIT_S, while none of this pool's connections is in use (so it is not merely
    busy), connects once to the server directly: refused or unreachable, the call is
    StoreUnavailableError at once, and the server is known down, so later calls ask it
    first instead of waiting; answered, the call waits on. A backend's store, lock and
    log share one pool, so they share what it learns.
    """

    def __init__(self, pool: Any, timeout: float, what: str):
        self.pool, self.timeout, self.what = pool, timeout, what
        self.conninfo, self.max_size = pool.conninfo, pool.max_size
        self._guard = threading.Lock()
        self._out = 0  # connections handed out and not back yet
        self._asking = threading.Lock()  # one question to the server at a time
        self._down, self._asked_at, self._error = False, -PROBE_EVERY_S, None

    def open(self, what: str | None = None) -> None:
        """Open the pool (idempotent); raise StoreUnavailableError (naming `what`, else the
        server) while its server is known to refuse."""
        if getattr(self.pool, "closed", False):
            with self._guard:
                pg_open(self.pool, self.timeout, what or self.what)
        elif self._down and not self._out:
            self._ask_server(what or self.what)

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Any]:
        """A pooled connection, as `ConnectionPool.connection` (commit or rollback on exit)."""
        conn = self.getconn(timeout)
        try:
            with conn:  # a pooled connection's exit commits or rolls back, never closes
                yield conn
        finally:
            self.putconn(conn)

    def getconn(self, timeout: float | None = None) -> Any:
        """A pooled connection to hand back with `putconn`."""
        return self._take(timeout, lambda t: self.pool.getconn(timeout=t))

    def putconn(self, conn: Any) -> None:
        self.pool.putconn(conn)
        self._back()

    def close(self) -> None:
        self.pool.close()

    def _take(self, timeout: float | None, take: Callable[[float], Any]) -> Any:
        from psycopg_pool import PoolTimeout

        self.open()
        total = self.timeout if timeout is None else timeout
        first = min(total, FIRST_WAIT_S)
        start = time.monotonic()
        try:
            conn = self._live(take, start + first)
        except PoolTimeout:
            if total <= first:
                raise
            if not self._out:  # nothing of ours holds one: is the server there at all?
                self._ask_server(self.what)
            conn = self._live(take, start + total)
        with self._guard:
            self._out += 1
        return conn

    def _live(self, take: Callable[[float], Any], deadline: float) -> Any:
        """Take a connection whose session still answers, by `deadline`.

        Sessions the server ended while idle (a restart, idle_session_timeout, a proxy)
        usually end together: each is found by one empty statement as it is taken and
        handed back broken (the pool closes it and opens a replacement), and the next
        is taken at once. psycopg_pool's own `check=` sleeps a second, then two, four...
        after each dead one, so a pool of dead sessions outlasted a caller's timeout.
        """
        from psycopg_pool import ConnectionPool

        while True:
            conn = take(max(0.0, deadline - time.monotonic()))
            try:
                ConnectionPool.check_connection(conn)
                return conn
            except Exception:
                self.pool.putconn(conn)  # broken: closed and replaced by the pool
            except BaseException:
                self.pool.putconn(conn)
                raise

    def _back(self) -> None:
        with self._guard:
            self._out -= 1

    def _ask_server(self, what: str) -> None:
        """Connect once, directly (at most once per PROBE_EVERY_S): raise
        StoreUnavailableError when the server refuses or cannot be reached."""
        import psycopg

        with self._asking:
            if time.monotonic() - self._asked_at >= PROBE_EVERY_S:
                try:
                    connect_timeout = max(1, int(self.timeout))
                    psycopg.connect(self.conninfo, connect_timeout=connect_timeout).close()
                    self._down, self._error = False, None
                except Exception as e:
                    self._down, self._error = True, e
                self._asked_at = time.monotonic()
            error = self._error
        if error is not None:
            raise pg_unavailable(self, error, what) from None


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


def database(address: str) -> tuple[str, str]:
    """Return what names the database at `address` (redacted): a store's save and a log's
    rows may share a statement only when theirs are equal."""
    return ("postgresql", address)
