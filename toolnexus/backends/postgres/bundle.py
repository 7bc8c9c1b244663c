"""The PostgreSQL bundle: one pool, and the store, lock and log on it.

`postgres_backend(dsn)` returns `{"store", "lock", "log", "close", "desc"}` whose parts
share one connection pool and know each other explicitly: the store saves a transcript
and records its exchange in its own message log in one statement (its "save_logged"),
and nothing reads another part's internals. Nothing connects until first use, so a
process whose database is down still starts, and each call raises
StoreUnavailableError until the database is back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from ...core.extras import needs_extra
from ...history.lazy import lazy_log
from ...store.errors import StoreCorruptError, StoreUnavailableError
from . import connect as _connect
from .log import guarded_insert, postgres_log
from .store import StoreRefusedError, open_store

__all__ = ["postgres_backend"]


class _OpeningPool:
    """A psycopg pool we own, opened on its first use (a database that is down fails fast,
    with its reason, and a later use tries again): what store, lock and log borrow from."""

    def __init__(self, pool: Any, timeout: float, what: str):
        self.pool, self.timeout, self.what = pool, timeout, what
        self.conninfo, self.max_size = pool.conninfo, pool.max_size
        self._guard = threading.Lock()

    def _open(self) -> None:
        if getattr(self.pool, "closed", False):
            with self._guard:
                _connect.pg_open(self.pool, self.timeout, self.what)

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Any]:
        self._open()
        with self.pool.connection(timeout=timeout) as conn:
            yield conn

    def getconn(self, timeout: float | None = None) -> Any:
        self._open()
        return self.pool.getconn(timeout=timeout)

    def putconn(self, conn: Any) -> None:
        self.pool.putconn(conn)

    def close(self) -> None:
        self.pool.close()


def postgres_backend(
    dsn_or_pool: Any,
    *,
    table: str = "toolnexus_messages",
    log_table: str = "toolnexus_log",
    timeout: float = 10.0,
    lock_timeout: float = 60.0,
    max_size: int = 20,
) -> dict:
    """Return {"store", "lock", "log", "close", "desc"} in one PostgreSQL database.

    All three borrow from one pool (made from a DSN with up to `max_size` connections
    and opened on first use, or yours): the lock holds one per exchange in flight (an
    advisory lock lives in a session), at most all but 4 (a quarter of a small pool),
    which stay for the store and log. So `max_size - 4` exchanges run at once per
    process; keep `processes x max_size` under the server's max_connections. The
    store is `postgres_store`'s, plus a "save_logged" the
    client calls when the store and log are the bundle's own (not wrapped by a
    decorator): the transcript's append and the exchange's log rows are one statement,
    so they are committed together. "close" closes a pool made from a DSN.

    >>> sorted(postgres_backend("postgresql://app@db/chat"))  # connects on first use
    ['close', 'desc', 'lock', 'log', 'store']
    """
    with needs_extra("postgres_backend"):
        import psycopg  # noqa: F401

    raw, address, owned = _connect.pg_pool(dsn_or_pool, timeout=timeout, max_size=max_size)
    desc = f"postgres_backend({address!r}, table={table!r}, log_table={log_table!r})"
    pool = _OpeningPool(raw, timeout, desc) if owned else raw
    size = getattr(raw, "max_size", None) or max_size
    keep = min(4, max(1, size // 4))  # connections the lock never holds
    store, write = open_store(pool, address, False, table, timeout, lock_timeout, keep)
    log = lazy_log(lambda: postgres_log(pool, log_table, timeout=timeout), desc)
    st = _LoggedSave(write, log, log_table)

    def save_logged(
        id: str,
        transcript: Sequence[Mapping],
        message_log: Mapping,
        entries: Sequence[Mapping],
        held: Any = None,
    ) -> bool:
        """Save, recording `entries` in the same statement when `message_log` is this
        bundle's own log; return whether they were recorded (else the caller does).
        With `held` (the connection of the conversation's lock), on that connection."""
        return _save_logged(st, id, transcript, message_log, entries, held)

    def save_logged_release(
        lock: Any,
        id: str,
        transcript: Sequence[Mapping],
        message_log: Mapping,
        entries: Sequence[Mapping],
    ) -> tuple[bool, BaseException | None]:
        """`save_logged` on the connection of `lock` (from the store's "lock_load"), then
        release it; return (logged, a failed release's error); a failed save raises after
        the release."""
        try:
            logged = _save_logged(st, id, transcript, message_log, entries, lock.conn)
        except BaseException:
            lock.release()
            raise
        return logged, lock.release()

    save = store["save"]
    save_logged.save = save_logged_release.save = save  # type: ignore[attr-defined]
    save_logged_release.lock = store["lock"]  # type: ignore[attr-defined]
    store = {**store, "save_logged": save_logged, "save_logged_release": save_logged_release}

    def close() -> None:
        log["close"]()
        store["close"]()
        if owned:
            raw.close()

    return {"store": store, "lock": store["lock"], "log": log, "close": close, "desc": desc}


class _LoggedSave:
    """What a PostgreSQL bundle's fused save needs: the store's write, its own log."""

    __slots__ = ("write", "log", "log_table", "own_record", "guarded", "refused")

    def __init__(self, write: Callable, log: dict, log_table: str):
        self.write, self.log, self.log_table = write, log, log_table
        self.own_record = log["record_many"]
        self.guarded, self.refused = guarded_insert, StoreRefusedError


def _save_logged(
    st: _LoggedSave,
    id: str,
    transcript: Sequence[Mapping],
    message_log: Mapping,
    entries: Sequence[Mapping],
    held: Any,
) -> bool:
    alone = partial(st.write, id, transcript, held=held)
    if message_log.get("record_many") is not st.own_record or not entries:
        alone()
        return False
    try:
        st.log["ready"]()  # the log's table exists before a statement writes to it
    except StoreUnavailableError:
        raise  # the save could not go either: nothing is saved, the run raises
    except Exception:  # the log cannot be set up: the save alone; the caller reports
        alone()
        return False
    try:
        st.write(id, transcript, partial(st.guarded, st.log_table, entries), held=held)
        return True
    except (st.refused, StoreCorruptError, ValueError):
        # Perhaps the log's part (its table gone, an entry it refuses): the save alone,
        # and the caller records the log as usual, which reports why. A fault of the
        # store's own raises again here.
        alone()
        return False
