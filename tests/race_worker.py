"""A process that asks N times on one conversation id (imported by spawned children: keep it light).

Specs are tuples, so they cross the process boundary by pickling:
store ("sqlite", path) | ("file", dir) | ("sanitized_file", dir) | ("redis", url, prefix)
| ("postgres", dsn, table) | ("namespaced_sqlite", path);
lock ("file", directory) | ("redis", url, prefix) | ("postgres", dsn) | None (no lock)
| DEFAULT (no `lock=` option: the client takes the store's own "lock").
"""

from __future__ import annotations

import contextlib
import time

DEFAULT = "default"


def make_store(spec: tuple) -> dict:
    """Return the store a spec names."""
    kind, *args = spec
    if kind == "sqlite":
        from toolnexus.backends.sqlite.store import sqlite_store

        return sqlite_store(args[0])
    if kind == "namespaced_sqlite":
        from toolnexus.store import capped_store, namespaced, sqlite_store

        return capped_store(1000, namespaced("tenant", sqlite_store(args[0])))
    if kind == "file":
        from toolnexus.backends.file.store import file_store

        return file_store(args[0])
    if kind == "sanitized_file":
        from toolnexus.store import sanitized_file_store

        return sanitized_file_store(args[0])
    if kind == "redis":
        from toolnexus.backends.redis.store import redis_store

        return redis_store(args[0], prefix=args[1], **(args[2] if len(args) > 2 else {}))
    from toolnexus.backends.postgres.store import postgres_store

    if kind == "capped_postgres":
        from toolnexus.store import capped_store

        return capped_store(1000, postgres_store(args[0], args[1]))
    return postgres_store(args[0], args[1])


def make_lock(spec: tuple | None):
    """Return the lock a spec names (None: a lock that does nothing)."""
    from toolnexus.store import file_lock, postgres_lock, redis_lock

    if spec is None:
        return lambda id: contextlib.nullcontext()
    kind, *args = spec
    if kind == "file":
        return file_lock(args[0], timeout=30)
    if kind == "redis":
        return redis_lock(args[0], ttl=5, timeout=30, prefix=args[1])
    return postgres_lock(args[0], timeout=30)


def ask_many(store_spec, lock_spec, conv_id, worker, n, delay, barrier) -> None:
    """Ask `n` numbered prompts on `conv_id` with an echoing model that takes `delay` s."""
    from toolnexus import ask, create_in_process_client

    def generate(request):
        time.sleep(delay)  # widens the window between get and save
        return {"content": "echo: " + request["messages"][-1]["content"]}

    options = {} if lock_spec == DEFAULT else {"lock": make_lock(lock_spec)}
    client = create_in_process_client(
        model="echo", generate=generate, store=make_store(store_spec), **options
    )
    barrier.wait(timeout=60)  # all processes start asking together
    for i in range(n):
        ask(client, f"w{worker}-{i}", id=conv_id)


def ask_paused(store_spec, conv_id, ready, go, out) -> None:
    """Ask once on `conv_id`, the model waiting (lock held) until `go` is set; put the
    outcome in `out` (the test pauses this process meanwhile, past its lock's ttl)."""
    from toolnexus import ask, create_in_process_client

    def generate(request):
        ready.set()
        go.wait(timeout=60)
        return {"content": "late answer"}

    client = create_in_process_client(model="m", generate=generate, store=make_store(store_spec))
    try:
        ask(client, "late question", id=conv_id)
        out.put(("ok", ""))
    except Exception as e:
        out.put(("error", f"{type(e).__name__}: {e}"))
