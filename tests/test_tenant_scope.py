"""One tenant scope for everything keyed by a conversation (issue 39, item 2).

Two tenants share one database and use the same conversation name: what one tenant's
model reads through the lookup tool, and what its forget() clears, stay within its
scope, over real SQLite and PostgreSQL backends.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolnexus import (
    ask,
    clear_chat_history,
    create_in_process_client,
    forget,
    get_chat_history,
)
from toolnexus.core.scope import IDENTITY, scope_of
from toolnexus.history import in_memory_log
from toolnexus.store import in_memory_store, namespaced, sanitize_ids
from toolnexus.store.scoped import align_log, scoped_log


def _snooper(request):
    """A model that searches its history for "secret" and repeats what it found."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return {"content": f"found: {last['content']}"}
    if "snoop" in str(last.get("content")):
        return {"tool_calls": [{"name": "chat_history", "arguments": {"contains": "secret"}}]}
    return {"content": "noted"}


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path, unique):
    if request.param == "sqlite":
        from toolnexus.store import sqlite_backend

        bundle = sqlite_backend(str(tmp_path / "shared.db"))
        yield bundle
        bundle["close"]()
        return
    dsn = request.getfixturevalue("postgres_dsn")
    import psycopg

    from toolnexus.store import postgres_backend

    bundle = postgres_backend(dsn, table=f"{unique}_m", log_table=f"{unique}_l", max_size=4)
    try:
        yield bundle
    finally:
        bundle["close"]()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {unique}_m, {unique}_m_heads, {unique}_l")


def _tenant(db, name):
    return create_in_process_client(
        model="m", generate=_snooper, store=namespaced(name, db["store"]), message_log=db["log"]
    )


def test_tenant_b_cannot_read_tenant_a_log_through_the_lookup_tool(db):
    a, b = _tenant(db, "a"), _tenant(db, "b")
    ask(a, "my secret is 4711", id="chat")
    r = ask(b, "snoop", id="chat")  # the same conversation name, another tenant
    assert r["tool_calls"][0]["name"] == "chat_history"
    assert "4711" not in r["tool_calls"][0]["output"] and "4711" not in r["text"]
    # Tenant a's own model still finds it: the scope narrows, it does not lose.
    mine = ask(a, "snoop", id="chat")
    assert "4711" in mine["text"]


def test_tenant_b_forget_leaves_tenant_a_entries(db):
    a, b = _tenant(db, "a"), _tenant(db, "b")
    ask(a, "a says hello", id="chat")
    ask(b, "b says hello", id="chat")
    went = forget(b, "chat")
    assert went["log_entries"] == 2  # b's prompt and answer, nothing of a's
    assert [e["text"] for e in get_chat_history(a, conversation_id="chat")] == [
        "a says hello",
        "noted",
    ]
    assert get_chat_history(b) == ()
    assert a["store"]["get"]("chat") is not None


def test_history_and_clear_without_an_id_stay_in_the_tenant(db):
    a, b = _tenant(db, "a"), _tenant(db, "b")
    ask(a, "from a", id="x")
    ask(b, "from b", id="y")
    assert {e["conversation_id"] for e in get_chat_history(a)} == {"x"}
    assert [e["text"] for e in get_chat_history(a, limit=1)] == ["noted"]
    assert clear_chat_history(b) == 2
    assert [e["text"] for e in get_chat_history(a)] == ["from a", "noted"]
    # The shared log itself holds a's entries under the tenant's key.
    assert {e["conversation_id"] for e in db["log"]["query"]()} == {"a:x"}


def test_a_log_scoped_otherwise_than_its_store_is_refused():
    log = in_memory_log()
    with pytest.raises(ValueError, match="share its store's tenant scope"):
        create_in_process_client(
            model="m",
            generate=_snooper,
            store=namespaced("a", in_memory_store()),
            message_log=namespaced("b", log),
        )
    # The same scope on both is accepted as it is (not scoped twice).
    same = namespaced("a", log)
    c = create_in_process_client(
        model="m", generate=_snooper, store=namespaced("a", in_memory_store()), message_log=same
    )
    assert c.message_log is same
    ask(c, "hi", id="k")
    assert {e["conversation_id"] for e in log["query"]()} == {"a:k"}


def test_set_moves_the_log_to_the_new_store_scope():
    log = in_memory_log()
    shared = in_memory_store()
    a = create_in_process_client(
        model="m", generate=_snooper, store=namespaced("a", shared), message_log=log
    )
    b = a.set(store=namespaced("b", shared))  # the same runtime, another tenant
    ask(a, "my secret is 4711", id="chat")
    r = ask(b, "snoop", id="chat")
    assert "4711" not in r["text"]
    assert {e["conversation_id"] for e in log["query"]()} == {"a:chat", "b:chat"}


