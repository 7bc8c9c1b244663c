"""Conversation locks: exclusion, timeouts, threads, and the multi-process proof: no lost turn."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import warnings
from contextlib import ExitStack

import pytest
import race_worker
from durable_store_cases import thread_errors
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.backends.file.lock import _lock_file_name
from toolnexus.backends.postgres.lock import advisory_key
from toolnexus.core.frozen import thaw
from toolnexus.store import (
    LockTimeoutError,
    StoreUnavailableError,
    file_lock,
    postgres_lock,
    redis_lock,
)
from toolnexus.store import locks as L

PROCS, ASKS = 4, 10


# ---- the proof: 4 processes x 10 asks on ONE id -----------------------------


def _context():
    # forkserver: a clean single-threaded server that imports toolnexus and the drivers
    # once, then forks each worker, so a race costs a fork instead of a fresh interpreter.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["race_worker", "toolnexus", "psycopg", "psycopg_pool", "redis"])
    return ctx


def _race(store_spec, lock_spec, conv_id, delay) -> list[dict]:
    ctx = _context()
    barrier = ctx.Barrier(PROCS)
    procs = [
        ctx.Process(
            target=race_worker.ask_many,
            args=(store_spec, lock_spec, conv_id, w, ASKS, delay, barrier),
        )
        for w in range(PROCS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * PROCS
    store = race_worker.make_store(store_spec)
    try:
        return thaw(store["get"](conv_id))
    finally:
        store.get("close", lambda: None)()


def _user_turns(transcript: list[dict]) -> list[str]:
    """Return the user prompts, checking the order is valid: user, its echo, user, ..."""
    for i, m in enumerate(transcript):
        assert m["role"] == ("user" if i % 2 == 0 else "assistant"), (i, m)
        if m["role"] == "assistant":
            assert m["content"] == "echo: " + transcript[i - 1]["content"]
    return [m["content"] for m in transcript[::2]]


def _all_turns_kept(transcript: list[dict]) -> None:
    prompts = _user_turns(transcript)
    assert len(transcript) == 2 * PROCS * ASKS
    assert sorted(prompts) == sorted(f"w{w}-{i}" for w in range(PROCS) for i in range(ASKS))
    for w in range(PROCS):  # each process's own asks keep their order
        own = [p for p in prompts if p.startswith(f"w{w}-")]
        assert own == [f"w{w}-{i}" for i in range(ASKS)]


def _some_turns_lost(transcript: list[dict]) -> None:
    prompts = _user_turns(transcript)  # still a valid transcript: whole saves win or lose
    assert len(set(prompts)) < PROCS * ASKS, "expected last-writer-wins to lose a turn"


@pytest.fixture
def backends(request, tmp_path, unique):
    """Return (store spec, lock spec) for the backend named by the test's parameter."""
    kind = request.param
    if kind == "sqlite":
        yield ("sqlite", str(tmp_path / "race.db")), ("file", str(tmp_path / "locks"))
        return
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        yield ("redis", url, f"tnx-race:{unique}:"), ("redis", url, f"tnx-race:{unique}:lock:")
        import redis

        c = redis.Redis.from_url(url)
        keys = list(c.scan_iter(match=f"tnx-race:{unique}:*"))
        if keys:
            c.delete(*keys)
        return
    dsn = request.getfixturevalue("postgres_dsn")
    table = f"tnx_race_{unique}"
    yield ("postgres", dsn, table), ("postgres", dsn)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


@pytest.mark.parametrize("backends", ["sqlite", "redis", "postgres"], indirect=True)
def test_four_processes_with_the_lock_lose_no_turn(backends):
    store_spec, lock_spec = backends
    _all_turns_kept(_race(store_spec, lock_spec, "shared/conv ✓", delay=0.005))


@pytest.mark.parametrize("backends", ["sqlite", "redis", "postgres"], indirect=True)
def test_demonstration_without_a_lock_turns_are_lost(backends):
    """DEMONSTRATION of the problem the lock solves: no lock, so last writer wins.

    The echo model sleeps 50 ms between get and save and the four processes start
    together, so their runs overlap and a turn is lost (every run reliably loses many).
    """
    store_spec, _ = backends
    _some_turns_lost(_race(store_spec, None, "shared", delay=0.05))


# ---- exclusion, timeouts, re-entry per lock kind -----------------------------


@pytest.fixture
def make_lock(request, tmp_path, unique):
    """Return fn(**options) -> a new lock object on one shared backend (another 'process')."""
    kind = request.param
    if kind == "file":
        return lambda **kw: file_lock(tmp_path / "locks", **kw)
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        return lambda **kw: redis_lock(url, prefix=f"tnx-lock:{unique}:", **kw)
    dsn = request.getfixturevalue("postgres_dsn")
    made = []
    request.addfinalizer(lambda: [lock.close() for lock in made])

    def make(**kw):
        made.append(postgres_lock(dsn, **kw))
        return made[-1]

    return make


