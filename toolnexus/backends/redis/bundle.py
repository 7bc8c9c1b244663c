"""The Redis bundle: one client, and the store and lock on it (Redis keeps no message log)."""

from __future__ import annotations

from typing import Any

from ...core.extras import needs_extra
from . import connect

__all__ = ["redis_backend"]


def redis_backend(
    url_or_client: Any, *, prefix: str = "toolnexus:", lock_timeout: float = 60.0
) -> dict:
    """Return {"store", "lock", "log", "close", "desc"} on one Redis client.

    The store is `redis_store`'s and the lock its own `redis_lock` on the same client.
    There is no Redis message log: "log" is None (a client with no message_log; pair a
    Redis store with `sqlite_log` or `postgres_log` yourself to keep one).

    >>> b = redis_backend("redis://127.0.0.1:6379/0")  # connects on first use
    >>> sorted(b), b["log"]
    (['close', 'desc', 'lock', 'log', 'store'], None)
    """
    with needs_extra("redis_backend"):
        import redis  # noqa: F401

    from ..redis.store import redis_store

    client = connect.redis_client(url_or_client)
    owned = isinstance(url_or_client, str)
    store = redis_store(client, prefix, lock_timeout=lock_timeout)

    def close() -> None:
        if owned:
            client.close()

    desc = f"redis_backend({connect.redis_address(client)!r}, prefix={prefix!r})"
    return {"store": store, "lock": store["lock"], "log": None, "close": close, "desc": desc}
