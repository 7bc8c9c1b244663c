"""Safe by default: every shipped durable store pairs itself with a cross-process lock.

The proof: processes racing on one conversation id with default options (no `lock=`)
keep every turn, for each durable store and for two `python -m toolnexus chat`
processes. Then, per store and decorator, which lock that is (checked against the
underlying lock: while the store's lock is held, that lock cannot be taken).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest
import race_worker
from cryptography.fernet import Fernet

from toolnexus.core.frozen import thaw
from toolnexus.store import (
    LockTimeoutError,
    capped_store,
    encrypted,
    file_lock,
    file_store,
    in_memory_store,
    namespaced,
    observed,
    postgres_lock,
    read_through,
    redis_lock,
    retention,
    sanitize_ids,
    sanitized_file_store,
    sqlite_store,
)
from toolnexus.store.decorators import sanitize_id
from toolnexus.testing import fake_provider, text_reply

PROCS, ASKS = 2, 15


def _race(store_spec, conv_id: str, delay: float) -> list[dict]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["race_worker", "toolnexus", "psycopg", "psycopg_pool", "redis"])
    barrier = ctx.Barrier(PROCS)
    procs = [
        ctx.Process(
            target=race_worker.ask_many,
            args=(store_spec, race_worker.DEFAULT, conv_id, w, ASKS, delay, barrier),
        )
        for w in range(PROCS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * PROCS
    store = race_worker.make_store(store_spec)
    try:
        return thaw(store["get"](conv_id))
    finally:
        store.get("close", lambda: None)()


def _all_turns_kept(transcript: list[dict], procs: int = PROCS, asks: int = ASKS) -> None:
    """Every prompt of every process is there once, each answered, each process in order."""
    for i, m in enumerate(transcript):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant"), (i, m)
        if m["role"] == "assistant":
            assert m["content"] == "echo: " + transcript[i - 1]["content"]
    prompts = [m["content"] for m in transcript[::2]]
    assert sorted(prompts) == sorted(f"w{w}-{i}" for w in range(procs) for i in range(asks))
    for w in range(procs):
        assert [p for p in prompts if p.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(asks)]


@pytest.fixture
def store_spec(request, tmp_path, unique):
    """Return the race_worker spec of the store named by the test's parameter."""
    kind = request.param
    if kind in ("file", "sanitized_file"):
        yield (kind, str(tmp_path / "store"))
    elif kind in ("sqlite", "namespaced_sqlite"):
        yield (kind, str(tmp_path / "race.db"))
    elif kind == "redis":
        url = request.getfixturevalue("redis_url")
        yield ("redis", url, f"tnx-default:{unique}:")
        import redis

        c = redis.Redis.from_url(url)
        keys = list(c.scan_iter(match=f"tnx-default:{unique}:*"))
        if keys:
            c.delete(*keys)
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        table = f"tnx_default_{unique}"
        yield ("postgres", dsn, table)
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


@pytest.mark.parametrize(
    "store_spec",
    ["file", "sanitized_file", "sqlite", "namespaced_sqlite", "redis", "postgres"],
    indirect=True,
)
def test_two_processes_with_default_options_lose_no_turn(store_spec):
    """Fails on the old code (no "lock" on the stores: the client's lock was in-process,
    and of 30 user turns about 15 were kept). The echo model's 20 ms between get and save
    makes the runs overlap; the assertion holds whatever the interleaving."""
    _all_turns_kept(_race(store_spec, "shared/conv ✓ " + "é" * 120, delay=0.02))


