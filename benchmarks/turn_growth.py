"""How the client's CPU per turn grows with the history, against one json.dumps of it.

    python benchmarks/turn_growth.py [--quick]

One exchange (one model turn, a text answer) on a conversation of N messages, for N in
10, 1,000 and 3,000. The model is an httpx.MockTransport that answers at once without
reading the request, so what is measured is the client's own work: load, translate and
repair, encode the request, decode the answer, save. Printed: the median process CPU of
one exchange per N, and the growth from 10 to N messages as a multiple of the CPU of one
`json.dumps` of the N-message history (issue 13's yardstick: at most 1.2x, aim under
0.5x). Two paths:

  memo     the conversation was saved by this client's runtime (in-memory store): its
           messages and their JSON text are reused, only the new ones are encoded
  history  the same (frozen) history passed as `history=` each time: translated,
           repaired and encoded once per exchange (what a durable store's fresh objects
           cost on each load, on top of decoding them)

Then, per durable store (SQLite in a temporary file; PostgreSQL and Redis from
TOOLNEXUS_TEST_POSTGRES_DSN / TOOLNEXUS_TEST_REDIS_URL, skipped with the reason when
absent or unreachable; unique table and key names, removed after), the whole exchange
with its load and save:

  own      one client alone continues its own conversation
  other    two clients (two runtimes, two store values: two workers of a service) take
           turns on one id; measured is an exchange of one when the OTHER saved last
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from pyrsistent import thaw

import toolnexus as tn
from toolnexus.core.transcript import freeze_transcript
from toolnexus.store import in_memory_store, sqlite_store
from toolnexus.testing import openai_response, text_reply

ANSWER = json.dumps(openai_response(text_reply("Noted."))).encode()
WORDS = "the quick brown fox jumps over the lazy dog while the model keeps talking "


def history(n: int) -> list[dict]:
    """Return n alternating user/assistant messages of about 150 characters each."""
    role = ("user", "assistant")
    return [{"role": role[i % 2], "content": f"{i}: {WORDS * 2}"} for i in range(n)]


def client(store: dict) -> tn.Client:
    """Return a client whose model answers at once, never reading the request."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=ANSWER,
                                    headers={"content-type": "application/json"}))  # fmt: skip
    return tn.create_client(base_url="http://model.test/v1", model="m", store=store,
                            transport=transport)  # fmt: skip


def cpu(fn) -> float:
    """Return the process CPU seconds of one call.

    What came before (a round's setup: a new history, its warm-up run) is frozen out of
    the collector's sight meanwhile (gc.freeze): else a full collection of the setup's
    objects lands in some measured calls and not others, and the median measures the
    collector's timing (all paths alike). What the call itself allocates is collected
    as usual.
    """
    gc.freeze()
    try:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0
    finally:
        gc.unfreeze()


def memo_path(n: int, rounds: int) -> float:
    """Median CPU of an exchange on a conversation this client saved (n messages before)."""
    store = in_memory_store()
    c = client(store)
    seed = history(n - 2)
    out = []
    for i in range(rounds):
        cid = f"c{i}"
        store["save"](cid, seed)
        tn.run(c, "warm up", id=cid)  # now saved by this runtime: n messages, remembered
        out.append(cpu(lambda cid=cid: tn.run(c, "one more", id=cid)))
    return statistics.median(out)


def history_path(n: int, rounds: int) -> float:
    """Median CPU of an exchange given the n-message history as `history=`."""
    c = client(in_memory_store())
    given = freeze_transcript(history(n))  # as a store's get returns it
    tn.run(c, "warm up", history=given)
    return statistics.median(cpu(lambda: tn.run(c, "one more", history=given))
                             for _ in range(rounds))  # fmt: skip


@functools.cache
def dumps(n: int, rounds: int) -> float:
    """Median CPU of one json.dumps of an n-message history (plain dicts), measured once
    per size and run (the yardstick of every path: its own noise would be theirs)."""
    plain = thaw(tn.run(client(in_memory_store()), "x", history=history(n))["messages"])
    return statistics.median(cpu(lambda: json.dumps(plain)) for _ in range(rounds))


def own_path(store: dict, n: int, rounds: int) -> float:
    """Median CPU of an exchange of one client continuing its own n-message conversation."""
    c, out = client(store), []
    for _ in range(rounds):
        cid = f"own-{uuid.uuid4().hex[:8]}"
        store["save"](cid, history(n - 2))
        tn.run(c, "warm up", id=cid)  # loaded cold once, then saved by this client
        out.append(cpu(lambda cid=cid: tn.run(c, "one more", id=cid)))
        store["delete"](cid)
    return statistics.median(out)


