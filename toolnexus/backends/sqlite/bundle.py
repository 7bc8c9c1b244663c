"""The SQLite bundle: the store, its file lock and the message log in one file."""

from __future__ import annotations

from ...history.lazy import lazy_log
from .log import sqlite_log
from .store import sqlite_store

__all__ = ["sqlite_backend"]


def sqlite_backend(path: str) -> dict:
    """Return {"store", "lock", "log", "close", "desc"} in one SQLite file (one host).

    The store is `sqlite_store(path)` with its file lock; the log is `sqlite_log(path)`
    in the same file (its own tables), opened on first use.
    """
    store = sqlite_store(path)
    log = lazy_log(lambda: sqlite_log(path), f"sqlite_log({str(path)!r})")

    return {"store": store, "lock": store["lock"], "log": log, "close": log["close"],
            "desc": f"sqlite_backend({str(path)!r})"}  # fmt: skip
