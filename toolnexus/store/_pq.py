"""One statement sent straight through libpq (psycopg's `pq` layer), for the statements a
service runs on every exchange: take the lock, read, save with its log rows, release.

Why: psycopg's `conn.execute` builds a cursor, an adapters map, a parsed query and
loaders for each statement, about 90,000 instructions of Python; sending the same
statement with `send_query_params` and waiting on it with the connection's own `wait`
(non-blocking, Ctrl-C cancels the query as psycopg does) costs about 15,000
(benchmarks/service/README.md). Each statement is prepared once per session, as psycopg
does for a statement it runs often (unless the connection's `prepare_threshold` is None,
as for PgBouncer in transaction mode). Parameters go as text (str, int, datetime, None) and
results come back as libpq's text cells (bytes, None for NULL): the caller converts
what it reads. A server's error is raised as psycopg's own exception class, so callers
classify it as before. For single statements on a connection in autocommit
(`pg_autocommit`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

__all__ = ["execute", "encoding", "placeholders"]

_INT8 = 20  # the type of an int parameter: the server must not guess it from "12"
_UNKNOWN = 0  # text parameters: the server infers the type from where they go
_FATAL_ERROR = 7  # pq.ExecStatus.FATAL_ERROR, as the int a result's status is
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name: not prepared in this session


@lru_cache(maxsize=256)
def placeholders(query: str, codec: str = "utf-8") -> bytes:
    """Return `query` with psycopg's `%s` placeholders numbered as libpq's `$1, $2, ...`,
    in the client encoding `codec`.

    >>> placeholders("SELECT %s, %s || '%%'")
    b"SELECT $1, $2 || '%'"
    """
    count = iter(range(1, 1 << 16))
    numbered = re.sub(r"%([s%])", lambda m: f"${next(count)}" if m[1] == "s" else "%", query)
    return numbered.encode(codec)


def _param(value: Any, encoding: str) -> bytes | None:
    kind = type(value)
    if kind is str:
        text = value.encode(encoding)  # a lone surrogate raises UnicodeEncodeError, as in psycopg
        if b"\x00" in text:  # libpq would cut a text parameter at its first NUL
            import psycopg

            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return text
    if kind is int:
        return str(value).encode()
    if value is None:
        return None
    if kind is datetime:
        if value.tzinfo is None:
            raise ValueError(f"a timestamp parameter must be timezone-aware, got {value!r}")
        return value.isoformat().encode()
    raise TypeError(f"no text form for a {kind.__name__} parameter")


def encoding(conn: Any) -> str:
    """Return the Python codec of the connection's client encoding (text cells are in it)."""
    # The usual one is read without building psycopg's ConnectionInfo.
    status = conn.pgconn.parameter_status(b"client_encoding")
    return "utf-8" if status == b"UTF8" else conn.info.encoding


def execute(conn: Any, query: str, params: Sequence[Any] = ()) -> Any:
    """Run one statement (psycopg `%s` placeholders) on `conn`; return its libpq result
    (`ntuples`, `get_value(row, column)` -> bytes or None)."""
    from psycopg import errors
    from psycopg.generators import execute as sent

    pgconn, codec = conn.pgconn, encoding(conn)
    # str (almost every parameter) is encoded here; _param checks and converts the rest.
    values = [
        v.encode(codec) if type(v) is str and "\x00" not in v else _param(v, codec) for v in params
    ]
    types = tuple([_INT8 if type(v) is int else _UNKNOWN for v in params])
    name, command = _prepared(query, codec, types)
    if conn.prepare_threshold is None:  # preparing turned off (PgBouncer in transaction mode)
        pgconn.send_query_params(command, values, types, None, 0)
        return _check(conn.wait(sent(pgconn)), codec, errors)
    pgconn.send_query_prepared(name, values)
    results = conn.wait(sent(pgconn))
    if results[-1].status == _FATAL_ERROR and _sqlstate(results[-1]) == _NO_SUCH_STATEMENT:
        # Prepared once per session: the server keeps it (and its plan), and a session
        # that lost it (a new connection, DISCARD ALL) prepares it again here.
        pgconn.send_prepare(name, command, types)
        _check(conn.wait(sent(pgconn)), codec, errors)
        pgconn.send_query_prepared(name, values)
        results = conn.wait(sent(pgconn))
    return _check(results, codec, errors)


def _check(results: list, codec: str, errors: Any) -> Any:
    for result in results:
        if result.status == _FATAL_ERROR:
            raise errors.error_from_result(result, codec)
    return results[-1]


def _sqlstate(result: Any) -> bytes | None:
    from psycopg.pq import DiagnosticField

    return result.error_field(DiagnosticField.SQLSTATE)


@lru_cache(maxsize=256)
def _prepared(query: str, codec: str, types: tuple[int, ...]) -> tuple[bytes, bytes]:
    """Return (a statement name, the statement) of a query and its parameter types: the
    name is the digest of both, so a name always stands for one statement."""
    command = placeholders(query, codec)
    digest = hashlib.blake2b(command + repr(types).encode(), digest_size=10).hexdigest()
    return f"tnx_{digest}".encode(), command
