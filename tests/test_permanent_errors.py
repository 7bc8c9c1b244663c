"""Permanent conditions are their own errors, never StoreUnavailableError (a service
would answer 503 and clients retry forever): an id a store cannot hold is a ValueError,
a read-only SQLite file a StoreReadOnlyError; every store refuses the empty id alike;
the chat CLI reports a read-only store directory in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from toolnexus.store import (
    StoreReadOnlyError,
    StoreUnavailableError,
    file_store,
    in_memory_store,
    sqlite_store,
)

MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(params=["memory", "file", "sqlite", "redis", "postgres"])
def store(request, tmp_path, unique):
    kind = request.param
    if kind == "memory":
        yield in_memory_store()
    elif kind == "file":
        yield file_store(tmp_path / "files")
    elif kind == "sqlite":
        yield sqlite_store(tmp_path / "chat.db")
    elif kind == "redis":
        from toolnexus.store import redis_store

        yield redis_store(request.getfixturevalue("redis_url"), prefix=f"tnx-perm:{unique}:")
    else:
        import psycopg

        from toolnexus.store import postgres_store

        dsn = request.getfixturevalue("postgres_dsn")
        s = postgres_store(dsn, f"tnx_perm_{unique}")
        yield s
        s["close"]()
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS tnx_perm_{unique}, tnx_perm_{unique}_heads")


def test_every_store_refuses_the_empty_id_the_same_way(store):
    for call in (lambda: store["get"](""), lambda: store["save"]("", MSG)):
        with pytest.raises(ValueError, match="a conversation id must be a non-empty string"):
            call()


LONE = "a\ud800b"  # half of a UTF-16 pair: no UTF-8 text can hold it


def _calls(store):
    """Every way an id reaches a store: each call of its own, and an ask through a client."""
    from toolnexus import ask, create_in_process_client
    from toolnexus.store import fork

    client = create_in_process_client(model="m", generate=lambda r: {"content": "ok"},
                                      store=store)  # fmt: skip
    store["save"]("src", MSG)
    return {
        "get": lambda: store["get"](LONE),
        "save": lambda: store["save"](LONE, MSG),
        "delete": lambda: store["delete"](LONE),
        "fork into": lambda: fork(store, "src", LONE),
        "fork from": lambda: fork(store, LONE, "dst"),
        "ask": lambda: ask(client, "hi", id=LONE),
    }


def test_an_id_with_a_lone_surrogate_is_kept_or_refused_clearly(store):
    """Memory and files keep any str as an id; SQLite, Redis and PostgreSQL keep UTF-8
    text, so they refuse it as a ValueError that says why, never a raw UnicodeEncodeError
    from a driver (and the store goes on)."""
    keeps = store["desc"].startswith(("in_memory(", "file("))
    for name, call in _calls(store).items():
        if keeps:
            call()
            continue
        with pytest.raises(ValueError, match="lone surrogate") as e:
            call()
        assert not isinstance(e.value, UnicodeError), (name, e.value)
        assert "sanitize_ids" in str(e.value), name  # the way to keep such ids
    store["save"]("after", MSG)
    assert list(store["get"]("after")) == MSG


def test_an_id_too_long_for_postgres_index_is_a_value_error(postgres_dsn, unique):
    import psycopg

    from toolnexus.store import postgres_store

    s = postgres_store(postgres_dsn, f"tnx_long_{unique}")
    try:
        long_id = os.urandom(6000).hex()  # random: no compression squeezes it under the limit
        with pytest.raises(ValueError, match="too long") as e:
            s["save"](long_id, MSG)
        assert not isinstance(e.value, StoreUnavailableError)
        s["save"]("short", MSG)  # the store goes on
    finally:
        s["close"]()
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS tnx_long_{unique}, tnx_long_{unique}_heads")


@contextmanager
def _immutable(*paths):
    """Make paths read-only even for root (chattr +i); skip where that is not allowed."""
    done = []
    try:
        for p in paths:
            r = subprocess.run(["chattr", "+i", str(p)], capture_output=True)
            if r.returncode != 0:
                pytest.skip(f"chattr +i not permitted here: {r.stderr.decode().strip()}")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run(["chattr", "-i", str(p)])


def test_a_read_only_sqlite_file_is_a_read_only_error_not_an_outage(tmp_path):
    path = tmp_path / "ro.db"
    s = sqlite_store(path)
    s["save"]("a", MSG)
    del s
    with _immutable(path, tmp_path):
        ro = sqlite_store(path)
        with pytest.raises(StoreReadOnlyError, match="read-only") as e:
            ro["save"]("a", MSG * 2)
        assert not isinstance(e.value, StoreUnavailableError)


def test_the_chat_cli_reports_a_read_only_store_directory_in_one_line(tmp_path):
    home = tmp_path / "store"
    home.mkdir()
    with _immutable(home):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "toolnexus",
                "chat",
                "--base-url",
                "http://127.0.0.1:1/v1",
                "--model",
                "m",
                "--id",
                "x",
                "--store",
                f"file:{home}",
            ],  # fmt: skip
            input="hi\n",
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OPENAI_API_KEY": "k"},
        )
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("toolnexus: error:"), r.stderr
