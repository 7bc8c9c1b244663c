"""The PostgreSQL store against the real test server: append vs replace, restart, corruption."""

from __future__ import annotations

from contextlib import contextmanager

import durable_store_cases as cases
import pytest

from toolnexus.backends.postgres.store import postgres_store
from toolnexus.core.frozen import freeze, thaw
from toolnexus.store import StoreCorruptError, StoreUnavailableError
from toolnexus.store.fused import declared, fused_call


@pytest.fixture
def pool(postgres_dsn):
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn, min_size=1, max_size=4) as p:
        yield p


@pytest.fixture
def table(pool, unique):
    name = f"tnx_{unique}"
    yield name
    with pool.connection() as c:
        c.execute(f"DROP TABLE IF EXISTS {name}, {name}_heads")


def raw_for(pool, table) -> dict:
    """Reach past the store into its tables."""

    def run(sql, *args):
        with pool.connection() as c:
            cur = c.execute(sql.format(m=table, h=table + "_heads"), args)
            return cur.fetchall() if cur.description else None

    return {
        "set_body": lambda id, seq, text: run(
            "UPDATE {m} SET body = %s WHERE id = %s AND seq = %s", text, id, seq
        ),
        "drop_row": lambda id, seq: run("DELETE FROM {m} WHERE id = %s AND seq = %s", id, seq),
        "set_version": lambda id, v: run("UPDATE {h} SET version = %s WHERE id = %s", v, id),
        "set_count": lambda id, n: run("UPDATE {h} SET count = %s WHERE id = %s", n, id),
        "rows": lambda id: [
            r[0] for r in run("SELECT body FROM {m} WHERE id = %s ORDER BY seq", id)
        ],
    }


def test_round_trip_and_restart(pool, table):
    cases.check_round_trip_and_restart(lambda: postgres_store(pool, table))


def test_a_dsn_works_like_a_pool(postgres_dsn, pool, table):
    s = postgres_store(postgres_dsn, table)
    try:
        s["save"]("a", cases.turns(3))
        assert thaw(postgres_store(pool, table)["get"]("a")) == cases.turns(3)
    finally:
        s["close"]()


def test_empty_transcript(pool, table):
    cases.check_empty_transcript(lambda: postgres_store(pool, table))


def test_hostile_ids(pool, table):
    cases.check_hostile_ids(lambda: postgres_store(pool, table))


def test_an_id_with_nul_is_a_clear_error(pool, table):
    with pytest.raises(ValueError, match="NUL"):
        postgres_store(pool, table)["save"]("a\x00b", [])


def test_extend_appends_only_new_rows(pool, table):
    cases.check_extend_appends(lambda: postgres_store(pool, table), raw_for(pool, table))


def test_rewrite_replaces(pool, table):
    cases.check_rewrite_replaces(lambda: postgres_store(pool, table), raw_for(pool, table))


def test_interleaved_writers(pool, table):
    cases.check_interleaved_writers(lambda: postgres_store(pool, table))


def test_corruption_is_an_error_naming_the_id(pool, table):
    cases.check_corruption(lambda: postgres_store(pool, table), raw_for(pool, table))


def test_large_transcript(pool, table):
    cases.check_large_transcript(lambda: postgres_store(pool, table))


def test_rows_without_a_head_are_corrupt(pool, table):
    s = postgres_store(pool, table)
    s["save"]("a", cases.turns(2))
    with pool.connection() as c:
        c.execute(f"DELETE FROM {table}_heads WHERE id = 'a'")
    with pytest.raises(StoreCorruptError, match="'a'"):
        s["get"]("a")


def test_failed_save_leaves_the_stored_transcript_unchanged(pool, table):
    s = postgres_store(pool, table)
    s["save"]("a", cases.turns(2))
    with pool.connection() as c:  # the server refuses the fourth row, mid-transaction
        c.execute(
            f"CREATE FUNCTION {table}_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN IF new.seq = 3 THEN RAISE EXCEPTION 'refused'; END IF; RETURN new; END $$"
        )
        c.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW "
            f"EXECUTE FUNCTION {table}_refuse()"
        )
    try:
        for t in (cases.turns(2) + cases.turns(3, tag="x"), cases.turns(6, tag="y")):
            with pytest.raises((StoreCorruptError, StoreUnavailableError)):
                s["save"]("a", t)
        assert thaw(postgres_store(pool, table)["get"]("a")) == cases.turns(2)
    finally:
        with pool.connection() as c:
            c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")
            c.execute(f"DROP FUNCTION IF EXISTS {table}_refuse()")


