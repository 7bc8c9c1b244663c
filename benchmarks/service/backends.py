"""The chat service's configuration (from the environment) and its backends (store, lock, log).

`read_config(env)` is pure: it turns environment variables into a config map or raises
ConfigError naming the variable. `open_backends(config)` builds the store, the lock and
the message log without touching the network, so a worker whose database is down still
starts and answers 503 until the database comes back.
"""

from __future__ import annotations

import re
import select
from collections.abc import Callable, Mapping
from typing import Any

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.secrets import redact_dsn as redact
from toolnexus.history.lazy import lazy_log
from toolnexus.store import (
    file_lock,
    local_lock,
    postgres_backend,
    postgres_lock,
    redis_lock,
    redis_store,
    sqlite_store,
)

__all__ = ["ConfigError", "read_config", "open_backends", "backend_kind"]

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}\Z")


class ConfigError(ValueError):
    """An environment variable of the service has a value it cannot use."""


def backend_kind(url: str) -> str:
    """Return "postgres", "redis", "sqlite", "memory" or "none" for a store/lock/log URL.

    >>> [backend_kind(u) for u in ("postgresql://db/app", "redis://r:6379/0", "sqlite:c.db")]
    ['postgres', 'redis', 'sqlite']
    """
    lowered = url.lower()
    if lowered.startswith(("postgres://", "postgresql://")):
        return "postgres"
    if lowered.startswith(("redis://", "rediss://", "unix://")):
        return "redis"
    if lowered.startswith("sqlite:"):
        return "sqlite"
    if lowered in ("memory", "none", "local", "auto") or lowered.startswith("file:"):
        return lowered.split(":", 1)[0]
    raise ConfigError(
        f"unknown backend {redact(url)!r}: expected postgres://..., redis://..., sqlite:PATH"
    )


def _number(env: Mapping[str, str], name: str, default: float, least: float = 0) -> float:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < least:
        raise ConfigError(f"{name} must be >= {least}, got {raw!r}")
    return value


def _table(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name) or default
    if not _TABLE.match(value):
        raise ConfigError(f"{name} must be a plain SQL name (letters, digits, _), got {value!r}")
    return value


def _default_lock(store: str) -> str:
    kind = backend_kind(store)
    if kind == "sqlite":  # one host: a file lock next to the database file
        return "file:" + store[len("sqlite:") :] + ".locks"
    return store


def _default_log(store: str) -> str:
    # Redis has no message log backend: the log is then off unless TOOLNEXUS_LOG names one.
    return "none" if backend_kind(store) == "redis" else store


def read_config(env: Mapping[str, str]) -> FrozenMap:
    """Return the service configuration read from environment variables (pure).

    >>> read_config({})["driver"], read_config({"TOOLNEXUS_DRIVER": "threads"})["driver"]
    ('async', 'threads')
    >>> try:
    ...     read_config({"TOOLNEXUS_DRIVER": "fibers"})
    ... except ConfigError as e:
    ...     print(e)
    TOOLNEXUS_DRIVER must be async or threads, got 'fibers'
    """
    store = env.get("TOOLNEXUS_STORE") or "sqlite:chat_service.db"
    if backend_kind(store) not in ("postgres", "redis", "sqlite"):
        raise ConfigError("TOOLNEXUS_STORE must be postgres://..., redis://... or sqlite:PATH")
    lock = env.get("TOOLNEXUS_LOCK") or "auto"
    lock = _default_lock(store) if lock == "auto" else lock
    log = env.get("TOOLNEXUS_LOG") or "auto"
    log = _default_log(store) if log == "auto" else log
    if backend_kind(lock) in ("memory", "none", "auto"):
        raise ConfigError("TOOLNEXUS_LOCK must be postgres://, redis://, file:DIR or local")
    if backend_kind(log) in ("local", "auto", "file"):
        raise ConfigError("TOOLNEXUS_LOG must be postgres://..., sqlite:PATH, memory or none")
    style = env.get("TOOLNEXUS_STYLE") or "openai"
    if style not in ("openai", "anthropic"):
        raise ConfigError(f"TOOLNEXUS_STYLE must be openai or anthropic, got {style!r}")
    inflight = int(_number(env, "TOOLNEXUS_MAX_INFLIGHT", 32, 1))
    driver = env.get("TOOLNEXUS_DRIVER") or "async"
    if driver not in ("async", "threads"):
        raise ConfigError(f"TOOLNEXUS_DRIVER must be async or threads, got {driver!r}")
    return FrozenMap(
        {
            "base_url": env.get("TOOLNEXUS_BASE_URL") or "https://api.openai.com/v1",
            "style": style,
            "model": env.get("TOOLNEXUS_MODEL") or "gpt-4.1-mini",
            "api_key": env.get("TOOLNEXUS_API_KEY") or None,
            "system_prompt": env.get("TOOLNEXUS_SYSTEM_PROMPT") or None,
            "timeout_ms": _number(env, "TOOLNEXUS_TIMEOUT_MS", 120_000),
            "retries": int(_number(env, "TOOLNEXUS_RETRIES", 2)),
            "store": store,
            "store_table": _table(env, "TOOLNEXUS_STORE_TABLE", "chat_transcripts"),
            "store_prefix": env.get("TOOLNEXUS_STORE_PREFIX") or "chat:",
            "lock": lock,
            "lock_timeout": _number(env, "TOOLNEXUS_LOCK_TIMEOUT", 30, 0.1),
            "lock_ttl": _number(env, "TOOLNEXUS_LOCK_TTL", 30, 0.1),
            "log": log,
            "log_table": _table(env, "TOOLNEXUS_LOG_TABLE", "chat_log"),
            "max_inflight": inflight,
            "driver": driver,
            "pool_size": int(_number(env, "TOOLNEXUS_POOL_SIZE", 8, 1)),
            # How long a request waits for the database before answering 503.
            "backend_timeout": _number(env, "TOOLNEXUS_BACKEND_TIMEOUT", 3, 0.1),
        }
    )