def test_two_chat_processes_on_one_sqlite_id_lose_no_turn(tmp_path):
    """Two `python -m toolnexus chat --store sqlite:PATH --id me` fed 15 prompts each
    against one fake provider: all 30 user turns are kept (fails on the old code)."""
    db = tmp_path / "chat.db"

    def echo(body, dialect):
        return text_reply("echo: " + body["messages"][-1]["content"])

    env = {**os.environ, "OPENAI_API_KEY": "sk-test-chat-race"}
    with fake_provider(echo, delay=0.02) as fp:
        argv = [sys.executable, "-m", "toolnexus", "chat", "--base-url", fp.url, "--model", "m"]
        argv += ["--store", f"sqlite:{db}", "--id", "me"]
        procs = [
            subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )  # fmt: skip
            for _ in range(PROCS)
        ]
        for w, p in enumerate(procs):  # both get all their input at once, then run together
            p.stdin.write("".join(f"w{w}-{i}\n" for i in range(ASKS)))
            p.stdin.close()
        outs = [(p.wait(timeout=180), p.stdout.read(), p.stderr.read()) for p in procs]
    for code, out, err in outs:
        assert code == 0 and err == "", err
        assert out.count("echo: ") == ASKS
    _all_turns_kept(thaw(sqlite_store(db)["get"]("me")))


# ---- which lock each store carries ------------------------------------------------------


def _held_elsewhere(lock, id: str) -> bool:
    """Whether `lock(id)` cannot be taken now (it times out at once: no waiting on luck)."""
    try:
        with lock(id):
            return False
    except LockTimeoutError:
        return True


def _store_lock_is(store, id: str, underlying, key: str) -> None:
    """While `store["lock"](id)` is held, `underlying(key)` is taken; after, it is free."""
    assert not _held_elsewhere(underlying, key)
    with store["lock"](id):
        assert _held_elsewhere(underlying, key)
        assert not _held_elsewhere(underlying, key + "-other")
    assert not _held_elsewhere(underlying, key)


def test_file_store_locks_with_file_locks_beside_its_directory(tmp_path):
    s = file_store(tmp_path / "s")
    assert os.listdir(tmp_path) == ["s"]  # the lock directory is made on first use only
    _store_lock_is(s, "a/b é", file_lock(tmp_path / "s-locks", timeout=0.05), "a/b é")
    assert sorted(os.listdir(tmp_path)) == ["s", "s-locks"] and os.listdir(tmp_path / "s") == []


def test_sqlite_store_locks_beside_its_file_whatever_the_path_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink(tmp_path, tmp_path / "link")
    s = sqlite_store("link/chat.db")
    lock = file_lock(str(tmp_path / "chat.db") + "-locks", timeout=0.05)
    _store_lock_is(s, "me", lock, "me")
    _store_lock_is(sqlite_store(tmp_path / "chat.db"), "me", lock, "me")


def test_redis_store_locks_with_a_redis_lock_on_its_client(redis_url, unique):
    from toolnexus.store import redis_store

    s = redis_store(redis_url, prefix=f"tnx:{unique}:")
    _store_lock_is(s, "x", redis_lock(redis_url, prefix=f"tnx:{unique}:lock:", timeout=0.05), "x")
    assert s["ids"]() == ()  # lock keys are not conversations


def test_postgres_store_locks_with_an_advisory_lock(postgres_dsn, unique):
    from toolnexus.store import postgres_store

    s = postgres_store(postgres_dsn, table=f"tnx_{unique}")
    other = postgres_lock(postgres_dsn, timeout=0.05)
    try:
        _store_lock_is(s, "x", other, "x")
    finally:
        other.close()
        s["close"]()


def test_postgres_store_on_a_small_pool_keeps_a_connection_for_the_store(postgres_dsn, unique):
    """Given a pool of 2, the lock holds at most one connection: the store can still save
    while it is held, and a second conversation's lock waits (here: times out)."""
    from psycopg_pool import ConnectionPool

    from toolnexus.store import postgres_store

    with ConnectionPool(postgres_dsn, min_size=1, max_size=2) as pool:
        s = postgres_store(pool, table=f"tnx_{unique}", timeout=2, lock_timeout=0.1)
        try:
            with s["lock"]("a"):
                s["save"]("a", [{"role": "user", "content": "hi"}])
                assert s["get"]("a")[0]["content"] == "hi"
                with pytest.raises(LockTimeoutError, match="not taken"), s["lock"]("b"):
                    pass
            with s["lock"]("b"):  # released: the slot is free again
                s["save"]("b", [{"role": "user", "content": "yo"}])
        finally:
            with pool.connection() as c:
                c.execute(f"DROP TABLE IF EXISTS tnx_{unique}, tnx_{unique}_heads")