def test_concurrent_first_use_creates_the_tables_once(postgres_dsn, table):
    from psycopg_pool import ConnectionPool

    def first_use(n):
        with ConnectionPool(postgres_dsn, min_size=1, max_size=2) as p:
            postgres_store(p, table)["save"](f"first-{n}", cases.turns(1))

    errors = cases.thread_errors(first_use, [(n,) for n in range(4)])
    assert errors == []


def test_a_bad_table_name_is_refused(pool):
    with pytest.raises(ValueError, match="table"):
        postgres_store(pool, "x; drop table y")


def test_a_server_that_is_down_is_a_clear_error_without_the_password():
    for dsn in (
        "postgresql://me:hunter2@127.0.0.1:1/test",
        "host=127.0.0.1 port=1 user=me password=hunter2 dbname=test",
    ):
        s = postgres_store(dsn, timeout=1)
        for name, args in (("get", ("a",)), ("save", ("a", [])), ("ids", ())):
            with pytest.raises(StoreUnavailableError) as e:
                s[name](*args)
            assert "127.0.0.1" in str(e.value) and "hunter2" not in str(e.value)
        assert "hunter2" not in s["desc"]


def test_concurrent_savers_from_threads(pool, table):
    cases.check_threads_share_one_store(lambda: postgres_store(pool, table), 10)


def test_property_against_a_dict(pool, table):
    cases.property_against_a_dict(lambda: postgres_store(pool, table), 25)()


def test_store_contract(pool, table):
    from toolnexus.testing import check_store_contract

    check_store_contract(lambda: postgres_store(pool, table))


def test_racing_savers_never_tear_a_transcript(pool, table):
    cases.check_racing_savers(lambda: postgres_store(pool, table))


class _Traced:
    """A pool whose connections record each round trip the store makes (the server is real)."""

    def __init__(self, pool):
        self.pool, self.conninfo, self.sent = pool, pool.conninfo, _Sent()
        self.max_size = pool.max_size

    # The store's paired lock borrows connections too: the store's fused calls read and
    # write on them, so they are traced as well (the lock's own are SELECT statements).
    def getconn(self, timeout=None):
        return _TracedConnection(self.pool.getconn(timeout=timeout), self.sent)

    def putconn(self, conn):
        self.pool.putconn(conn._conn)

    @contextmanager
    def connection(self):
        with self.pool.connection() as conn:
            yield _TracedConnection(conn, self.sent)


class _Sent(list):
    """The statements sent, and `batches`: those sent together in one pipeline."""

    def __init__(self):
        super().__init__()
        self.batches = []


class _TracedConnection:
    def __init__(self, conn, sent):
        self._conn, self._sent = conn, sent

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._conn, name, value)

    def execute(self, query, *args, **kwargs):
        self._sent.append(" ".join(str(query).split())[:40])
        return self._conn.execute(query, *args, **kwargs)

    @contextmanager
    def pipeline(self):
        start = len(self._sent)
        with self._conn.pipeline() as p:
            yield p
        self._sent.batches.append(list(self._sent[start:]))

    @contextmanager
    def transaction(self):
        self._sent.append("BEGIN")
        with self._conn.transaction():
            yield
        self._sent.append("COMMIT")


def test_an_append_to_what_was_read_is_one_statement(pool, table):
    """A service's save (what it just read, plus new messages) is one round trip, no BEGIN."""
    traced = _Traced(pool)
    store, cid = postgres_store(traced, table), cases.new_id()
    store["save"](cid, cases.turns(2))  # a first save locks the new head: a transaction
    first = list(traced.sent)
    assert "BEGIN" in first
    read = store["get"](cid)
    del traced.sent[:]
    store["save"](cid, read.append(freeze(cases.msg("user", "more"))))
    assert len(traced.sent) == 1 and traced.sent[0].startswith("WITH head AS (UPDATE")
    assert thaw(postgres_store(pool, table)["get"](cid)) == cases.turns(2) + [
        cases.msg("user", "more")
    ]


