"""Connecting to Redis for the store and lock (redis-py imported lazily); a password
never reaches an error or a `desc`."""

from __future__ import annotations

from typing import Any

from ...core.errors import scrub_chain
from ...core.extras import needs_extra
from ...store.errors import StoreUnavailableError


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
