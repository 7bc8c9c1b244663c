"""The fused Redis exchange on the real server: lock+load and save+release, a round trip each."""

from __future__ import annotations

import threading
import time
import warnings

import pytest

from toolnexus import ask, create_client
from toolnexus.core.frozen import thaw
from toolnexus.store import (
    StoreCorruptError,
    capped_store,
    namespaced,
    redis_lock,
    redis_store,
    sanitize_ids,
)
from toolnexus.store.decorators import sanitize_id
from toolnexus.store.fused import fused_call
from toolnexus.testing import fake_provider, text_reply


@pytest.fixture
def client(redis_url):
    import redis

    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def prefix(client, unique):
    p = f"tnx-fused:{unique}:"
    yield p
    keys = list(client.scan_iter(match=p.replace("[", "\\[") + "*", count=1000))
    if keys:
        client.delete(*keys)


def echo(body, dialect):
    return text_reply("echo: " + body["messages"][-1]["content"])


class Monitor:
    """The commands clients send that name `prefix` (MONITOR on its own connection);
    commands run inside a script are not round trips and are left out."""

    def __init__(self, client, prefix: str):
        self.client, self.prefix, self.seen = client, prefix, []
        self.stop = f"{prefix}stop-monitor"
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._listen, daemon=True)

    def _listen(self):
        with self.client.monitor() as m:
            self.ready.set()
            while True:
                cmd = m.next_command()
                if self.stop in cmd["command"]:
                    return
                if cmd["client_type"] != "lua" and self.prefix in cmd["command"]:
                    self.seen.append(cmd["command"].split(" ", 1)[0].upper())

    def __enter__(self):
        self.thread.start()
        self.ready.wait(5)
        self.client.echo("sync")
        return self

    def __exit__(self, *exc):
        self.client.echo(self.stop)
        self.thread.join(5)


def test_a_usual_exchange_is_two_round_trips(redis_url, client, prefix):
    """Lock+load is one script, save+release another (4 commands before the fused path)."""
    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=redis_store(redis_url, prefix=prefix))  # fmt: skip
        ask(c, "first", id="x")  # a new conversation: nothing to append to yet
        for i in range(3):
            with Monitor(client, prefix) as seen:
                r = ask(c, f"q{i}", id="x")
            assert r["text"] == f"echo: q{i}"
            assert seen.seen == ["EVALSHA", "EVALSHA"]
    assert len(c.store["get"]("x")) == 8
    assert client.exists(prefix + "lock:x") == 0  # released


@pytest.mark.parametrize(
    "wrap", [namespaced("tenant"), sanitize_ids], ids=["namespaced", "sanitized"]
)
def test_an_id_mapping_decorator_keeps_the_two_round_trips(redis_url, client, prefix, wrap):
    """namespaced and sanitize_ids map ids and keep the fused calls: lock+load and
    save+release stay one script each, on the decorator's key and its lock."""
    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=wrap(redis_store(redis_url, prefix=prefix)))  # fmt: skip
        ask(c, "first", id="Chat X")
        with Monitor(client, prefix) as seen:
            assert ask(c, "again", id="Chat X")["text"] == "echo: again"
        assert seen.seen == ["EVALSHA", "EVALSHA"]
    key = sanitize_id("Chat X") if wrap is sanitize_ids else "tenant:Chat X"
    assert redis_store(redis_url, prefix=prefix)["ids"]() == (key,)  # under its own key
    assert [m["content"] for m in thaw(c.store["get"]("Chat X"))][::2] == ["first", "again"]
    assert not list(client.scan_iter(match=prefix.replace("[", "\\[") + "lock:*"))  # released


def test_a_lock_held_elsewhere_is_waited_for_then_loaded(redis_url, client, prefix):
    other = redis_lock(redis_url, prefix=prefix + "lock:")
    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=redis_store(redis_url, prefix=prefix))  # fmt: skip
        ask(c, "one", id="x")
        done = []
        with other("x"):
            t = threading.Thread(target=lambda: done.append(ask(c, "two", id="x")))
            t.start()
            time.sleep(0.3)
            assert not done  # waiting for the lock
        t.join(10)
    assert done and done[0]["text"] == "echo: two"
    assert [m["content"] for m in thaw(c.store["get"]("x"))][::2] == ["one", "two"]


def test_two_stores_racing_on_one_id_lose_no_turn(redis_url, prefix):
    """Like two processes: each store has its own lock value, so they meet in Redis."""
    n = 8
    with fake_provider(echo, delay=0.01) as fp:
        clients = [create_client(base_url=fp.url, model="m", api_key="k",
                                 store=redis_store(redis_url, prefix=prefix))
                   for _ in range(2)]  # fmt: skip
        errors = []

        def work(w, c):
            try:
                for i in range(n):
                    ask(c, f"w{w}-{i}", id="race")
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(w, c)) for w, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors
    users = [m["content"] for m in thaw(clients[0].store["get"]("race")) if m["role"] == "user"]
    assert sorted(users) == sorted(f"w{w}-{i}" for w in range(2) for i in range(n))
    for w in range(2):  # each worker's turns in its own order
        assert [u for u in users if u.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(n)]