def test_an_append_over_a_moved_head_saves_whole(pool, table):
    """When another writer moved the head, the one-statement append writes nothing and the
    save goes the general way: the store holds exactly the last save, no stray rows."""
    traced = _Traced(pool)
    mine, theirs, cid = postgres_store(traced, table), postgres_store(pool, table), cases.new_id()
    mine["save"](cid, cases.turns(2))
    read = mine["get"](cid)
    theirs["save"](cid, cases.turns(3, "theirs"))  # longer, not an extension of ours
    del traced.sent[:]
    mine["save"](cid, read.append(freeze(cases.msg("user", "mine"))))
    assert traced.sent[0].startswith("WITH head AS (UPDATE") and "BEGIN" in traced.sent
    expected = cases.turns(2) + [cases.msg("user", "mine")]
    assert thaw(theirs["get"](cid)) == expected
    raw = raw_for(pool, table)
    assert len(raw["rows"](cid)) == len(expected)


def test_a_pool_of_autocommit_connections_works_alike(postgres_dsn, table):
    """Saves that need a transaction open one themselves (the chat service's pools)."""
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn, min_size=1, max_size=2, kwargs={"autocommit": True}) as p:
        cases.check_interleaved_writers(lambda: postgres_store(p, table))
        cases.check_racing_savers(lambda: postgres_store(p, table))


# ---- an exchange's message-log entries written in the save's own statement -----------


@pytest.fixture
def logged(pool, table):
    """(traced pool, store, log, client) of one backend bundle on one pool; the log table
    is dropped after."""
    from toolnexus import create_in_process_client
    from toolnexus.store import postgres_backend

    traced = _Traced(pool)
    bundle = postgres_backend(traced, table=table, log_table=table + "_log")
    store, log = bundle["store"], bundle["log"]

    def echo(req):
        return {"content": "re: " + req["messages"][-1]["content"]}

    client = create_in_process_client(model="m", generate=echo, store=store, message_log=log)
    yield traced, store, log, client
    with pool.connection() as c:
        c.execute(f"DROP TABLE IF EXISTS {table}_log")


def _log_texts(log, cid):
    return [(e["direction"], e["text"]) for e in log["query"](conversation_id=cid)]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_an_exchange_and_its_log_entries_are_one_statement(logged, driver):
    """The usual save of an exchange also writes its two log entries: one statement, one
    commit, no separate log INSERT (so no moment where one is stored and not the other)."""
    import asyncio

    from toolnexus import aask, ask

    traced, store, log, client = logged
    cid = cases.new_id()

    def exchange(text):
        return (
            ask(client, text, id=cid)
            if driver == "sync"
            else asyncio.run(aask(client, text, id=cid))
        )

    exchange("one")  # a first save creates the head: a transaction
    del traced.sent[:]
    exchange("two")
    writes = [s for s in traced.sent if not s.startswith("SELECT")]
    assert len(writes) == 1 and writes[0].startswith("WITH head AS (UPDATE"), traced.sent
    assert _log_texts(log, cid) == [
        ("user", "one"),
        ("ai", "re: one"),
        ("user", "two"),
        ("ai", "re: two"),
    ]
    assert [m["content"] for m in store["get"](cid)] == ["one", "re: one", "two", "re: two"]


def test_a_moved_head_logs_in_the_general_save_once(logged, pool, table):
    """When another writer moved the head during the exchange, the one statement writes
    nothing (no log rows either) and the general transaction saves and logs once."""
    from toolnexus import ask, create_in_process_client

    traced, store, log, _ = logged
    cid = cases.new_id()
    theirs = cases.turns(2, "theirs")

    def meddling(req):  # a writer that ignores the lock saves while the model thinks
        if req["messages"][-1]["content"] == "two":
            postgres_store(pool, table)["save"](cid, theirs)
        return {"content": "re: " + req["messages"][-1]["content"]}

    client = create_in_process_client(model="m", generate=meddling, store=store, message_log=log)
    ask(client, "one", id=cid)
    del traced.sent[:]
    ask(client, "two", id=cid)
    sent = [s for s in traced.sent if not s.startswith("SELECT pg_")]  # not the lock's
    assert sent[1].startswith("WITH head AS (UPDATE"), traced.sent
    # then one transaction: head lock, write, the log's rows, commit
    assert sent[2] == "BEGIN" and sent[-1] == "COMMIT", traced.sent
    assert sent[-2].startswith("WITH saved AS (SELECT 1) INSERT INTO")
    assert _log_texts(log, cid) == [
        ("user", "one"), ("ai", "re: one"), ("user", "two"), ("ai", "re: two")
    ]  # fmt: skip
    # the exchange replaced what the meddler wrote (the last save wins, whole)
    assert [m["content"] for m in store["get"](cid)] == ["one", "re: one", "two", "re: two"]


