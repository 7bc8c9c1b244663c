"""Statements sent through libpq directly (toolnexus/store/_pq.py), against the real server.

The store's hot statements skip psycopg's cursor; these pin that the parameters and
errors still mean what they mean through psycopg: text, numbers, NULL and timestamps
arrive as values; NUL, a lone surrogate and a naive timestamp are refused before
anything is sent (libpq would cut a text at its NUL); a server error is psycopg's own
exception class; another client encoding is honoured.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.store import _pq

psycopg = pytest.importorskip("psycopg")


def rows(conn, query: str, params=()) -> list[tuple]:
    """The result of `_pq.execute` as rows of text cells (bytes, None for NULL)."""
    result = _pq.execute(conn, query, params)
    return [
        tuple(result.get_value(i, j) for j in range(result.nfields)) for i in range(result.ntuples)
    ]


@pytest.fixture(scope="module")
def conn(postgres_dsn):
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        yield c


def test_parameters_arrive_as_values_and_cells_come_back_as_text(conn):
    when = datetime(2026, 12, 1, 15, 30, 0, 123456, tzinfo=UTC)
    query = (
        "SELECT %s::text, pg_typeof(%s)::text, %s::int + 1, %s::text IS NULL, %s::timestamptz = %s"
    )
    values = ("héllo 'quoted' %s", 2**40, 41, None, when, when)
    assert rows(conn, query, values) == [(b"h\xc3\xa9llo 'quoted' %s", b"bigint", b"42",
                                              b"t", b"t")]  # fmt: skip
    assert rows(conn, "SELECT NULL::text, ''::text") == [(None, b"")]
    assert rows(conn, "SELECT 1 WHERE false") == []


@settings(max_examples=60)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))
def test_any_storable_text_round_trips(conn, text):
    (cell,) = rows(conn, "SELECT %s::text", (text,))[0]
    assert cell.decode() == text


@pytest.mark.parametrize(
    "value, error",
    [
        ("a\x00b", "DataError"),  # libpq would send "a" alone
        ("a\ud800b", "UnicodeEncodeError"),  # as psycopg raises it
        (datetime(2026, 1, 1), "ValueError"),  # naive: which zone it means is unknown
        (1.5, "TypeError"),  # no text form chosen for it: refused, not guessed
    ],
)
def test_values_the_server_cannot_take_as_given_are_refused_before_sending(conn, value, error):
    with pytest.raises(Exception) as refused:
        rows(conn, "SELECT %s::text", (value,))
    assert type(refused.value).__name__ == error
    assert rows(conn, "SELECT 1") == [(b"1",)]  # the connection is still usable


def test_a_server_error_is_psycopgs_own_exception_and_the_connection_goes_on(conn):
    with pytest.raises(psycopg.errors.DivisionByZero):
        rows(conn, "SELECT 1 / %s", (0,))
    with pytest.raises(psycopg.errors.UndefinedTable):
        rows(conn, "SELECT * FROM tnx_no_such_table_here")
    assert rows(conn, "SELECT %s::int * 2", (21,)) == [(b"42",)]


def test_another_client_encoding_is_honoured(postgres_dsn):
    with psycopg.connect(postgres_dsn, autocommit=True, client_encoding="LATIN1") as latin:
        assert _pq.encoding(latin) == "iso8859-1"
        (cell,) = rows(latin, "SELECT %s::text || 'é'", ("café ",))[0]
        assert cell.decode(_pq.encoding(latin)) == "café é"


def test_statements_are_prepared_once_per_session_and_again_when_the_session_lost_them(conn):
    def prepared() -> set:
        rows = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
        return {name for (name,) in rows if name.startswith("tnx_")}

    conn.execute("DEALLOCATE ALL")
    assert rows(conn, "SELECT %s::int + 1", (1,)) == [(b"2",)]
    assert rows(conn, "SELECT %s::int + 1", (2,)) == [(b"3",)]
    assert len(prepared()) == 1  # the second run reused it
    assert rows(conn, "SELECT %s::text || 'x'", ("1",)) == [(b"1x",)]  # same text, str
    assert len(prepared()) == 2  # another statement, another name
    conn.execute("DEALLOCATE ALL")  # as a pool's reset or a new session would
    assert rows(conn, "SELECT %s::int + 1", (3,)) == [(b"4",)]
    assert len(prepared()) == 1


def test_a_connection_with_preparing_turned_off_prepares_nothing(postgres_dsn):
    with psycopg.connect(postgres_dsn, autocommit=True, prepare_threshold=None) as bouncer:
        assert rows(bouncer, "SELECT %s::int * 3", (5,)) == [(b"15",)]
        names = bouncer.execute("SELECT name FROM pg_prepared_statements").fetchall()
        assert names == []
