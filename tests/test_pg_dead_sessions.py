"""Dead pooled PostgreSQL sessions (a restart, idle_session_timeout, a proxy) are replaced
transparently: after this test's idle sessions are terminated, the next 10 asks succeed."""

from __future__ import annotations

from toolnexus import ask, create_in_process_client


def _echo(request):
    return {"content": "echo: " + request["messages"][-1]["content"]}


def test_asks_after_the_pools_idle_sessions_were_terminated_all_succeed(postgres_dsn, unique):
    import psycopg

    from toolnexus.store import postgres_store

    sep = "&" if "?" in postgres_dsn else "?"
    dsn = f"{postgres_dsn}{sep}application_name=tnx-dead-{unique}"
    table = f"tnx_dead_{unique}"
    store = postgres_store(dsn, table)
    client = create_in_process_client(model="m", generate=_echo, store=store)
    try:
        for i in range(3):
            ask(client, f"warm {i}", id="d")
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            # Only this test's sessions: found by the application_name its DSN set.
            pids = c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                (f"tnx-dead-{unique}",),
            ).fetchall()
            assert pids
            for (pid,) in pids:
                c.execute("SELECT pg_terminate_backend(%s)", (pid,))
        answers = [ask(client, f"after {i}", id="d")["text"] for i in range(10)]
        assert answers == [f"echo: after {i}" for i in range(10)]
    finally:
        store["close"]()
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


def _terminate(dsn: str, application_name: str) -> int:
    """End every session of this test's own application_name (never another's)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as c:
        pids = c.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
        for (pid,) in pids:
            c.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return len(pids)


def test_a_backend_whose_idle_pool_died_takes_its_next_locks_at_once(postgres_dsn, unique):
    """The bundle's lock borrows from the pool: with many dead sessions idle in it, the
    next ask gets a live one without waiting (psycopg_pool's own check on take sleeps a
    second, then two, four... per dead connection, and the lock gave up after ten)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    from toolnexus.store import postgres_backend

    name = f"tnx-deadb-{unique}"
    sep = "&" if "?" in postgres_dsn else "?"
    b = postgres_backend(f"{postgres_dsn}{sep}application_name={name}",
                         table=f"{unique}_m", log_table=f"{unique}_l")  # fmt: skip
    client = create_in_process_client(model="m", generate=_echo, store=b["store"],
                                      message_log=b["log"])  # fmt: skip
    try:
        # Eight exchanges at once grow the pool to several sessions, all idle after.
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: ask(client, "warm", id=f"w{i}"), range(16)))
        assert _terminate(postgres_dsn, name) >= 5
        took = []
        for i in range(10):
            start = time.monotonic()
            assert ask(client, f"after {i}", id="d")["text"] == f"echo: after {i}"
            took.append(time.monotonic() - start)
        assert max(took) < 3.0, took  # no backoff sleeps per dead session
    finally:
        b["close"]()
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {unique}_m, {unique}_m_heads, {unique}_l")