def test_a_log_refusing_its_rows_never_loses_the_exchange(logged, pool, table):
    """The log's table gone: the exchange is still saved (without the log's part), and the
    log's failure is reported as a log_error, as when the log is written apart."""
    from toolnexus import ask, create_in_process_client

    traced, store, log, _ = logged
    events = []
    client = create_in_process_client(
        model="m", generate=lambda req: {"content": "ok"}, store=store, message_log=log,
        on_metric=events.append,
    )  # fmt: skip
    cid = cases.new_id()
    ask(client, "one", id=cid)
    with pool.connection() as c:
        c.execute(f"DROP TABLE {table}_log")
    assert ask(client, "two", id=cid)["text"] == "ok"
    assert [m["content"] for m in store["get"](cid)] == ["one", "ok", "two", "ok"]
    assert [e["event"] for e in events].count("log_error") == 1
    assert [e["error"] for e in events if e["event"] == "run"] == [False, False]


def test_a_wrapped_save_is_never_bypassed(pool, table):
    """A decorator that wraps "save" (here capped_store) keeps the rest of the store's map;
    the client must then save through the wrapper, and log apart."""
    from toolnexus import ask, create_in_process_client
    from toolnexus.store import capped_store, postgres_backend

    bundle = postgres_backend(pool, table=table, log_table=table + "_log")
    store, log = bundle["store"], bundle["log"]
    try:
        capped = capped_store(2, store)
        assert declared(capped, "save_logged") is None  # capped replaced save: dropped
        assert declared(store, "save_logged").where == declared(log, "rows").where
        client = create_in_process_client(
            model="m", generate=lambda req: {"content": "ok"}, store=capped, message_log=log
        )
        cid = cases.new_id()
        ask(client, "one", id=cid)
        ask(client, "two", id=cid)
        assert [m["content"] for m in store["get"](cid)] == ["two", "ok"]  # capped to 2
        assert len(log["query"](conversation_id=cid)) == 4
    finally:
        with pool.connection() as c:
            c.execute(f"DROP TABLE IF EXISTS {table}_log")


def test_log_rows_are_written_only_with_their_transcript(pool, table):
    """An append over a moved head writes no log rows in its one statement, and a general
    save that the server refuses writes none either: the log never gets ahead of the store."""
    from datetime import UTC, datetime

    from toolnexus.history.wiring import exchange_entries
    from toolnexus.store import postgres_backend

    bundle = postgres_backend(pool, table=table, log_table=table + "_log")
    store, log = bundle["store"], bundle["log"]
    try:
        store["save"]("a", cases.turns(4))
        read = store["get"]("a")
        postgres_store(pool, table)["save"]("a", cases.turns(1, tag="x"))  # moves the head
        with pool.connection() as c:  # the server refuses row 3 of any later write
            c.execute(
                f"CREATE FUNCTION {table}_refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN IF new.seq = 3 THEN RAISE EXCEPTION 'refused'; END IF; "
                "RETURN new; END $$"
            )
            c.execute(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW "
                f"EXECUTE FUNCTION {table}_refuse()"
            )
        entries = exchange_entries("a", "q", "answer", now=datetime.now(UTC))
        with pytest.raises((StoreCorruptError, StoreUnavailableError)):
            fused_call(store, "save_logged")(
                "a", read.append(freeze(cases.msg("user", "q"))), fused_call(log, "rows"), entries
            )
        assert log["query"](conversation_id="a") == ()
        assert thaw(postgres_store(pool, table)["get"]("a")) == cases.turns(1, tag="x")
    finally:
        with pool.connection() as c:
            c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads, {table}_log")
            c.execute(f"DROP FUNCTION IF EXISTS {table}_refuse()")


def test_a_get_after_a_save_hands_back_the_value_saved(pool, table):
    cases.check_get_hands_back_the_value_saved(
        lambda: postgres_store(pool, table), raw_for(pool, table)
    )


def test_a_get_reads_past_what_it_knows_and_hides_nothing(pool, table):
    cases.check_reads_past_what_it_knows_and_hides_nothing(
        lambda: postgres_store(pool, table), raw_for(pool, table)
    )


# ---- the fused exchange: the lock's own connection serves the load and the save --------


class _Borrows(_Traced):
    """A traced pool that also counts the connections borrowed (pool.connection/getconn)."""

    def __init__(self, pool):
        super().__init__(pool)
        self.borrowed = 0

    def getconn(self, timeout=None):
        self.borrowed += 1
        return super().getconn(timeout)

    @contextmanager
    def connection(self):
        self.borrowed += 1
        with super().connection() as conn:
            yield conn