def other_path(stores: tuple[dict, dict], n: int, rounds: int) -> float:
    """Median CPU of an exchange of one of two clients (own runtime, own store value) when
    the other saved the n-message conversation last."""
    a, b = client(stores[0]), client(stores[1])
    out = []
    for _ in range(rounds):
        cid = f"other-{uuid.uuid4().hex[:8]}"
        stores[0]["save"](cid, history(n - 6))
        for c in (a, b, a):  # turns: each has loaded and saved it; a saved last
            tn.run(c, "warm up", id=cid)
        out.append(cpu(lambda cid=cid: tn.run(b, "one more", id=cid)))
        stores[0]["delete"](cid)
    return statistics.median(out)


@contextmanager
def _sqlite() -> Iterator[Callable[[], dict]]:
    with tempfile.TemporaryDirectory(prefix="toolnexus-turns-") as tmp:
        path = Path(tmp) / "chat.db"
        yield lambda: sqlite_store(path)


@contextmanager
def _postgres(dsn: str) -> Iterator[Callable[[], dict]]:
    from psycopg_pool import ConnectionPool

    from toolnexus.store import postgres_store

    table = f"toolnexus_turns_{uuid.uuid4().hex[:8]}"
    pool = ConnectionPool(dsn, min_size=1, max_size=4, open=True, timeout=5)
    made: list[dict] = []
    try:
        yield lambda: made.append(postgres_store(pool, table)) or made[-1]
    finally:
        for s in made:
            s["close"]()
        with pool.connection() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")
        pool.close()


@contextmanager
def _redis(url: str) -> Iterator[Callable[[], dict]]:
    import redis

    from toolnexus.store import redis_store

    conn = redis.Redis.from_url(url, socket_connect_timeout=2)
    conn.ping()
    prefix = f"toolnexus-turns:{uuid.uuid4().hex[:8]}:"
    try:
        yield lambda: redis_store(conn, prefix=prefix)
    finally:
        keys = list(conn.scan_iter(match=prefix + "*", count=1000))
        if keys:
            conn.delete(*keys)
        conn.close()


def durable_stores() -> dict[str, Callable[[], Any]]:
    """Return {name: a context manager yielding a store maker}; print why one is skipped."""
    found: dict = {"sqlite": _sqlite}
    for name, var, opener in (("postgres", "TOOLNEXUS_TEST_POSTGRES_DSN", _postgres),
                              ("redis", "TOOLNEXUS_TEST_REDIS_URL", _redis)):  # fmt: skip
        address = os.environ.get(var)
        if not address:
            print(f"  {name}: skipped ({var} is not set)")
            continue
        found[name] = lambda opener=opener, address=address: opener(address)
    return found


def _growth(figures: dict, key: tuple, sizes: tuple, measure: Callable, rounds: int) -> None:
    """Measure `measure(n)` per size; record and print its growth from the first size."""
    base = None
    for n in sizes:
        spent = measure(n)
        base = spent if base is None else base
        json_cpu = dumps(n, max(rounds, 5) * 10)
        growth = (spent - base) / json_cpu if n != sizes[0] else 0.0
        figures[(*key, n)] = {"cpu_ms": spent * 1e3, "growth_x_dumps": growth}
        label = " ".join(key)
        print(
            f"  {label:16} {n:5} messages  {spent * 1e3:7.3f} ms CPU  "
            f"growth from {sizes[0]}: {growth:5.2f}x json.dumps ({json_cpu * 1e3:.3f} ms)"
        )


def store_figures(sizes: tuple, rounds: int) -> dict:
    """Measure own and other per durable store; return {(store, path, n): figures}."""
    figures: dict = {}
    for name, opened in durable_stores().items():
        try:
            with ExitStack() as stack:
                make = stack.enter_context(opened())
                one, two = make(), (make(), make())
                own = functools.partial(own_path, one, rounds=rounds)
                other = functools.partial(other_path, two, rounds=rounds)
                _growth(figures, (name, "own"), sizes, own, rounds)
                _growth(figures, (name, "other"), sizes, other, rounds)
        except Exception as e:  # unreachable or not installed: reported, skipped
            print(f"  {name}: skipped ({type(e).__name__}: {e})")
    return figures


def main(argv: list[str] | None = None) -> dict:
    """Print the figures; return them."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few rounds, to check it runs")
    p.add_argument("--no-stores", action="store_true", help="the in-process paths only")
    a = p.parse_args(argv)
    rounds = 3 if a.quick else 40
    sizes = (10, 1000) if a.quick else (10, 1000, 3000)
    figures: dict = {}
    for path, measure in (("memo", memo_path), ("history", history_path)):
        _growth(figures, (path,), sizes, lambda n, m=measure: m(n, rounds), rounds)
    if not a.no_stores:
        figures.update(store_figures(sizes, 3 if a.quick else 15))
    return figures


if __name__ == "__main__":
    main()
