"""The PostgreSQL store, lock and log speak through psycopg's own API, against the real server.

What the hand-written libpq path (store/_pq.py, removed) once had to prove now holds of
the store through psycopg: texts round trip whatever the client encoding; NUL in a
message is kept (a message row is JSON text) while a NUL id and a lone surrogate are
refused before anything is sent; the exchange's statements are prepared once per
session, and again after the session lost them (DEALLOCATE ALL, DISCARD ALL, a new
connection); a connection with `prepare_threshold=None` (PgBouncer in transaction
mode) prepares nothing; a server's error reaches the store as psycopg's own class, so
the store classifies it.
"""

from __future__ import annotations

import pytest

from toolnexus.backends.postgres.store import StoreRefusedError, postgres_store
from toolnexus.core.frozen import thaw
from toolnexus.core.transcript import TranscriptFormatError
from toolnexus.store.fused import fused_call

psycopg = pytest.importorskip("psycopg")
pool_module = pytest.importorskip("psycopg_pool")

_GET = "FROM (SELECT $1::text AS id) k"  # the store's read, as the server keeps it prepared


def msg(text: str) -> dict:
    return {"role": "user", "content": text}


@pytest.fixture
def table(postgres_dsn, unique):
    name = f"tnx_{unique}"
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        c.execute(f"DROP TABLE IF EXISTS {name}, {name}_heads")


def one_connection_pool(dsn: str, **kwargs):
    """A pool of exactly one connection: the store's statements all run in its session."""
    return pool_module.ConnectionPool(
        dsn, min_size=1, max_size=1, kwargs={"autocommit": True, **kwargs}
    )


def prepared(pool) -> list[str]:
    """The statements the pool's (only) session holds prepared."""
    with pool.connection() as conn:
        return [s for (s,) in conn.execute("SELECT statement FROM pg_prepared_statements")]


def exchange(store, cid: str, n: int) -> None:
    """What a service does each exchange: read, then save what it read plus a message."""
    read = store["get"](cid) or ()
    store["save"](cid, [*thaw(read), msg(f"message {n}")])


def test_texts_round_trip_in_another_client_encoding(postgres_dsn, table):
    text = "café, naïve, ÿ ± ¼"  # all in LATIN1
    with one_connection_pool(postgres_dsn, client_encoding="LATIN1") as latin:
        store = postgres_store(latin, table)
        store["save"]("c", [msg(text)])
        assert thaw(store["get"]("c")) == [msg(text)]
        assert thaw(postgres_store(latin, table)["get"]("c")) == [msg(text)]  # no memo
    with one_connection_pool(postgres_dsn) as utf8:  # the server stored the characters
        assert thaw(postgres_store(utf8, table)["get"]("c")) == [msg(text)]


def test_nul_in_a_message_is_kept_and_a_lone_surrogate_is_refused(postgres_dsn, table):
    with one_connection_pool(postgres_dsn) as pool:
        store = postgres_store(pool, table)
        store["save"]("c", [msg("a\x00b")])
        assert thaw(postgres_store(pool, table)["get"]("c")) == [msg("a\x00b")]
        with pytest.raises(TranscriptFormatError, match="surrogate"):
            store["save"]("c", [msg("a\x00b"), msg("half \ud800 of it")])
        with pytest.raises(ValueError, match="NUL"):
            store["get"]("a\x00b")
        assert thaw(postgres_store(pool, table)["get"]("c")) == [msg("a\x00b")]


def test_the_exchange_statements_are_prepared_once_per_session_and_again_after_a_reset(
    postgres_dsn, table
):
    with one_connection_pool(postgres_dsn) as pool:
        store = postgres_store(pool, table)
        for n in range(3):
            exchange(store, "c", n)
        reads = [s for s in prepared(pool) if _GET in s]
        assert len(reads) == 1  # prepared once, reused since
        for n, reset in enumerate(("DEALLOCATE ALL", "DISCARD ALL")):  # a pool's, a proxy's
            with pool.connection() as conn:
                conn.execute(reset)
            assert prepared(pool) == []
            exchange(store, "c", 10 + 2 * n)
            exchange(store, "c", 11 + 2 * n)
            assert len([s for s in prepared(pool) if _GET in s]) == 1
        assert [m["content"] for m in thaw(store["get"]("c"))] == [
            f"message {n}" for n in (0, 1, 2, 10, 11, 12, 13)]  # fmt: skip
    with one_connection_pool(postgres_dsn) as fresh:  # a new session prepares its own
        store = postgres_store(fresh, table)
        exchange(store, "c", 12)
        assert len([s for s in prepared(fresh) if _GET in s]) == 1


def test_with_preparing_turned_off_nothing_is_prepared(postgres_dsn, table):
    """PgBouncer in transaction mode: the store, its lock and the bundle's log prepare
    nothing on connections whose prepare_threshold is None."""
    from toolnexus.store import postgres_backend

    kwargs = {"autocommit": True, "prepare_threshold": None}
    with pool_module.ConnectionPool(postgres_dsn, min_size=3, max_size=3, kwargs=kwargs) as pool:
        bundle = postgres_backend(pool, table=table, log_table=table + "_log")
        store = bundle["store"]
        try:
            for n in range(8):  # past psycopg's own threshold (5) too
                with store["lock"]("c"):
                    exchange(store, "c", n)
                held, read = fused_call(store, "lock_load")("d")
                fused_call(store, "save_release")(held, "d", [*thaw(read or ()), msg(f"d {n}")])
            conns = [pool.getconn() for _ in range(3)]  # every session of the pool
            try:
                for conn in conns:
                    assert (
                        conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
                        == 0
                    )
            finally:
                for conn in conns:
                    pool.putconn(conn)
            assert len(thaw(store["get"]("c"))) == 8 and len(thaw(store["get"]("d"))) == 8
        finally:
            bundle["close"]()
            with pool.connection() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}_log")


def test_a_server_error_reaches_the_store_as_psycopgs_class_and_is_classified(postgres_dsn, table):
    with one_connection_pool(postgres_dsn) as pool:
        store = postgres_store(pool, table)
        exchange(store, "c", 0)  # prepared, tables made
        with pool.connection() as conn:
            conn.execute(f"DROP TABLE {table}")  # behind the store's back
        with pytest.raises(StoreRefusedError, match="UndefinedTable") as refused:
            store["get"]("c")
        assert isinstance(refused.value.__context__, psycopg.errors.UndefinedTable)
        with pool.connection() as conn:  # the session goes on
            assert conn.execute("SELECT 1").fetchone() == (1,)
