"""A PostgreSQL server that refuses connections is unavailable in about a second, not after
the pool's whole wait: through a TCP proxy the test cuts (refused, live links reset)."""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

import pytest
from chat_service_kit import Proxy, via

from toolnexus import ask, create_in_process_client
from toolnexus.store import StoreUnavailableError, postgres_backend, postgres_store


def _echo(request):
    return {"content": "echo: " + request["messages"][-1]["content"]}


def _drop(dsn: str, table: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


def _timed(fn, *args, **kwargs):
    t = time.monotonic()
    with pytest.raises(StoreUnavailableError) as got:
        fn(*args, **kwargs)
    return time.monotonic() - t, str(got.value)


def _proxy(dsn: str) -> Proxy:
    parts = urlsplit(dsn)
    return Proxy(parts.hostname, parts.port)


def _once_back(fn):
    """Return fn() as soon as the server answers again (within 15 s of its return)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return fn()
        except StoreUnavailableError:
            assert time.monotonic() < deadline, "no recovery after the server came back"
            time.sleep(0.1)


def test_a_store_whose_server_refuses_is_unavailable_in_about_a_second(postgres_dsn, unique):
    proxy = _proxy(postgres_dsn)
    table = f"tnx_out_{unique}"
    store = postgres_store(via(postgres_dsn, proxy.port), table=table, timeout=10)
    try:
        store["save"]("a", [{"role": "user", "content": "hi"}])
        proxy.cut()
        first, why = _timed(store["get"], "a")
        assert first < 3, f"the first call waited {first:.1f} s for the pool"  # 10 s before
        assert "unavailable" in why and "refused" in why.lower(), why
        # Found down: later calls ask the server first and fail in milliseconds.
        later = [_timed(store["get"], "a")[0] for _ in range(5)]
        assert max(later) < 0.5, later
        proxy.restore()
        assert [m["content"] for m in _once_back(lambda: store["get"]("a"))] == ["hi"]
    finally:
        proxy.cut()
        store["close"]()
        _drop(postgres_dsn, table)


def test_an_exchange_over_a_backend_whose_server_refuses_fails_fast(postgres_dsn, unique):
    """The lock, store and log of one backend share one pool and what it learns: the
    exchange's lock fails in about a second and its failure log does not wait again."""
    proxy = _proxy(postgres_dsn)
    table = f"tnx_out_{unique}"
    backend = postgres_backend(via(postgres_dsn, proxy.port), table=table,
                               log_table=f"{table}_log", timeout=10)  # fmt: skip
    client = create_in_process_client(model="m", generate=_echo, store=backend["store"],
                                      lock=backend["lock"], message_log=backend["log"])  # fmt: skip
    try:
        assert ask(client, "before", id="x")["text"] == "echo: before"
        proxy.cut()
        took, _ = _timed(ask, client, "during", id="x")
        assert took < 3, f"the exchange waited {took:.1f} s"  # 20 s before
        proxy.restore()
        assert _once_back(lambda: ask(client, "after", id="x"))["text"] == "echo: after"
    finally:
        proxy.cut()
        backend["close"]()
        _drop(postgres_dsn, table)
        _drop(postgres_dsn, f"{table}_log")


def test_a_busy_pool_still_waits_for_a_connection(postgres_dsn, unique):
    """A pool whose connections are all in use is not an outage: a call waits past the
    first second (the server answers the probe) and gets the connection once it is free."""
    from toolnexus.backends.postgres.connect import pg_pool

    pool, _, _ = pg_pool(postgres_dsn, timeout=10, max_size=1)
    held = pool.getconn()
    threading.Timer(1.5, pool.putconn, (held,)).start()
    t = time.monotonic()
    try:
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert 1.4 < time.monotonic() - t < 5
    finally:
        pool.close()


def test_a_server_at_its_connection_limit_is_busy_not_down(postgres_dsn, unique):
    """The server answers the direct connection with an error of its own (too many
    connections for this role): not an outage, so the call waits for the pool as before
    (processes x max_size at max_connections leaves no room for the question)."""
    import psycopg

    from toolnexus.backends.postgres.connect import pg_pool

    role = f"tnx_lim_{unique}"
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
    host = postgres_dsn.split("@", 1)[1]
    pool, _, _ = pg_pool(f"postgresql://{role}@{host}", timeout=10, max_size=1)
    try:
        held = pool.getconn()  # the role's one connection
        threading.Timer(1.5, pool.putconn, (held,)).start()
        t = time.monotonic()
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert 1.4 < time.monotonic() - t < 5
    finally:
        pool.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            c.execute(f"DROP ROLE IF EXISTS {role}")
