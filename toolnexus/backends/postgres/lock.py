"""The PostgreSQL lock: an advisory lock per conversation, held by a pooled connection's
session (the server frees it if that session dies); a state record plus top-level
functions, on the connections of a psycopg pool.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any

from ...core.extras import needs_extra
from ...store.locks import LockTimeoutError, _per_id, _queued, _warn_lost, local_lock

__all__ = ["postgres_lock", "PostgresLock", "Held", "PgLock", "advisory_key"]


def postgres_lock(
    pool_or_dsn: Any,
    *,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    max_held: int | None = None,
) -> PostgresLock:
    """Return a lock per conversation as a PostgreSQL advisory lock, for many processes and hosts.

    Holds a dedicated pooled connection while held (a pool shared with a store needs
    a connection more than the locks held at once); the server frees the lock if that
    session dies. Waits use `lock_timeout`, so no polling. Getting a connection waits at
    most `connect_timeout`, whatever `timeout` is (a server that is down fails after
    `connect_timeout`; a short lock timeout still allows a slow connect). With
    `max_held`, at most that many locks of this value are held at once (the others wait,
    within `timeout`): a pool shared with a store then always keeps a connection for it.
    """
    with needs_extra("postgres_lock"):
        import psycopg  # noqa: F401

    from .connect import pg_pool

    if max_held is not None and (not isinstance(max_held, int) or max_held < 1):
        raise ValueError(f"postgres_lock: max_held must be an integer >= 1, got {max_held!r}")

    pool, address, owned = pg_pool(pool_or_dsn, timeout=connect_timeout, max_size=64)
    what = f"postgres_lock({address!r})"
    st = PgLock(pool, owned, what, connect_timeout, max_held, LockTimeoutError, _warn_lost)
    return PostgresLock(st, timeout)


class PostgresLock:
    """A `postgres_lock`: `lock(id)` is the context manager held around an exchange; a store
    on the same pool takes it with its first statement (`take_on`) and saves on the
    connection that holds it (`conn_of`). `close()` closes a pool made from a DSN (a
    caller's pool is theirs)."""

    __slots__ = ("_st", "_timeout", "_queue", "_hold")

    def __init__(self, st: PgLock, timeout: float) -> None:
        self._st, self._timeout = st, timeout
        # Threads of this process queue here, whichever way they take.
        self._queue = local_lock(timeout)
        self._hold = _per_id(partial(_take_released, st), timeout, self._queue)

    def __call__(self, id: str) -> AbstractContextManager:
        return self._hold(id)

    def take_on(self, id: str, also: Callable[[Any], Any] | None = None) -> Held:
        """Take `id`'s lock as `with lock(id)` does; return it entered, its session's
        connection as `.conn` (autocommit), for a store's statements while it is held.

        `also(conn)` sends a store's statement in the same round trip as the take
        (psycopg's pipeline mode) and returns its cursor: `.first` is that cursor when
        the lock was free at once, else None (read again: it ran before the lock was).
        """
        st = self._st

        def take_now(deadline: float) -> tuple[Callable[[], None], Any, Any]:
            return take_lock(st, id, max(0.0, deadline - time.monotonic()), also)

        queued, (release, conn, first) = _queued(self._queue, id, self._timeout, take_now)
        return Held(release, queued, conn, first)

    def conn_of(self, id: str) -> Any:
        """Return the connection holding `id`'s lock while this value holds it, else None."""
        return self._st.holding.get(id)

    def close(self) -> None:
        """Close the pool this lock made from a DSN (a pool you gave stays yours)."""
        if self._st.owned:
            self._st.pool.close()


def _take_released(st: PgLock, id: str, seconds: float) -> Callable[[], None]:
    return take_lock(st, id, seconds, None)[0]


class Held:
    """A PostgreSQL lock taken by `postgres_lock(...).take_on`: entered; `.conn` is the
    connection whose session holds it, and `__exit__` (or `release`) lets it go. `first`:
    the cursor of a statement sent in the take's round trip (see `take_on`), or None."""

    __slots__ = ("_release", "_queued", "conn", "_open", "first")

    def __init__(
        self, release: Callable[[], None], queued: AbstractContextManager, conn: Any, first=None
    ):
        self._release, self._queued, self.conn, self._open = release, queued, conn, True
        self.first = first

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: Any) -> None:
        """Release the lock (once: a second exit does nothing); raise a failed unlock."""
        if not self._open:
            return
        self._open = False
        try:
            self._release()
        finally:
            self._queued.__exit__(None, None, None)

    def release(self) -> BaseException | None:
        """Release the lock; return the error of a failed unlock instead of raising it."""
        try:
            self.__exit__(None, None, None)
        except Exception as e:
            return e
        return None


def advisory_key(id: str) -> int:
    """Return the signed 64-bit advisory lock key of a conversation id."""
    digest = hashlib.blake2b(id.encode("utf-8", "surrogatepass"), digest_size=8, person=b"tnx-lock")
    return int.from_bytes(digest.digest(), "big", signed=True)


# Run on every exchange: prepared once per session by psycopg (`prepare=True`), unless
# the connection's prepare_threshold is None (PgBouncer in transaction mode).
_TRY = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"


