"""The message log: every user message and AI answer, searchable by text and date.

A log is a dict of closures: "record"(entry), "query"(contains=, since=, until=,
limit=, conversation_id=) -> entries oldest first, "clear"(before=) -> count removed.
The entries, the lookup tool and the client's wiring live here; each database's log
lives in its folder under `toolnexus.backends` (re-exported below, imported on first
use, with its driver).
"""

from .entry import make_entry
from .tool import chat_history_tool
from .wiring import NoMessageLogError, record_exchange

_LAZY = {
    "in_memory_log": "..backends.memory.log",
    "sqlite_log": "..backends.sqlite.log",
    "postgres_log": "..backends.postgres.log",
}

__all__ = [
    "NoMessageLogError",
    "chat_history_tool",
    "in_memory_log",
    "make_entry",
    "postgres_log",
    "record_exchange",
    "sqlite_log",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
