"""The message log: every user message and AI answer, searchable by text and date.

A log is a dict of closures: "record"(entry), "query"(contains=, since=, until=,
limit=, conversation_id=) -> entries oldest first, "clear"(before=) -> count removed.
Backends import their database driver lazily.
"""

from ..backends.memory.log import in_memory_log
from ..backends.postgres.log import postgres_log
from ..backends.sqlite.log import sqlite_log
from .entry import make_entry
from .tool import chat_history_tool
from .wiring import NoMessageLogError, record_exchange

__all__ = [
    "NoMessageLogError",
    "chat_history_tool",
    "in_memory_log",
    "make_entry",
    "postgres_log",
    "record_exchange",
    "sqlite_log",
]