KINDS = ["file", "redis", "postgres"]


@pytest.mark.parametrize("make_lock", KINDS, indirect=True)
def test_a_held_lock_times_out_the_other_holder(make_lock, unique):
    a, b = make_lock(), make_lock(timeout=0.2)
    with a(unique):
        start = time.monotonic()
        with pytest.raises(LockTimeoutError), b(unique):
            pytest.fail("ran without the lock")
        assert 0.15 < time.monotonic() - start < 2
        with b(unique + "-other"):  # other ids are independent
            pass
    with b(unique):  # released: free again
        pass


@pytest.mark.parametrize("make_lock", KINDS, indirect=True)
def test_may_be_released_from_another_thread(make_lock, unique):
    """The async driver enters and exits a lock in (possibly different) worker threads."""
    lock, other = make_lock(), make_lock(timeout=0.1)
    held = lock(unique)
    taker = threading.Thread(target=held.__enter__)
    taker.start()
    taker.join()
    with pytest.raises(LockTimeoutError), other(unique):
        pass
    releaser = threading.Thread(target=held.__exit__, args=(None, None, None))
    releaser.start()
    releaser.join()
    with other(unique):
        pass


@pytest.mark.parametrize("make_lock", KINDS, indirect=True)
def test_threads_and_instances_exclude_each_other(make_lock, unique):
    locks = [make_lock(), make_lock()]  # two instances, two threads each
    inside, overlaps = [0], []

    def work(lock):
        for _ in range(5):
            with lock(unique):
                inside[0] += 1
                overlaps.append(inside[0])
                time.sleep(0.002)
                inside[0] -= 1

    errors = thread_errors(work, [(lk,) for lk in locks * 2])
    assert errors == [] and len(overlaps) == 20 and max(overlaps) == 1


@pytest.mark.parametrize("make_lock", KINDS, indirect=True)
def test_an_error_inside_releases_the_lock(make_lock, unique):
    lock, other = make_lock(), make_lock(timeout=0.5)
    with pytest.raises(RuntimeError), lock(unique):
        raise RuntimeError("boom")
    with other(unique):
        pass


@pytest.mark.parametrize("make_lock", KINDS, indirect=True)
def test_hostile_ids(make_lock):
    lock, other = make_lock(), make_lock(timeout=0.1)
    for id in ["../x", "héllo 世界", "x" * 200, "é" * 200, "a/b"]:
        with lock(id):
            with pytest.raises(LockTimeoutError), other(id):
                pass


def test_file_lock_files_stay_inside_the_directory(tmp_path):
    lock = file_lock(tmp_path / "locks")
    for id in ["../x", "../../etc/passwd", "a/b", "é" * 200, "x" * 300]:
        with lock(id):
            pass
    assert sorted(os.listdir(tmp_path)) == ["locks"]
    assert all(not n.startswith(".") and "/" not in n for n in os.listdir(tmp_path / "locks"))


@given(st.text(min_size=1, max_size=400))
def test_lock_file_names_are_safe_and_distinct(id):
    name = _lock_file_name(id)
    assert "/" not in name and name not in (".", "..") and len(name.encode()) <= 255
    assert _lock_file_name(id + "x") != name


@given(st.text(min_size=1), st.text(min_size=1))
def test_advisory_keys_are_64_bit_and_stable(a, b):
    ka = advisory_key(a)
    assert -(2**63) <= ka < 2**63 and ka == advisory_key(a)
    if a != b:
        assert ka != advisory_key(b)  # a 64-bit collision here would be news