# ---- connections (shared by store, lock and log of one backend) ------------------


def _pg_pool(dsn: str, size: int, timeout: float, name: str) -> Any:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        dsn,
        # Full from the start: the pool grows one connection at a time, so a cold worker
        # under a burst would queue requests behind connection setups.
        min_size=size,
        max_size=size,
        timeout=timeout,
        open=False,
        name=name,
        # A connection broken by a database restart is found and replaced before use,
        # so the first request after an outage does not fail on a stale connection.
        check=_check_idle,
        # The pool retries a lost server with a doubling delay until this many seconds,
        # then gives up and starts afresh on the next request: a short window keeps the
        # delay (and so the recovery after a long outage) to a few seconds.
        reconnect_timeout=max(10.0, 3 * timeout),
        # Autocommit: the lock, the load, an append and the log are single statements,
        # and the store opens its own transactions where it needs them.
        kwargs={"connect_timeout": max(1, int(timeout)), "autocommit": True},
    )
    pool.open(wait=False)  # connects in the background: a database that is down is no crash
    return pool


def _check_idle(conn: Any) -> None:
    """Raise if the server has closed this idle connection; no round trip when it has not.

    An idle connection has nothing to read: a readable socket means the server ended it
    (a restart says so, then closes), so only then is it checked for real, which raises.
    psycopg_pool's own check_connection costs a round trip on every borrow: a tenth of a
    worker's CPU under load.
    """
    if select.select([conn.fileno()], [], [], 0)[0]:
        from psycopg_pool import ConnectionPool

        ConnectionPool.check_connection(conn)


def _redis(url: str, timeout: float) -> Any:
    import redis

    return redis.Redis.from_url(
        url, socket_connect_timeout=timeout, socket_timeout=max(timeout, 5.0)
    )


class _CappedPool:
    """A psycopg pool whose waits for a connection never exceed `cap` seconds.

    postgres_lock waits for a pooled connection as long as its lock timeout; when the
    database is down that is the lock timeout (say 30 s) before a 503, instead of the
    few seconds the service promises. Requests in flight never exceed the pool size
    (the app's semaphore), so the cap only bites when the database is unreachable.
    """

    def __init__(self, pool: Any, cap: float):
        self.pool, self.cap = pool, cap
        self.conninfo, self.connection = pool.conninfo, pool.connection

    def getconn(self, timeout: float | None = None) -> Any:
        return self.pool.getconn(timeout=min(timeout or self.cap, self.cap))

    def putconn(self, conn: Any) -> None:
        self.pool.putconn(conn)


