"""forget(client, id): a conversation's transcript, its message-log entries and what the
runtime derived from it go, on every shipped store and log; another conversation's
transcript and log entries stay. clear_chat_history(conversation_id=) and the CLI's forget."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolnexus import clear_chat_history, create_in_process_client, forget, get_chat_history, run
from toolnexus.core.frozen import thaw
from toolnexus.history import in_memory_log, postgres_log, sqlite_log
from toolnexus.store import file_store, in_memory_store, sqlite_store


def model(request: dict) -> dict:
    return {"content": f"answer {len(request['messages'])}"}


@pytest.fixture
def backing(request, tmp_path, unique):
    """(store, log, cleanup) for the case's store kind and log kind."""
    store_kind, log_kind = request.param
    closers = []
    if store_kind == "memory":
        store = in_memory_store()
    elif store_kind == "file":
        store = file_store(tmp_path / "chats")
    elif store_kind == "sqlite":
        store = sqlite_store(tmp_path / "chats.db")
    elif store_kind == "redis":
        from toolnexus.store import redis_store

        url = request.getfixturevalue("redis_url")
        store = redis_store(url, prefix=f"tnx-test:{unique}:")
        closers.append(lambda: _drop_redis(url, f"tnx-test:{unique}:"))
    else:
        from toolnexus.store import postgres_store

        dsn = request.getfixturevalue("postgres_dsn")
        store = postgres_store(dsn, f"{unique}_m")
        closers.append(lambda: _drop_tables(dsn, f"{unique}_m", f"{unique}_m_heads"))
    if log_kind == "memory":
        log = in_memory_log()
    elif log_kind == "sqlite":
        log = sqlite_log(tmp_path / "log.db")
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        log = postgres_log(dsn, f"{unique}_log")
        closers.append(lambda: _drop_tables(dsn, f"{unique}_log"))
    yield store, log
    for close in (store.get("close"), log.get("close"), *closers):
        if close is not None:
            close()


def _drop_redis(url: str, prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter(match=prefix + "*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()


def _drop_tables(dsn: str, *names: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {', '.join(names)}")


CASES = [("memory", "memory"), ("file", "sqlite"), ("sqlite", "sqlite"),
         ("redis", "postgres"), ("postgres", "postgres"), ("sqlite", "postgres")]  # fmt: skip


@pytest.mark.parametrize("backing", CASES, indirect=True, ids=["-".join(c) for c in CASES])
def test_forget_removes_one_conversation_everywhere_and_nothing_else(backing):
    store, log = backing
    c = create_in_process_client(model="m", generate=model, store=store, message_log=log)
    for cid in ("a", "b", "a", "b"):
        run(c, f"hello {cid}", conversation_id=cid)
    kept = thaw(store["get"]("b"))
    b_entries = get_chat_history(c, conversation_id="b")
    assert len(get_chat_history(c, conversation_id="a")) == 4 and len(b_entries) == 4
    assert c.runtime.recall("a") is not None and "a" in c.runtime._lookup

    out = forget(c, "a")

    assert out == {"conversation_id": "a", "log_entries": 4}
    assert store["get"]("a") is None
    assert get_chat_history(c, conversation_id="a") == ()
    assert c.runtime.recall("a") is None and "a" not in c.runtime._lookup
    assert thaw(store["get"]("b")) == kept  # the other conversation is untouched
    assert get_chat_history(c, conversation_id="b") == b_entries
    assert c.runtime.recall("b") is not None
    if "ids" in store:
        assert "a" not in set(store["ids"]()) and "b" in set(store["ids"]())
    # The id starts afresh: nothing of the forgotten exchange is replayed.
    r = run(c, "again", conversation_id="a")
    assert [m["content"] for m in r["messages"]] == ["again", "answer 1"]


def test_forget_needs_a_store_with_delete():
    data: dict = {}
    store = {"get": data.get, "save": data.__setitem__, "desc": "dict store"}
    log = in_memory_log()
    c = create_in_process_client(model="m", generate=model, store=store, message_log=log)
    run(c, "hi", conversation_id="a")
    with pytest.raises(TypeError, match='dict store has no "delete"'):
        forget(c, "a")
    assert data["a"] and len(get_chat_history(c, conversation_id="a")) == 2  # nothing removed


def test_forget_checks_its_id():
    c = create_in_process_client(model="m", generate=model)
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="non-empty string"):
            forget(c, bad)


def test_forget_without_a_log_removes_the_transcript():
    store = in_memory_store()
    c = create_in_process_client(model="m", generate=model, store=store)
    run(c, "hi", conversation_id="a")
    assert forget(c, "a") == {"conversation_id": "a", "log_entries": 0}
    assert store["get"]("a") is None


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_clear_chat_history_of_one_conversation(kind, tmp_path):
    log = in_memory_log() if kind == "memory" else sqlite_log(tmp_path / "log.db")
    c = create_in_process_client(model="m", generate=model, message_log=log)
    for cid in ("a", "b", "a"):
        run(c, "hi", conversation_id=cid)
    assert clear_chat_history(c, conversation_id="a") == 4
    assert get_chat_history(c, conversation_id="a") == ()
    assert len(get_chat_history(c, conversation_id="b")) == 2
    with pytest.raises(ValueError, match="non-empty string"):
        clear_chat_history(c, conversation_id="")


def test_cli_forget_removes_the_conversation_and_its_log(tmp_path):
    store = file_store(tmp_path / "chats")
    log = sqlite_log(tmp_path / "chats" / "history.db")  # the file store's default log
    c = create_in_process_client(model="m", generate=model, store=store, message_log=log)
    run(c, "hi", conversation_id="a")
    run(c, "hi", conversation_id="b")
    cmd = [
        sys.executable,
        "-m",
        "toolnexus",
        "forget",
        "a",
        "--store",
        f"file:{tmp_path / 'chats'}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "forgot a" in out.stdout and "2 message-log entries" in out.stdout
    assert store["get"]("a") is None and store["get"]("b") is not None
    assert log["query"](conversation_id="a") == () and len(log["query"](conversation_id="b")) == 2
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing stored" in again.stdout


def test_cli_forget_with_log_none_leaves_the_log(tmp_path):
    store = sqlite_store(tmp_path / "chats.db")
    log = sqlite_log(tmp_path / "history.db")  # the sqlite store's default log, beside it
    c = create_in_process_client(model="m", generate=model, store=store, message_log=log)
    run(c, "hi", conversation_id="a")
    spec = f"sqlite:{tmp_path / 'chats.db'}"
    cmd = [sys.executable, "-m", "toolnexus", "forget", "a", "--store", spec, "--log", "none"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "forgot a: its transcript"
    assert store["get"]("a") is None and len(log["query"](conversation_id="a")) == 2
    missing = subprocess.run([*cmd[:-2], "--log", str(tmp_path / "none.db")],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode == 1 and "no message log there" in missing.stderr
    assert not (tmp_path / "none.db").exists()