def test_redis_lock_is_renewed_while_held(redis_url, unique):
    prefix = f"tnx-lock:{unique}:"
    lock, other = (
        redis_lock(redis_url, ttl=0.3, prefix=prefix),
        redis_lock(redis_url, timeout=0.1, prefix=prefix),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a lost lock would warn
        with lock("long"):
            time.sleep(1.0)  # more than three ttls
            with pytest.raises(LockTimeoutError), other("long"):
                pass
    with other("long"):
        pass


def test_redis_locks_held_together_share_one_renewer(redis_url, unique):
    """Many locks held at once are all renewed, by one thread that ends when none is held."""
    prefix = f"tnx-lock:{unique}:"
    lock, other = (
        redis_lock(redis_url, ttl=0.3, prefix=prefix),
        redis_lock(redis_url, timeout=0.05, prefix=prefix),
    )

    def renewers() -> int:
        return sum(t.name == f"toolnexus-redis-lock {prefix}" for t in threading.enumerate())

    with warnings.catch_warnings(), ExitStack() as held:
        warnings.simplefilter("error")  # a lost lock would warn
        for n in range(12):
            held.enter_context(lock(f"id-{n}"))
        assert renewers() == 1
        time.sleep(1.0)  # more than three ttls
        for n in range(12):
            with pytest.raises(LockTimeoutError), other(f"id-{n}"):
                pass
    time.sleep(0.3)  # the renewer sees nothing held at its next tick and ends
    assert renewers() == 0
    with other("id-0"):
        pass


def test_redis_lock_release_never_deletes_someone_elses_lock(redis_url, unique):
    import redis

    prefix, c = f"tnx-lock:{unique}:", redis.Redis.from_url(redis_url)
    lock = redis_lock(redis_url, ttl=10, prefix=prefix)
    with pytest.warns(RuntimeWarning, match="lost"), lock("x"):
        c.set(prefix + "x", "someone else's token")  # as if ours expired and another took it
    assert c.get(prefix + "x") == b"someone else's token"
    c.delete(prefix + "x")


def test_redis_lock_on_a_server_that_is_down():
    lock = redis_lock("redis://:hunter2@127.0.0.1:1/0", timeout=1)
    with pytest.raises(StoreUnavailableError) as e, lock("x"):
        pass
    assert "127.0.0.1:1" in str(e.value) and "hunter2" not in str(e.value)


def test_postgres_lock_on_a_server_that_is_down():
    lock = postgres_lock("postgresql://me:hunter2@127.0.0.1:1/test", timeout=1)
    with pytest.raises(StoreUnavailableError) as e, lock("x"):
        pass
    lock.close()
    assert "127.0.0.1" in str(e.value) and "hunter2" not in str(e.value)


def test_postgres_lock_is_freed_when_its_session_dies(postgres_dsn, unique):
    import psycopg

    key = advisory_key(unique)
    holder = psycopg.connect(postgres_dsn, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (key,))
    lock = postgres_lock(postgres_dsn, timeout=0.2)
    with pytest.raises(LockTimeoutError), lock(unique):
        pass
    holder.close()  # a crashed holder: the server drops its locks
    with lock(unique):
        pass
    lock.close()


# ---- the in-process lock --------------------------------------------------------------


def test_the_local_lock_excludes_per_id_times_out_and_forgets_ids_it_no_longer_holds():
    lock = L.local_lock(timeout=0.2)
    inside, overlaps = [], []

    def worker(id: str) -> None:
        for _ in range(200):
            with lock(id):
                inside.append(id)
                if inside.count(id) > 1:
                    overlaps.append(id)
                inside.remove(id)

    threads = [threading.Thread(target=worker, args=(i,)) for i in ("a", "a", "b", "b", "a")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    held = lock("a")
    held.__enter__()
    with lock("b"):  # another id is free meanwhile
        pass
    with pytest.raises(LockTimeoutError, match="'a'"):
        with lock("a"):
            pass
    # The async driver may release from another thread than the one that took it.
    t = threading.Thread(target=held.__exit__, args=(None, None, None))
    t.start()
    t.join()
    with lock("a"):
        pass
    # A second exit of one hold never releases a later holder's lock.
    first = lock("a")
    first.__enter__()
    first.__exit__(None, None, None)
    with lock("a"):
        first.__exit__(None, None, None)
        with pytest.raises(LockTimeoutError):
            with lock("a"):
                pass
    # Nothing is kept for ids no one holds or waits for (a service sees millions of ids).
    kept = [c.cell_contents for c in lock.__closure__ if isinstance(c.cell_contents, dict)]
    assert kept == [{}]


def test_a_file_lock_leaves_no_file_per_id(tmp_path):
    """Issue 39: every id a service ever locked used to leave its lock file behind."""
    from toolnexus import ask, create_in_process_client
    from toolnexus.backends.file.lock import lock_directory
    from toolnexus.store import sqlite_backend

    db = sqlite_backend(str(tmp_path / "chat.db"))
    c = create_in_process_client(
        model="m", generate=lambda r: {"content": "ok"}, store=db["store"], message_log=db["log"]
    )
    for i in range(20):
        ask(c, "hi", id=f"user-{i}")
    db["close"]()
    assert list(lock_directory(tmp_path / "chat.db").iterdir()) == []
    lock = file_lock(tmp_path / "locks", timeout=1)
    with lock("a"), lock("b"):
        assert len(list((tmp_path / "locks").iterdir())) == 2
    assert list((tmp_path / "locks").iterdir()) == []