class _Connections:
    """The pools and clients of a worker, one per backend URL, closed together."""

    def __init__(self, config: Mapping):
        self.config = config
        self.made: dict[tuple, Any] = {}
        self.bundles: dict[tuple, Any] = {}

    def pg(self, dsn: str, role: str, size: int) -> Any:
        key = ("pg", dsn, role)
        if key not in self.made:
            name = f"chat-{role}"
            self.made[key] = _pg_pool(dsn, size, self.config["backend_timeout"], name)
        return self.made[key]

    def redis(self, url: str) -> Any:
        key = ("redis", url)
        if key not in self.made:
            self.made[key] = _redis(url, self.config["backend_timeout"])
        return self.made[key]

    def warm(self) -> None:
        """Wait (at most the backend timeout each) for the pools to fill; never raises."""
        for key, conn in self.made.items():
            if key[0] == "pg":
                try:
                    conn.wait(timeout=self.config["backend_timeout"])
                except Exception:  # the database is down: the worker starts anyway (503s)
                    pass

    def close(self) -> None:
        for conn in self.made.values():
            conn.close()


# ---- the message log, built on first use ---------------------------------------


def _log(config: Mapping, conns: _Connections) -> tuple[dict | None, Callable | None]:
    """Return (message log or None, forget(conversation_id) -> count removed, or None)."""
    log = _make_log(config, conns)
    if log is None:
        return None, None
    return log, lambda conversation_id: log["clear"](conversation_id=conversation_id)


def _make_log(config: Mapping, conns: _Connections) -> dict | None:
    url, kind = config["log"], backend_kind(config["log"])
    if kind == "none":
        return None
    if kind == "memory":  # per process: workers do not share it (a demo setting)
        from toolnexus.history import in_memory_log

        return in_memory_log()
    if kind == "sqlite":
        from toolnexus.history import sqlite_log

        path = url[len("sqlite:") :]
        return lazy_log(lambda: sqlite_log(path), f"sqlite_log({path!r})")
    if kind == "postgres":
        return _bundle(config, conns, url)["log"]
    raise ConfigError(f"TOOLNEXUS_LOG cannot be {redact(url)!r}")


def _bundle(config: Mapping, conns: _Connections, url: str) -> FrozenMap:
    """The store and log of one PostgreSQL database as one backend bundle on the data pool:
    an exchange's transcript and its log entries are saved in one statement."""
    key = ("bundle", url)
    if key not in conns.bundles:
        pool = conns.pg(url, "data", config["pool_size"])
        b = postgres_backend(pool, table=config["store_table"], log_table=config["log_table"],
                             timeout=config["backend_timeout"])  # fmt: skip
        conns.bundles[key] = b
    return conns.bundles[key]


def _store(config: Mapping, conns: _Connections) -> dict:
    url, kind = config["store"], backend_kind(config["store"])
    if kind == "postgres":
        return _bundle(config, conns, url)["store"]
    if kind == "redis":
        return redis_store(conns.redis(url), config["store_prefix"])
    return sqlite_store(url[len("sqlite:") :])


def _lock(config: Mapping, conns: _Connections) -> Callable:
    url, kind, timeout = config["lock"], backend_kind(config["lock"]), config["lock_timeout"]
    if kind == "postgres":
        # Each held lock keeps a connection for the whole exchange: one per request in flight.
        pool = conns.pg(url, "locks", config["max_inflight"] + 2)
        return postgres_lock(_CappedPool(pool, config["backend_timeout"]), timeout=timeout)
    if kind == "redis":
        return redis_lock(conns.redis(url), ttl=config["lock_ttl"], timeout=timeout)
    if kind == "file":
        return file_lock(url[len("file:") :], timeout=timeout)
    return local_lock(timeout)  # "local": one worker process only


def open_backends(config: Mapping) -> FrozenMap:
    """Return {store, lock, log, forget_log, warm, close} for a config (no network I/O yet)."""
    conns = _Connections(config)
    store, lock = _store(config, conns), _lock(config, conns)
    log, forget = _log(config, conns)

    def close() -> None:
        if log is not None and callable(log.get("close")):
            log["close"]()
        conns.close()

    return FrozenMap(
        {"store": store, "lock": lock, "log": log, "forget_log": forget, "close": close,
         "warm": conns.warm}
    )  # fmt: skip