def test_an_exchange_borrows_one_connection_its_lock_holds(pool, table):
    """With the bundle's own store, lock and log, an exchange reads, saves and logs on the
    connection its advisory lock lives on: one connection borrowed, not three."""
    from toolnexus import ask, create_in_process_client
    from toolnexus.store import postgres_backend

    traced = _Borrows(pool)
    bundle = postgres_backend(traced, table=table, log_table=table + "_log")
    echo = lambda req: {"content": "re: " + req["messages"][-1]["content"]}  # noqa: E731
    client = create_in_process_client(
        model="m", generate=echo, store=bundle["store"], message_log=bundle["log"]
    )
    cid = cases.new_id()
    try:
        ask(client, "one", id=cid)
        traced.borrowed, traced.sent[:] = 0, []
        ask(client, "two", id=cid)
        assert traced.borrowed == 1, traced.sent
        writes = [s for s in traced.sent if not s.startswith("SELECT")]
        assert len(writes) == 1 and writes[0].startswith("WITH head AS (UPDATE"), traced.sent
        assert [e["text"] for e in bundle["log"]["query"](conversation_id=cid)] == [
            "one", "re: one", "two", "re: two"
        ]  # fmt: skip
    finally:
        with pool.connection() as c:
            c.execute(f"DROP TABLE IF EXISTS {table}_log")


def test_an_exchange_with_a_given_history_takes_the_plain_lock(pool, table):
    """history= skips the load, so no fused lock is taken; the save still goes through."""
    from toolnexus import ask, create_in_process_client, run

    store, cid = postgres_store(pool, table), cases.new_id()
    echo = lambda req: {"content": "re: " + req["messages"][-1]["content"]}  # noqa: E731
    client = create_in_process_client(model="m", generate=echo, store=store)
    run(client, "one", id=cid, history=[{"role": "user", "content": "zero"}])
    got = [m["content"] for m in store["get"](cid)]
    assert got == ["zero", "one", "re: one"]
    ask(client, "two", id=cid)  # and the fused path after it
    assert [m["content"] for m in store["get"](cid)] == [*got, "two", "re: two"]


def test_a_decorated_save_is_never_bypassed_by_the_fused_save(pool, table):
    """capped_store wraps save (its get and lock are the store's own): the exchange may
    take and load in one call, but saves through the cap."""
    from toolnexus import ask, create_in_process_client
    from toolnexus.store import capped_store

    inner, cid = postgres_store(pool, table), cases.new_id()
    store = capped_store(2, inner)
    echo = lambda req: {"content": "re: " + req["messages"][-1]["content"]}  # noqa: E731
    client = create_in_process_client(model="m", generate=echo, store=store)
    x = client.plan[False]["exchange"]
    assert x.lock_load is not None and not x.after_lock_load.releases  # the save: separate
    for text in ("one", "two", "three"):
        ask(client, text, id=cid)
    assert [m["content"] for m in inner["get"](cid)] == ["three", "re: three"]


def test_a_new_conversations_first_exchange_is_one_statement_with_its_log(logged):
    """Seen absent, a conversation's first save (and its log rows) is one statement that
    creates its head, not a transaction."""
    from toolnexus import ask

    traced, store, log, client = logged
    cid = cases.new_id()
    ask(client, "warm", id=cases.new_id())  # the tables exist
    del traced.sent[:]
    ask(client, "one", id=cid)
    writes = [s for s in traced.sent if not s.startswith("SELECT")]
    assert len(writes) == 1 and writes[0].startswith("WITH head AS (INSERT"), traced.sent
    assert [e["text"] for e in log["query"](conversation_id=cid)] == ["one", "re: one"]
    assert [m["content"] for m in store["get"](cid)] == ["one", "re: one"]


def test_a_conversation_seen_absent_then_created_elsewhere_is_saved_whole(pool, table):
    mine, theirs, cid = postgres_store(pool, table), postgres_store(pool, table), "race"
    assert mine["get"](cid) is None  # seen absent
    theirs["save"](cid, cases.turns(2, "theirs"))
    mine["save"](cid, cases.turns(1, "mine"))  # the start finds a head: saved the general way
    assert [m["content"] for m in theirs["get"](cid)] == ["mine0"]


