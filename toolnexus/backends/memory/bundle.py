"""The memory bundle: an in-memory store, its in-process lock and an in-memory log."""

from __future__ import annotations

from .log import in_memory_log
from .store import in_memory_store

__all__ = ["memory_backend"]


def memory_backend() -> dict:
    """Return {"store", "lock", "log", "close", "desc"} kept in this process's memory.

    >>> b = memory_backend(); b["store"]["get"]("nobody") is None, b["log"]["query"]()
    (True, ())
    """
    store = in_memory_store()
    return {"store": store, "lock": store["lock"], "log": in_memory_log(),
            "close": lambda: None, "desc": "memory_backend()"}  # fmt: skip
