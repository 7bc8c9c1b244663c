"""Does saving one more turn cost more as a conversation grows? Per store, measured.

    python benchmarks/store_growth.py [--quick] [--redis URL] [--postgres DSN]
                                      [--no-redis] [--no-postgres]

For each store (memory, file, sqlite, and redis / postgres when reachable; URLs
from the flags, else TOOLNEXUS_TEST_REDIS_URL / TOOLNEXUS_TEST_POSTGRES_DSN, else
localhost) and each history length (10, 100, 1,000, 5,000 messages):
  save   one save that appends one turn (user + assistant) to a stored transcript of
         that length, as `run` does it: the store read the transcript (get), the loop
         extended that value, the store saves it under the store's own cross-process
         "lock", taken and released around the save (median of several)
  cold   the same save from a new store object that never read this conversation
         (it must hash the stored prefix to know it can append: CPU, no reads)
  get    one get of the whole transcript
  lock   the protection alone: the store's "lock" taken and released once (what each
         save above includes; memory has none, so the client's in-process lock)
Prints the milliseconds, and the ratio save(1,000) / save(10): about 1 when the cost
of a save does not depend on history length (the target for sqlite, redis, postgres
is at most 2); the file store rewrites its whole file, so it grows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from toolnexus.core.frozen import freeze

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolnexus.store import file_store, in_memory_store, local_lock, sqlite_store  # noqa: E402

SIZES, QUICK_SIZES = (10, 100, 1_000, 5_000), (10, 1_000)


def turn(i: int) -> list[dict]:
    """Return one exchange of realistic size (~100-200 characters of text per message)."""
    return [
        {"role": "user", "content": f"question {i}: what is the weather like in city {i}? " * 2},
        {"role": "assistant", "content": f"answer {i}: it is sunny and 21 degrees there. " * 3},
    ]


def history(n: int):
    """Return a frozen transcript of `n` messages."""
    return freeze([m for i in range(n // 2) for m in turn(i)])


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _lock_of(store: dict) -> Callable:
    """Return the lock the client takes for this store: its own, else the in-process one."""
    return store.get("lock") or local_lock()


def _locked_save(store: dict, lock: Callable, id: str, t) -> None:
    with lock(id):
        store["save"](id, t)


def _take_and_release(lock: Callable, id: str) -> None:
    with lock(id):
        pass


def measure(make: Callable[[], dict], n: int, repeats: int) -> dict:
    """Return median ms of {save, cold, get, lock} for a conversation of `n` messages."""
    store, id = make(), f"bench-{n}-{uuid.uuid4().hex[:8]}"
    lock = _lock_of(store)
    store["save"](id, history(n))
    t = store["get"](id)
    with lock(id):  # the first take makes the lock (files, pool, scripts): not measured
        pass
    saves, colds, gets, locks = [], [], [], []
    for r in range(repeats):
        t = t.extend(freeze(turn(n + r)))
        saves.append(_timed(lambda t=t: _locked_save(store, lock, id, t)))
        gets.append(_timed(lambda: store["get"](id)))
        locks.append(_timed(lambda: _take_and_release(lock, id)))
    for r in range(max(1, repeats // 3)):
        cold = make()
        cold["get"]("bench-warm-up")  # connections made, but this id never read
        t = t.extend(freeze(turn(n + repeats + r)))
        colds.append(_timed(lambda t=t, cold=cold: cold["save"](id, t)))
        close = cold.get("close")
        if callable(close):
            close()
    store["delete"](id)
    close = store.get("close")
    if callable(close):
        close()
    series = (("save", saves), ("cold", colds), ("get", gets), ("lock", locks))
    return {k: statistics.median(v) for k, v in series}


def _redis(url: str | None) -> tuple[Callable[[], dict], Callable[[], None]] | None:
    try:
        import redis

        from toolnexus.store import redis_store

        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        client.ping()
    except Exception as e:  # unreachable or not installed: reported and skipped
        print(f"(redis skipped: {type(e).__name__})")
        return None
    prefix = f"toolnexus-bench:{uuid.uuid4().hex[:8]}:"

    def cleanup() -> None:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)

    return (lambda: redis_store(client, prefix=prefix)), cleanup


def _postgres(dsn: str | None) -> tuple[Callable[[], dict], Callable[[], None]] | None:
    try:
        import psycopg
        from psycopg_pool import ConnectionPool

        from toolnexus.store import postgres_store

        psycopg.connect(dsn, connect_timeout=2).close()
    except Exception as e:  # unreachable or not installed: reported and skipped
        print(f"(postgres skipped: {type(e).__name__})")
        return None
    table = f"toolnexus_bench_{uuid.uuid4().hex[:8]}"
    pool = ConnectionPool(dsn, min_size=1, max_size=4, open=True)

    def cleanup() -> None:
        with pool.connection() as c:
            c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")
        pool.close()

    return (lambda: postgres_store(pool, table)), cleanup


def _table(title: str, rows: dict, sizes: tuple, key: str) -> list[str]:
    head = f"{title:<10}" + "".join(f"{n:>10,}" for n in sizes)
    lines = [head, "-" * len(head)]
    for name, by_size in rows.items():
        lines.append(f"{name:<10}" + "".join(f"{by_size[n][key]:>10.3f}" for n in sizes))
    return lines


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print the tables, return {"ms": {store: {n: {...}}}, "ratio": ...}."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="sizes 10 and 1,000, few repeats")
    p.add_argument("--redis", default=os.environ.get("TOOLNEXUS_TEST_REDIS_URL"))
    p.add_argument("--postgres", default=os.environ.get("TOOLNEXUS_TEST_POSTGRES_DSN"))
    p.add_argument("--no-redis", action="store_true")
    p.add_argument("--no-postgres", action="store_true")
    args = p.parse_args(argv)
    sizes, repeats = (QUICK_SIZES, 3) if args.quick else (SIZES, 15)

    tmp = tempfile.TemporaryDirectory(prefix="toolnexus-bench-")
    stores: dict[str, Callable[[], dict]] = {}
    backing: dict = {}
    stores["memory"] = lambda: in_memory_store(backing)
    stores["file"] = lambda: file_store(Path(tmp.name) / "files")
    stores["sqlite"] = lambda: sqlite_store(Path(tmp.name) / "chat.db")
    cleanups = [tmp.cleanup]
    remote = (
        ("redis", None if args.no_redis else _redis(args.redis or "redis://127.0.0.1:6379/0")),
        (
            "postgres",
            None
            if args.no_postgres
            else _postgres(args.postgres or "postgresql://postgres@127.0.0.1:5432/postgres"),
        ),
    )
    for name, found in remote:
        if found:
            stores[name], cleanup = found
            cleanups.insert(0, cleanup)

    try:
        ms = {name: {n: measure(make, n, repeats) for n in sizes} for name, make in stores.items()}
    finally:
        for cleanup in cleanups:
            cleanup()

    ratio = {name: ms[name][1_000]["save"] / ms[name][10]["save"] for name in ms}
    lines = [f"median ms, {repeats} repeats ({'quick' if args.quick else 'full'})", ""]
    for title, key in (("save", "save"), ("cold save", "cold"), ("get", "get")):
        lines += _table(title, ms, sizes, key) + [""]
    lines.append("save(1,000) / save(10): " + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items()))
    # The lock does not depend on history length: one figure per store (over all sizes).
    lock_ms = {name: statistics.median(ms[name][n]["lock"] for n in sizes) for name in ms}
    lines.append(
        "lock take+release per save (ms): "
        + ", ".join(f"{k} {v:.3f}" for k, v in lock_ms.items())
        + " (memory: the client's in-process lock)"
    )
    print("\n".join(lines))
    return {"ms": ms, "ratio": ratio, "lock_ms": lock_ms, "sizes": sizes}


if __name__ == "__main__":
    main(sys.argv[1:])