def test_a_lock_load_on_a_free_lock_is_one_round_trip(pool, table):
    """The take and the read go in one pipeline (psycopg's pipeline mode): one round trip."""
    traced = _Traced(pool)
    store, cid = postgres_store(traced, table), cases.new_id()
    store["save"](cid, cases.turns(1))
    held, read = fused_call(store, "lock_load")(cid)
    try:
        assert thaw(read) == cases.turns(1)
        (batch,) = traced.sent.batches
        assert [s[:29] for s in batch] == [
            "SELECT pg_try_advisory_lock(%",  # the take
            "SELECT h.version, h.count, h.",  # the read ("get")
        ], batch
    finally:
        held.release()


def test_a_lock_load_that_waited_reads_what_the_holder_saved(pool, table):
    """The read sent with the take ran before the lock was ours when another session held
    it: it is dropped, and the transcript is read again once the lock is taken."""
    import threading
    import time

    import psycopg

    from toolnexus.backends.postgres.lock import advisory_key as _advisory_key

    store, other, cid = postgres_store(pool, table), postgres_store(pool, table), cases.new_id()
    store["save"](cid, cases.turns(1))
    with psycopg.connect(pool.conninfo, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (_advisory_key(cid),))

        def save_then_unlock():
            time.sleep(0.3)
            other["save"](cid, cases.turns(2))
            holder.execute("SELECT pg_advisory_unlock(%s)", (_advisory_key(cid),))

        t = threading.Thread(target=save_then_unlock)
        t.start()
        held, read = fused_call(store, "lock_load")(cid)
        t.join()
    try:
        assert thaw(read) == cases.turns(2)
    finally:
        held.release()


def test_a_failed_read_in_the_take_pipeline_frees_the_lock(pool, table):
    import psycopg

    from toolnexus.backends.postgres.lock import advisory_key as _advisory_key
    from toolnexus.backends.postgres.store import StoreRefusedError

    store, cid = postgres_store(pool, table), cases.new_id()
    store["save"](cid, cases.turns(1))
    with pool.connection() as c:
        c.execute(f"DROP TABLE {table}")  # behind the store's back
    with pytest.raises(StoreRefusedError, match="UndefinedTable"):
        fused_call(store, "lock_load")(cid)
    with psycopg.connect(pool.conninfo, autocommit=True) as other:
        key = _advisory_key(cid)
        assert other.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)


def test_tables_made_before_edit_stamps_get_them_and_read_as_before(pool, table):
    """Its heads gain the "edited" column and its messages the triggers on first use; a
    row changed by hand then shows at the next get of a process that had read it."""
    from toolnexus.store import _rows

    texts = [_rows.encode_message(m) for m in cases.turns(4)]
    with pool.connection() as c:
        c.execute(f"CREATE TABLE {table}_heads (id text PRIMARY KEY, version integer NOT NULL, "
                  "count integer NOT NULL, digest text NOT NULL)")  # fmt: skip
        c.execute(f"CREATE TABLE {table} (id text NOT NULL, seq integer NOT NULL, "
                  "body text NOT NULL, PRIMARY KEY (id, seq))")  # fmt: skip
        c.execute(f"INSERT INTO {table}_heads VALUES ('a', 1, %s, %s)",
                  (len(texts), _rows.chain(_rows.GENESIS, texts)))  # fmt: skip
        for seq, text in enumerate(texts):
            c.execute(f"INSERT INTO {table} VALUES ('a', %s, %s)", (seq, text))
    assert thaw(postgres_store(pool, table)["get"]("a")) == cases.turns(4)
    with pool.connection() as c:
        triggers = {r[0] for r in c.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass", (table,))}  # fmt: skip
        column = c.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = %s "
            "AND column_name = 'edited'", (table + "_heads",)
        ).fetchone()  # fmt: skip
    assert triggers == {"toolnexus_updated", "toolnexus_deleted", "toolnexus_truncated"}
    assert column is not None
    cases.check_reads_past_what_it_knows_and_hides_nothing(
        lambda: postgres_store(pool, table), raw_for(pool, table)
    )


def test_a_truncate_by_hand_is_seen_by_a_process_that_had_read(pool, table):
    s = postgres_store(pool, table)
    s["save"]("a", cases.turns(2))
    s["save"]("a", s["get"]("a").extend(freeze(cases.turns(2, "b"))))
    assert len(s["get"]("a")) == 4
    with pool.connection() as c:
        c.execute(f"TRUNCATE {table}")  # the rows go, the heads stay
    with pytest.raises(StoreCorruptError, match="rows"):
        s["get"]("a")
