"""The message log: every user message and AI answer, searchable by text and date.

A log is a dict of closures: "record"(entry), "query"(contains=, since=, until=,
limit=, conversation_id=) -> entries oldest first, "clear"(before=) -> count removed.
Backends import their database driver lazily.
"""

from .entry import make_entry
from .memory import in_memory_log
from .postgres import postgres_log
from .sqlite import sqlite_log
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