def test_two_clients_in_one_process_keep_their_own_running_traces():
    a = create_in_process_client(model="m", generate=_snooper)
    b = create_in_process_client(model="m", generate=_snooper)
    assert a.runtime.traces is not b.runtime.traces


def test_scopes_compose_and_are_equal_by_their_steps():
    s = namespaced("t", sanitize_ids(in_memory_store()))
    scope = scope_of(s)
    assert scope == scope_of(namespaced("t", sanitize_ids(in_memory_store())))
    assert scope != scope_of(namespaced("u", sanitize_ids(in_memory_store())))
    assert scope_of(in_memory_store()) is IDENTITY
    assert align_log(in_memory_store(), None) is None


ids = st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s)


@given(ids, st.sampled_from(["a", "b", "ab"]), st.booleans())
@example("é" * 30, "ab", True)  # a hashed key under the namespace
@example("é" * 30, "ab", False)
def test_a_scope_owns_exactly_its_own_keys(cid, tenant, sanitized_below):
    def scope_for(name):
        inner = in_memory_store()
        if sanitized_below:  # namespaced over sanitize_ids: a long id's key is a hash
            return scope_of(namespaced(name, sanitize_ids(inner)))
        return scope_of(sanitize_ids(namespaced(name, inner)))  # the prefix stays readable

    scope = scope_for(tenant)
    key = scope.key(cid)
    hashed = key.startswith("-h") or key.startswith(f"{tenant}:-h")
    assert scope.owns(key) == (None if hashed else cid)
    assert scope.mine(key) == (not (hashed and sanitized_below))
    for other in {"a", "b", "ab"} - {tenant}:
        theirs = scope_for(other).key(cid)
        assert scope.owns(theirs) is None and not scope.mine(theirs)


def test_scoped_log_records_query_and_clear_in_the_scope():
    from datetime import UTC, datetime

    from toolnexus.history import make_entry

    inner = in_memory_log()
    log = scoped_log(scope_of(namespaced("a", in_memory_store())), inner)
    log["record"](make_entry("c", "hello", "user", datetime.now(UTC)))
    inner["record"](make_entry("b:c", "other tenant", "user", datetime.now(UTC)))
    assert [e["conversation_id"] for e in log["query"]()] == ["c"]
    assert [e["text"] for e in log["query"](conversation_id="c")] == ["hello"]
    assert log["clear"]() == 1 and len(inner["query"]()) == 1


def test_a_sanitized_store_keeps_every_log_entry_visible_even_hashed_ids(tmp_path):
    """sanitize_ids keeps no tenant apart: an id too long to encode (a hashed key) still
    shows in get_chat_history(client) and goes with clear_chat_history(client)."""
    long_id = "x" * 150
    c = create_in_process_client(
        model="m", generate=_snooper, store=sanitize_ids(in_memory_store()),
        message_log=in_memory_log(),
    )  # fmt: skip
    ask(c, "hello", id=long_id)
    ask(c, "hi", id="short/one")
    shown = get_chat_history(c)
    assert len(shown) == 4 and {e["conversation_id"] for e in shown} >= {"short/one"}
    assert [e["text"] for e in get_chat_history(c, conversation_id=long_id)] == ["hello", "noted"]
    assert clear_chat_history(c) == 4 and get_chat_history(c) == ()


def test_a_tenant_never_touches_an_entry_it_cannot_tell_is_its_own():
    shared = in_memory_log()
    store = sanitize_ids(in_memory_store())
    a = create_in_process_client(model="m", generate=_snooper, store=namespaced("a", store),
                                 message_log=shared)  # fmt: skip
    b = create_in_process_client(model="m", generate=_snooper, store=namespaced("b", store),
                                 message_log=shared)  # fmt: skip
    ask(a, "a's", id="y" * 150)  # a hashed key: no tenant can name it
    ask(b, "b's", id="short")
    assert [e["text"] for e in get_chat_history(b)] == ["b's", "noted"]
    assert clear_chat_history(b) == 2
    assert [e["text"] for e in get_chat_history(a, conversation_id="y" * 150)] == ["a's", "noted"]


def test_forget_in_clears_the_log_in_the_store_scope(tmp_path):
    from toolnexus.api import forget_in
    from toolnexus.store import sqlite_backend

    db = sqlite_backend(str(tmp_path / "x.db"))
    a, b = _tenant(db, "a"), _tenant(db, "b")
    ask(a, "a's", id="chat")
    ask(b, "b's", id="chat")
    went = forget_in(namespaced("b", db["store"]), db["log"], "chat")
    assert went["log_entries"] == 2
    assert [e["text"] for e in get_chat_history(a)] == ["a's", "noted"]
    db["close"]()
