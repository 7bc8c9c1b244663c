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
