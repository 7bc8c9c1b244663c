"""Backend bundles (toolnexus.store.backends) on the real PostgreSQL and Redis servers."""

from __future__ import annotations

import socket
import time

import durable_store_cases as cases
import pytest

from toolnexus import ask, create_in_process_client
from toolnexus.store import StoreUnavailableError, postgres_backend, redis_backend
from toolnexus.store.fused import declared, derive


def echo(req):
    return {"content": "re: " + req["messages"][-1]["content"]}


def _connections(dsn: str, name: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        q = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        return conn.execute(q, (name,)).fetchone()[0]


@pytest.fixture
def bundle(postgres_dsn, unique):
    """A bundle from a DSN (its own pool, named so its connections can be counted)."""
    import psycopg

    sep = "&" if "?" in postgres_dsn else "?"
    dsn = f"{postgres_dsn}{sep}application_name={unique}"
    b = postgres_backend(dsn, table=f"{unique}_m", log_table=f"{unique}_l", max_size=3)
    yield postgres_dsn, b
    b["close"]()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {unique}_m, {unique}_m_heads, {unique}_l")


def test_store_lock_and_log_of_a_postgres_bundle_share_one_pool(bundle, unique):
    """Exchanges under the bundle's lock, saved and logged; every connection the three
    parts used came from the one pool (at most max_size), and close() ends them all."""
    dsn, b = bundle  # dsn: without the bundle's application_name (not counted)
    client = create_in_process_client(
        model="m", generate=echo, store=b["store"], message_log=b["log"], lock=b["lock"]
    )
    cid = cases.new_id()
    ask(client, "one", id=cid)
    ask(client, "two", id=cid)
    assert [m["content"] for m in b["store"]["get"](cid)] == ["one", "re: one", "two", "re: two"]
    texts = [e["text"] for e in b["log"]["query"](conversation_id=cid)]
    assert texts == ["one", "re: one", "two", "re: two"]
    with b["lock"](cid):  # held: a connection of the same pool
        assert 1 <= _connections(dsn, unique) <= 3
    b["close"]()
    deadline = time.monotonic() + 5
    while _connections(dsn, unique) and time.monotonic() < deadline:
        time.sleep(0.05)  # the server notices closed sessions a moment later
    assert _connections(dsn, unique) == 0


def test_a_wrapped_log_is_never_bypassed(bundle):
    """A log whose record_many is replaced (a decorator, built with derive) drops its fused
    rows: the save goes alone and the wrapper records the exchange."""
    _, b = bundle
    seen = []

    def record_many(entries):
        seen.append([e["text"] for e in entries])
        b["log"]["record_many"](entries)

    wrapped = derive(b["log"], record_many=record_many)
    assert declared(b["log"], "rows") and declared(wrapped, "rows") is None
    client = create_in_process_client(model="m", generate=echo, store=b["store"],
                                      message_log=wrapped)  # fmt: skip
    cid = cases.new_id()
    ask(client, "one", id=cid)
    assert seen == [["one", "re: one"]]
    assert len(b["log"]["query"](conversation_id=cid)) == 2


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_postgres_bundle_is_made_without_io_and_fails_fast_when_down():
    """Made while the server is down (a worker starts); each part then raises
    StoreUnavailableError at once, without the password."""
    dsn = f"postgresql://app:s3cret-pw@127.0.0.1:{_closed_port()}/db"
    b = postgres_backend(dsn, timeout=5)
    started = time.monotonic()
    for call in (
        lambda: b["store"]["get"]("a"),
        lambda: b["store"]["save"]("a", cases.turns(1)),
        lambda: b["lock"]("a").__enter__(),
        lambda: b["log"]["query"](conversation_id="a"),
    ):
        with pytest.raises(StoreUnavailableError) as e:
            call()
        assert "s3cret-pw" not in str(e.value)
    assert time.monotonic() - started < 4  # refused at once, not after the pool timeout
    b["close"]()


def test_a_redis_bundle_runs_exchanges_under_its_lock(redis_url, unique):
    """The store and its lock on one client; no message log."""
    import redis

    b = redis_backend(redis_url, prefix=f"{unique}:")
    try:
        assert b["log"] is None and b["lock"] is b["store"]["lock"]
        client = create_in_process_client(model="m", generate=echo, store=b["store"])
        ask(client, "one", id="c")
        ask(client, "two", id="c")
        assert [m["content"] for m in b["store"]["get"]("c")] == ["one", "re: one", "two",
                                                                  "re: two"]  # fmt: skip
    finally:
        b["close"]()
        r = redis.Redis.from_url(redis_url)
        keys = list(r.scan_iter(f"{unique}:*"))
        if keys:
            r.delete(*keys)


def test_open_backend_reads_a_url_and_sqlite_keeps_all_in_one_file(tmp_path):
    """sqlite:PATH: store, file lock and log in one file; an unknown scheme is a
    ValueError that never shows a password."""
    import sqlite3

    from toolnexus.store import open_backend

    path = tmp_path / "chat.db"
    b = open_backend(f"sqlite:{path}")
    client = create_in_process_client(
        model="m", generate=echo, store=b["store"], message_log=b["log"]
    )
    ask(client, "one", id="c")
    assert [e["text"] for e in b["log"]["query"](conversation_id="c")] == ["one", "re: one"]
    b["close"]()
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "toolnexus_messages" in tables and len(tables) > 2  # the log's tables too
    with pytest.raises(ValueError) as e:
        open_backend("mysql://app:pw-s3cret@db/chat")
    assert "pw-s3cret" not in str(e.value) and "postgresql://" in str(e.value)


def test_one_table_of_urls_serves_open_backend_and_the_cli(tmp_path, redis_url, postgres_dsn,
                                                          unique):  # fmt: skip
    """Every row of the URL table opens a bundle whose store keeps its lock, through
    open_backend and through the CLI's --store alike; anything else names every shape."""
    from toolnexus.backends.urls import SCHEMES, parse_url
    from toolnexus.commands.places import (
        CommandError,
        closing_places,
        open_store,
        parse_store_spec,
    )
    from toolnexus.store import open_backend

    urls = {"memory": "memory", "file": f"file:{tmp_path / 'files'}",
            "sqlite": f"sqlite:{tmp_path / 'chat.db'}", "postgres": postgres_dsn,
            "redis": redis_url}  # fmt: skip
    assert {s.name for s in SCHEMES} == set(urls)
    for name, url in urls.items():
        assert parse_url(url)[0].name == name == parse_store_spec(url).kind
        b = open_backend(url)
        with closing_places():  # closes the CLI's bundle as a command does
            for store in (b["store"], open_store(url)):
                assert callable(store["lock"])
                store["save"](unique, [{"role": "user", "content": name}])
                assert store["get"](unique)[0]["content"] == name
                store["delete"](unique)
        b["close"]()
    with pytest.raises(CommandError, match="sqlite:PATH, postgresql://... or redis://...") as e:
        parse_store_spec("mysql://app:pw-s3cret@db")
    assert "pw-s3cret" not in str(e.value)
