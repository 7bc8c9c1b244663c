"""Opening SQLite files for the store and the log: WAL set up, read-only files told
apart, and sqlite3's errors made the stores' (read-only, unavailable, corrupt)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...store.errors import StoreCorruptError, StoreReadOnlyError, StoreUnavailableError


def read_only(e: BaseException) -> bool:
    """Whether a sqlite3 error says the database (or its directory) cannot be written."""
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == 8:  # SQLITE_READONLY and its extended codes
        return True
    return "readonly database" in str(e) or "read-only" in str(e)


def sqlite_wal(conn: Any, timeout: float) -> None:
    """Switch a SQLite connection's file to WAL (a plain read once the file is in WAL).

    Switching a new file needs it to itself, and SQLite answers "locked" at once, without
    its busy wait, while another connection holds the file's write lock (a second process
    setting the same new file up): retry until `timeout` seconds have passed.
    """
    import sqlite3

    deadline = time.monotonic() + timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


@contextmanager
def sqlite_errors(desc: str, what: str = "") -> Iterator[None]:
    """Turn sqlite3's errors into the stores': read-only, unavailable, corrupt (`desc`
    names the file; `what`, if given, what in it was being read)."""
    try:
        yield
    except sqlite3.OperationalError as e:  # locked past the timeout, unopenable file
        if read_only(e):
            raise StoreReadOnlyError(
                f"{desc} is read-only ({e}): nothing can be saved there; make the file "
                "and its directory writable, or use another path"
            ) from None
        raise StoreUnavailableError(f"{desc} is unavailable: {e}") from None
    except sqlite3.ProgrammingError:  # a closed connection, a wrong call: a bug, as it is
        raise
    except sqlite3.DatabaseError as e:  # not a database, malformed, constraint broken
        raise StoreCorruptError(f"{what}{desc} is corrupt: {e}") from None
