"""How the client's CPU per turn grows with the history, against one json.dumps of it.

    python benchmarks/turn_growth.py [--quick] [--no-stores]

One exchange (one model turn, a text answer) on a conversation of N messages, for N in
10, 1,000 and 3,000. The model is an httpx.MockTransport that answers at once without
reading the request, so what is measured is the client's own work: load, translate and
repair, encode the request, decode the answer, save. Each round measures every N once
(a new conversation each, so nothing is warm that a service would not have warm) and the
yardstick, one `json.dumps` of the N-message history, at that moment: the growth of a
round is (CPU at N - CPU at 10) / that json.dumps, so a noisy machine moves both sides
alike. Printed: the median process CPU per N and the median growth (issue 13: at most
1.2x, aim under 0.5x; issue 26 on the stores: at most 0.5x own, 1.0x other). Paths:

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
  cold     a conversation this process never saw: a new client and store value (fresh
           runtime, empty memo) for each measured exchange (issue 35: at most 1.0x,
           aim 0.5x)
  unseen   a conversation a worker never saw: a new client (fresh runtime) over the one
           store value the worker keeps, which has read others but not this one (its
           connection and buffers warm, as a running service's are; cold is a restart)
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

import toolnexus as tn
from toolnexus.core.frozen import thaw
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


def memo_path() -> Callable[[int], float]:
    """Return one round: the CPU of an exchange on an n-message conversation this client
    saved itself (a new conversation each round)."""
    store = in_memory_store()
    c = client(store)

    def one(n: int) -> float:
        cid = f"memo-{uuid.uuid4().hex[:8]}"
        store["save"](cid, history(n - 2))
        tn.run(c, "warm up", id=cid)  # now saved by this runtime: n messages, remembered
        spent = cpu(lambda: tn.run(c, "one more", id=cid))
        store["delete"](cid)
        return spent

    return one


def history_path() -> Callable[[int], float]:
    """Return one round: the CPU of an exchange given an n-message history as `history=`."""
    c = client(in_memory_store())
    given = functools.cache(lambda n: freeze_transcript(history(n)))  # as a store's get returns

    def one(n: int) -> float:
        return cpu(lambda: tn.run(c, "one more", history=given(n)))

    return one


@functools.cache
def _plain(n: int) -> list:
    return thaw(tn.run(client(in_memory_store()), "x", history=history(n))["messages"])


def dumps(n: int) -> float:
    """Median CPU of one json.dumps of an n-message history (plain dicts), measured now."""
    plain = _plain(n)
    return statistics.median(cpu(lambda: json.dumps(plain)) for _ in range(5))


def own_path(store: dict) -> Callable[[int], float]:
    """Return one round: the CPU of an exchange of one client continuing its own n-message
    conversation."""
    c = client(store)

    def one(n: int) -> float:
        cid = f"own-{uuid.uuid4().hex[:8]}"
        store["save"](cid, history(n - 2))
        tn.run(c, "warm up", id=cid)  # loaded cold once, then saved by this client
        spent = cpu(lambda: tn.run(c, "one more", id=cid))
        store["delete"](cid)
        return spent

    return one


def cold_path(make: Callable[[], dict]) -> Callable[[int], float]:
    """Return one round: the CPU of an exchange on an n-message conversation this process
    never saw: a new client (a fresh runtime) over a new store value (an empty memo), as
    a worker that did not serve it last, or a restart."""
    writer = make()

    def one(n: int) -> float:
        cid = f"cold-{uuid.uuid4().hex[:8]}"
        writer["save"](cid, history(n - 2))
        fresh = client(make())
        spent = cpu(lambda: tn.run(fresh, "one more", id=cid))
        writer["delete"](cid)
        return spent

    return one


def unseen_path(make: Callable[[], dict]) -> Callable[[int], float]:
    """Return one round: the CPU of an exchange on an n-message conversation a worker's
    long-lived store value never read, by a new client (a fresh runtime) over it."""
    writer, kept = make(), make()

    def one(n: int) -> float:
        cid = f"unseen-{uuid.uuid4().hex[:8]}"
        writer["save"](cid, history(n - 2))
        fresh = client(kept)
        spent = cpu(lambda: tn.run(fresh, "one more", id=cid))
        writer["delete"](cid)
        return spent

    return one


def other_path(stores: tuple[dict, dict]) -> Callable[[int], float]:
    """Return one round: the CPU of an exchange of one of two clients (own runtime, own
    store value) when the other saved the n-message conversation last."""
    a, b = client(stores[0]), client(stores[1])

    def one(n: int) -> float:
        cid = f"other-{uuid.uuid4().hex[:8]}"
        stores[0]["save"](cid, history(n - 6))
        for c in (a, b, a):  # turns: each has loaded and saved it; a saved last
            tn.run(c, "warm up", id=cid)
        spent = cpu(lambda: tn.run(b, "one more", id=cid))
        stores[0]["delete"](cid)
        return spent

    return one


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


def _growth(figures: dict, key: tuple, sizes: tuple, one: Callable, rounds: int) -> None:
    """Measure `one(n)` for every size in each round, with the yardstick of that moment:
    the growth of a round is (one(n) - one(sizes[0])) / json.dumps(n), so a machine that
    slows down or speeds up between rounds moves both sides alike. Record and print the
    medians."""
    spent: dict = {n: [] for n in sizes}
    growth: dict = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            spent[n].append(one(n))
        for n in sizes[1:]:
            growth[n].append((spent[n][-1] - spent[sizes[0]][-1]) / dumps(n))
    for n in sizes:
        cpu_ms = statistics.median(spent[n]) * 1e3
        g = statistics.median(growth[n]) if growth[n] else 0.0
        figures[(*key, n)] = {"cpu_ms": cpu_ms, "growth_x_dumps": g}
        label = " ".join(key)
        print(f"  {label:16} {n:5} messages  {cpu_ms:7.3f} ms CPU  growth from {sizes[0]}: "
              f"{g:5.2f}x json.dumps ({dumps(n) * 1e3:.3f} ms)")  # fmt: skip


def store_figures(sizes: tuple, rounds: int) -> dict:
    """Measure own and other per durable store; return {(store, path, n): figures}."""
    figures: dict = {}
    for name, opened in durable_stores().items():
        try:
            with ExitStack() as stack:
                make = stack.enter_context(opened())
                _growth(figures, (name, "own"), sizes, own_path(make()), rounds)
                _growth(figures, (name, "other"), sizes, other_path((make(), make())), rounds)
                _growth(figures, (name, "cold"), sizes, cold_path(make), rounds)
                _growth(figures, (name, "unseen"), sizes, unseen_path(make), rounds)
        except Exception as e:  # unreachable or not installed: reported, skipped
            print(f"  {name}: skipped ({type(e).__name__}: {e})")
    return figures


def main(argv: list[str] | None = None) -> dict:
    """Print the figures; return them."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few rounds, to check it runs")
    p.add_argument("--no-stores", action="store_true", help="the in-process paths only")
    a = p.parse_args(argv)
    rounds = 3 if a.quick else 25
    sizes = (10, 1000) if a.quick else (10, 1000, 3000)
    figures: dict = {}
    for path, measure in (("memo", memo_path), ("history", history_path)):
        _growth(figures, (path,), sizes, measure(), rounds)
    if not a.no_stores:
        figures.update(store_figures(sizes, rounds))
    return figures


if __name__ == "__main__":
    main()
