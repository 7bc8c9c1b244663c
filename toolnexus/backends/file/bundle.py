"""The file bundle: a file store and its file lock (files keep no message log)."""

from __future__ import annotations

import os

from .store import file_store

__all__ = ["file_backend"]


def file_backend(directory: str | os.PathLike) -> dict:
    """Return {"store", "lock", "log", "close", "desc"} in one directory (one host).

    The store is `file_store(directory)` with its file lock; "log" is None (there is no
    file message log: pair the store with `sqlite_log` to keep one).
    """
    store = file_store(directory)
    return {"store": store, "lock": store["lock"], "log": None, "close": lambda: None,
            "desc": f"file_backend({str(directory)!r})"}  # fmt: skip