class PgLock:
    """What one postgres_lock holds: its pool, the sessions holding locks, its slots, and
    how it reports (`timed_out`: the LockTimeoutError class; `warn_lost`: its warning)."""

    __slots__ = ("pool", "owned", "what", "connect_timeout", "ready", "holding", "slots",
                 "timed_out", "warn_lost")  # fmt: skip

    def __init__(self, pool: Any, owned: bool, what: str, connect_timeout: float, max_held,
                 timed_out: type[Exception], warn_lost: Callable[[str], None]):  # fmt: skip
        self.pool, self.owned, self.what, self.connect_timeout = pool, owned, what, connect_timeout
        self.timed_out, self.warn_lost = timed_out, warn_lost
        self.ready = threading.Lock()
        # id -> the connection whose session holds its lock (at most one per id: the
        # queue). A store saves on it while it is held, so a save after the session died
        # fails instead of writing over what the next holder saved.
        self.holding: dict[str, Any] = {}
        # At most max_held locks held at once: a token each (a queue in C, no Condition).
        self.slots: SimpleQueue | None = None
        if max_held:
            self.slots = SimpleQueue()
            for _ in range(max_held):
                self.slots.put(None)


def _pg_connect(st: PgLock) -> Any:
    from .connect import is_pg_unavailable, pg_unavailable

    try:
        with st.ready:
            if st.owned:
                st.pool.open(st.what)  # an OwnedPool (connect.py)
        # Getting a connection is bounded by connect_timeout, not by the lock wait:
        # a short lock timeout must not turn a slow connect into "unavailable".
        return st.pool.getconn(timeout=st.connect_timeout)
    except Exception as e:
        if is_pg_unavailable(e):
            raise pg_unavailable(st.pool, e, st.what) from None
        raise


def take_lock(
    st: PgLock, id: str, seconds: float, also: Any
) -> tuple[Callable[[], None], Any, Any]:
    """Take `id`'s lock (a slot first, with max_held); return (its release, the
    connection holding it, the cursor of `also` or None: see take_on)."""
    slots = st.slots
    if slots is None:
        return _pg_take_slot(st, id, seconds, also)
    start = time.monotonic()
    try:
        slots.get(timeout=seconds)
    except Empty:
        raise st.timed_out(f"{st.what} for {id!r:.120} not taken within {seconds:.3g}s") from None
    try:
        left = max(0.0, seconds - (time.monotonic() - start))
        release, conn, first = _pg_take_slot(st, id, left, also)
    except BaseException:
        slots.put(None)
        raise

    def release_slot() -> None:
        try:
            release()
        finally:
            slots.put(None)

    return release_slot, conn, first


def _pg_take_slot(
    st: PgLock, id: str, seconds: float, also: Any
) -> tuple[Callable[[], None], Any, Any]:
    import psycopg

    from .connect import is_pg_unavailable, pg_unavailable

    key, pool = advisory_key(id), st.pool
    conn = _pg_connect(st)
    autocommit = conn.autocommit
    try:
        if not autocommit:  # setting it costs a call into the driver even when unchanged
            conn.autocommit = True
        # A free lock (the usual case) is one statement; only a held one is waited
        # for, bounded by lock_timeout (three statements).
        free, first = _pg_try(conn, key, also)
        if not free:
            first = None  # it ran before the lock was ours: the caller reads again
            ms = max(1, int(seconds * 1000))
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{ms}ms",))
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            finally:
                conn.execute("RESET lock_timeout")
    except psycopg.errors.LockNotAvailable:
        if not autocommit:
            conn.autocommit = autocommit
        pool.putconn(conn)
        raise st.timed_out(f"{st.what} for {id!r:.120} not taken within {seconds:.3g}s") from None
    except BaseException as e:
        pool.putconn(conn)
        if isinstance(e, Exception) and is_pg_unavailable(e):
            raise pg_unavailable(pool, e, st.what) from None
        raise
    st.holding[id] = conn
    return partial(_pg_release, st, id, key, conn, autocommit), conn, first


def _pg_try(conn: Any, key: int, also: Any) -> tuple[bool, Any]:
    """Try the advisory lock, with `also(conn)` in the same round trip (a pipeline);
    return (whether it was free, also's cursor or None)."""
    if also is None:
        return conn.execute(_TRY, (key,), prepare=True).fetchone()[0], None
    try:
        with conn.pipeline():
            tried = conn.execute(_TRY, (key,), prepare=True)
            sent = also(conn)
        return tried.fetchone()[0], sent
    except BaseException:
        # The lock may be this session's now, and nothing else knows: ending the
        # session frees it (the pool replaces the connection).
        conn.close()
        raise


def _pg_release(st: PgLock, id: str, key: int, conn: Any, autocommit: bool) -> None:
    import psycopg

    st.holding.pop(id, None)
    try:
        if not conn.execute(_UNLOCK, (key,), prepare=True).fetchone()[0]:
            st.warn_lost(f"{st.what} for {id!r:.120}")
        if not autocommit:
            conn.autocommit = autocommit
    except psycopg.OperationalError:
        st.warn_lost(f"{st.what} for {id!r:.120}")  # the session died: so did its lock
    finally:
        st.pool.putconn(conn)
