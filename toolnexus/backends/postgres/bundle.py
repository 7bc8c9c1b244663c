"""The PostgreSQL bundle: one pool, and the store, lock and log on it.

`postgres_backend(dsn)` returns `{"store", "lock", "log", "close", "desc"}` whose parts
share one connection pool and know each other explicitly: the store saves a transcript
and records its exchange in its own message log in one statement (the store's fused
"save_logged" and the log's "rows", declared as data), and nothing reads another part's
internals. Nothing connects until first use, so a
process whose database is down still starts, and each call raises
StoreUnavailableError until the database is back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core.extras import needs_extra
from ...history.lazy import lazy_log
from ...store.fused import derive, fuse, fused_call
from . import connect as _connect
from .log import postgres_log
from .store import open_store

__all__ = ["postgres_backend"]


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
    store is `postgres_store`'s: its fused "save_logged" meets the log's "rows" (one
    database), so the transcript's append and the exchange's log rows are one statement,
    committed together, unless a decorator replaced the store's save or the log's
    record. "close" closes a pool made from a DSN.

    >>> sorted(postgres_backend("postgresql://app@db/chat"))  # connects on first use
    ['close', 'desc', 'lock', 'log', 'store']
    """
    with needs_extra("postgres_backend"):
        import psycopg  # noqa: F401

    raw, address, owned = _connect.pg_pool(dsn_or_pool, timeout=timeout, max_size=max_size)
    desc = f"postgres_backend({address!r}, table={table!r}, log_table={log_table!r})"
    pool = raw  # an OwnedPool when made from a DSN: it opens on first use (connect.py)
    size = getattr(raw, "max_size", None) or max_size
    keep = min(4, max(1, size // 4))  # connections the lock never holds
    store = open_store(pool, address, False, table, timeout, lock_timeout, keep)
    built = lazy_log(lambda: postgres_log(pool, log_table, timeout=timeout), desc)

    def rows(entries: Sequence[Mapping]) -> Callable:
        """The log's rows for the store's statement, its table made first (on first use)."""
        return fused_call(built["ready"](), "rows")(entries)

    # The store's save_logged meets these rows: one database (see store.fused).
    where = _connect.database(address)
    log = derive(built, fused={"rows": fuse(rows, "record", "record_many", where=where)})

    def close() -> None:
        log["close"]()
        store["close"]()
        if owned:
            raw.close()

    return {"store": store, "lock": store["lock"], "log": log, "close": close, "desc": desc}