def test_a_decorated_store_is_never_bypassed(redis_url, client, prefix):
    """capped_store replaces save: its map drops the fused save_release (the fused save
    would store everything), keeps lock_load, and the client saves through the cap."""
    with fake_provider(echo) as fp:
        base = redis_store(redis_url, prefix=prefix)
        store = capped_store(2, base)
        assert fused_call(base, "save_release") and fused_call(store, "save_release") is None
        assert fused_call(store, "lock_load") is fused_call(base, "lock_load")
        c = create_client(base_url=fp.url, model="m", api_key="k", store=store)
        for i in range(3):
            ask(c, f"q{i}", id="x")
            with Monitor(client, prefix) as seen:
                ask(c, f"again{i}", id="x")
            assert len(seen.seen) > 2  # the separate calls
    assert [m["content"] for m in thaw(store["get"]("x"))] == ["again2", "echo: again2"]


def test_a_lock_lost_during_the_exchange_warns_and_the_exchange_is_saved(redis_url, client, prefix):
    lock_key = prefix + "lock:x"

    def drop_lock(body, dialect):
        client.delete(lock_key)  # the lock expires while the model answers
        return echo(body, dialect)

    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=redis_store(redis_url, prefix=prefix))  # fmt: skip
        ask(c, "one", id="x")
    with fake_provider(drop_lock) as fp:
        c = c.set(base_url=fp.url)
        with warnings.catch_warnings(record=True) as caught, Monitor(client, prefix) as seen:
            warnings.simplefilter("always")
            r = ask(c, "two", id="x")
    assert r["text"] == "echo: two"
    assert any("was lost while held" in str(w.message) for w in caught)
    assert seen.seen.count("EVALSHA") == 2 and "DEL" in seen.seen  # fused, plus our DEL
    assert len(c.store["get"]("x")) == 4


def test_a_head_moved_under_the_lock_saves_the_general_way_and_releases(redis_url, client, prefix):
    """A writer that ignores the lock moves the head: the fused save does not apply and
    does not release; the general save and the usual release follow."""
    writer = redis_store(redis_url, prefix=prefix)

    def sneak(body, dialect):
        writer["save"]("x", [{"role": "user", "content": "sneaked"}])
        return echo(body, dialect)

    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=redis_store(redis_url, prefix=prefix))  # fmt: skip
        ask(c, "one", id="x")
    with fake_provider(sneak) as fp:
        r = ask(c.set(base_url=fp.url), "two", id="x")
    assert thaw(c.store["get"]("x")) == thaw(r["messages"])
    assert client.exists(prefix + "lock:x") == 0
    with fake_provider(echo) as fp:  # the lock is free again: the next exchange runs
        assert ask(c.set(base_url=fp.url), "three", id="x")["text"] == "echo: three"


def test_wrong_key_types_are_corrupt_and_take_no_lock(redis_url, client, prefix):
    client.set(prefix + "m:x", "not a list")
    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=redis_store(redis_url, prefix=prefix))  # fmt: skip
        with pytest.raises(StoreCorruptError, match="'x'"):
            ask(c, "q", id="x")
    assert client.exists(prefix + "lock:x") == 0
    assert client.get(prefix + "m:x") == b"not a list"


def test_an_exchange_with_a_given_history_takes_the_plain_lock(redis_url, prefix):
    # history= skips the load: the lock is the plain one, which the fused save must not
    # be handed (it failed with an AttributeError before).
    from toolnexus import run

    store = redis_store(redis_url, prefix=prefix)
    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k", store=store)
        run(c, "one", id="h", history=[{"role": "user", "content": "zero"}])
        ask(c, "two", id="h")
    assert [m["content"] for m in thaw(store["get"]("h"))] == [
        "zero", "one", "echo: one", "two", "echo: two"
    ]  # fmt: skip


def test_a_new_conversation_is_two_round_trips_too(redis_url, client, prefix):
    """Seen absent, a conversation is the empty transcript: its first save appends to it
    (it took an HMGET, the general save and a separate unlock before)."""
    with fake_provider(echo) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k",
                          store=redis_store(redis_url, prefix=prefix))  # fmt: skip
        with Monitor(client, prefix) as seen:
            assert ask(c, "first", id="new")["text"] == "echo: first"
        assert seen.seen == ["EVALSHA", "EVALSHA"]
    assert [m["content"] for m in thaw(c.store["get"]("new"))] == ["first", "echo: first"]
    assert client.exists(prefix + "lock:new") == 0


def test_a_conversation_seen_absent_then_created_elsewhere_is_not_overwritten(redis_url, prefix):
    """An append planned on "absent" finds the head another writer made: general save."""
    mine, theirs = redis_store(redis_url, prefix=prefix), redis_store(redis_url, prefix=prefix)
    assert mine["get"]("race") is None  # seen absent
    theirs["save"]("race", [{"role": "user", "content": "theirs"}])
    mine["save"]("race", [{"role": "user", "content": "mine"}])  # replaces, whole
    assert [m["content"] for m in thaw(theirs["get"]("race"))] == ["mine"]
