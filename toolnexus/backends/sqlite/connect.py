"""Opening SQLite files for the store and the log: WAL set up, read-only files told apart."""

from __future__ import annotations

import time
from typing import Any


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
