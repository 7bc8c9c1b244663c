"""Nothing acknowledged is ever lost when a lock is lost while held.

A holder that pauses past its Redis lock's ttl (a SIGSTOP here: its renewer stops too),
or whose PostgreSQL lock session is terminated, must not write over the turn that the
next holder saved meanwhile: its save is refused (LockLostError) before anything is
acknowledged, and the other writer's turn stays.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
import race_worker

from toolnexus import ask, create_in_process_client
from toolnexus.core.frozen import thaw


def _echo(request):
    return {"content": "echo: " + request["messages"][-1]["content"]}


def _paused_holder(spec, conv_id: str, while_paused) -> tuple:
    """Run race_worker.ask_paused in a child; call `while_paused(pid)` while its model
    waits with the lock held; return the child's outcome."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["race_worker", "toolnexus", "psycopg", "psycopg_pool", "redis"])
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    child = ctx.Process(target=race_worker.ask_paused, args=(spec, conv_id, ready, go, out))
    child.start()
    try:
        assert ready.wait(timeout=60), "the child never reached its model"
        while_paused(child.pid)
        go.set()
        outcome = out.get(timeout=60)
        child.join(timeout=30)
        return outcome
    finally:
        if child.is_alive():
            os.kill(child.pid, signal.SIGCONT)
            child.kill()


def _turns(store, conv_id: str) -> list:
    return [m["content"] for m in thaw(store["get"](conv_id))]


def _kept_or_refused(outcome: tuple, turns: list) -> None:
    """The second writer's turn is there; the late one is either refused or kept too."""
    assert turns[:4] == ["first", "echo: first", "second", "echo: second"], turns
    if outcome[0] == "error":
        assert outcome[1].startswith("LockLostError"), outcome
        assert "ask again" in outcome[1]
        assert len(turns) == 4, turns
    else:
        assert turns[4:] == ["late question", "late answer"], turns


@pytest.fixture
def redis_spec(redis_url, unique):
    prefix = f"tnx-lost:{unique}:"
    yield ("redis", redis_url, prefix, {"lock_ttl": 0.3})
    import redis

    c = redis.Redis.from_url(redis_url)
    keys = list(c.scan_iter(match=prefix + "*"))
    if keys:
        c.delete(*keys)


def test_a_redis_holder_paused_past_its_ttl_never_overwrites_the_next_holders_turn(redis_spec):
    store = race_worker.make_store(redis_spec)
    client = create_in_process_client(model="m", generate=_echo, store=store)
    ask(client, "first", id="c")

    def while_paused(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)  # the whole process, its lock renewer too
        try:
            time.sleep(1.0)  # past the 0.3 s ttl: the lock expires
            ask(client, "second", id="c")  # takes the expired lock, saves its turn
        finally:
            os.kill(pid, signal.SIGCONT)

    outcome = _paused_holder(redis_spec, "c", while_paused)
    _kept_or_refused(outcome, _turns(race_worker.make_store(redis_spec), "c"))


@pytest.fixture
def capped_postgres_spec(postgres_dsn, unique):
    table = f"tnx_lost_{unique}"
    yield ("capped_postgres", postgres_dsn, table)
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


def test_a_decorated_postgres_store_whose_lock_session_died_never_overwrites(
    capped_postgres_spec, postgres_dsn, unique
):
    import psycopg

    from toolnexus.backends.postgres.lock import advisory_key as _advisory_key

    store = race_worker.make_store(capped_postgres_spec)
    client = create_in_process_client(model="m", generate=_echo, store=store)
    ask(client, "first", id=unique)
    key = _advisory_key(unique)

    def while_paused(pid: int) -> None:
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            # Only this test's lock session: the one holding this test's unique id's key.
            rows = c.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND"
                " ((classid::bigint << 32) | objid::bigint) = %s",
                (key,),
            ).fetchall()
            assert len(rows) == 1, rows
            c.execute("SELECT pg_terminate_backend(%s)", (rows[0][0],))
        ask(client, "second", id=unique)  # the lock is free again: saves its turn

    outcome = _paused_holder(capped_postgres_spec, unique, while_paused)
    try:
        _kept_or_refused(outcome, _turns(store, unique))
    finally:
        store["close"]()
