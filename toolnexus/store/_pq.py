"""One statement sent straight through libpq (psycopg's `pq` layer), for the statements a
service runs on every exchange: take the lock, read, save with its log rows, release.

Why: psycopg's `conn.execute` builds a cursor, an adapters map, a parsed query and
loaders for each statement, about 90,000 instructions of Python; sending the same
statement with `send_query_params` and waiting on it with the connection's own `wait`
(non-blocking, Ctrl-C cancels the query as psycopg does) costs about 15,000
(benchmarks/service/README.md). Parameters go as text (str, int, datetime, None) and
results come back as rows of str or None: the caller converts what it reads. A
server's error is raised as psycopg's own exception class, so callers classify it as
before. For single statements on a connection in autocommit (`pg_autocommit`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

__all__ = ["rows", "placeholders"]

_INT8 = 20  # the type of an int parameter: the server must not guess it from "12"
_UNKNOWN = 0  # text parameters: the server infers the type from where they go


@lru_cache(maxsize=256)
def placeholders(query: str) -> bytes:
    """Return `query` with psycopg's `%s` placeholders numbered as libpq's `$1, $2, ...`.

    >>> placeholders("SELECT %s, %s || '%%'")
    b"SELECT $1, $2 || '%'"
    """
    count = iter(range(1, 1 << 16))
    return re.sub(r"%([s%])", lambda m: f"${next(count)}" if m[1] == "s" else "%", query).encode()


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


def rows(conn: Any, query: str, params: Sequence[Any] = ()) -> list[tuple[str | None, ...]]:
    """Run one statement (psycopg `%s` placeholders) on `conn`; return its rows as text."""
    from psycopg import errors, pq
    from psycopg.generators import execute

    pgconn, encoding = conn.pgconn, conn.info.encoding
    values = [_param(v, encoding) for v in params]
    types = [_INT8 if type(v) is int else _UNKNOWN for v in params]
    pgconn.send_query_params(placeholders(query), values, types, None, 0)
    results = conn.wait(execute(pgconn))
    failed = next((r for r in results if r.status == pq.ExecStatus.FATAL_ERROR), None)
    if failed is not None:
        raise errors.error_from_result(failed, encoding)
    out = results[-1]
    width, get = out.nfields, out.get_value
    return [
        tuple(None if (v := get(i, j)) is None else v.decode(encoding) for j in range(width))
        for i in range(out.ntuples)
    ]