def test_postgres_lock_refuses_a_bad_max_held():
    with pytest.raises(ValueError, match="max_held"):
        postgres_lock("postgresql://x@127.0.0.1:1/none", max_held=0)


def test_an_in_memory_store_carries_its_own_lock():
    """Clients sharing one in-memory store take the same lock (not one each): another
    thread asking for it while it is held waits, and gets it once it is let go."""
    import threading

    store, taken = in_memory_store(), threading.Event()

    def other() -> None:
        with store["lock"]("x"):
            taken.set()

    with store["lock"]("x"):
        waiter = threading.Thread(target=other)
        waiter.start()
        assert not taken.wait(0.2)  # held here: the other thread waits
        with store["lock"]("y"):  # another id is another lock
            pass
    assert taken.wait(5)  # let go: the other thread takes it
    waiter.join()


# ---- decorators pass the right lock through -----------------------------------------------


def test_namespaced_locks_the_namespaced_id(tmp_path):
    base = file_store(tmp_path / "s")
    under = file_lock(tmp_path / "s-locks", timeout=0.05)
    _store_lock_is(namespaced("acme", base), "u/1", under, "acme:u/1")
    with namespaced("acme", base)["lock"]("x"):  # tenants never share a lock
        assert not _held_elsewhere(namespaced("other", base)["lock"], "x")


def test_sanitize_ids_locks_the_sanitized_key(tmp_path):
    under = file_lock(tmp_path / "s-locks", timeout=0.05)
    _store_lock_is(sanitized_file_store(tmp_path / "s"), "A/é", under, sanitize_id("A/é"))
    _store_lock_is(sanitize_ids(file_store(tmp_path / "s")), "B", under, sanitize_id("B"))


def test_read_through_takes_the_backing_stores_lock_never_the_caches(tmp_path):
    cache, backing = file_store(tmp_path / "cache"), file_store(tmp_path / "backing")
    s = read_through(cache, backing)
    _store_lock_is(s, "x", file_lock(tmp_path / "backing-locks", timeout=0.05), "x")
    assert not (tmp_path / "cache-locks").exists()


def test_the_other_decorators_pass_the_lock_through(tmp_path):
    base = sqlite_store(tmp_path / "c.db")
    for deco in (
        capped_store(3),
        observed(on_save=lambda id, t: None),
        retention(60),
        encrypted(Fernet.generate_key()),
    ):
        assert deco(base)["lock"] is base["lock"]


def test_a_lock_directory_that_cannot_be_made_is_a_clear_error(tmp_path):
    from toolnexus.store import StoreUnavailableError

    s = file_store(tmp_path / "s")
    (tmp_path / "s-locks").write_text("a file where the lock directory goes")
    with pytest.raises(StoreUnavailableError, match="s-locks.*lock="), s["lock"]("x"):
        pass


def test_two_clients_sharing_one_in_memory_store_lose_no_turn():
    """The in-memory store carries its own lock: clients sharing it exclude each other."""
    import threading
    import time

    from toolnexus import ask, create_in_process_client

    def echo(request):
        time.sleep(0.001)  # widens the window between get and save
        return {"content": "echo: " + request["messages"][-1]["content"]}

    store = in_memory_store()
    clients = [create_in_process_client(model="m", generate=echo, store=store) for _ in range(2)]

    def asks(w: int) -> None:
        for i in range(50):
            ask(clients[w], f"w{w}-{i}", id="shared")

    threads = [threading.Thread(target=asks, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    _all_turns_kept(thaw(store["get"]("shared")), procs=2, asks=50)


def test_rewind_on_an_in_memory_store_takes_its_lock():
    from toolnexus.store import rewind

    store = in_memory_store()
    store["save"]("a", [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    with store["lock"]("a"):
        done = []
        t = __import__("threading").Thread(target=lambda: done.append(rewind(store, "a")))
        t.start()
        t.join(timeout=0.3)
        assert not done, "rewind went on while the conversation's lock was held"
    t.join(timeout=10)
    assert done == [()] or list(done[0]) == []
