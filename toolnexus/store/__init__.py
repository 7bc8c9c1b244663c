"""Stores: `{"get", "save"}` closures (plus optional "delete", "ids", "desc")."""

from .decorators import (
    DecryptionError,
    capped_store,
    encrypted,
    namespaced,
    observed,
    read_through,
    retention,
    sanitize_ids,
    sanitized_file_store,
)
from .errors import StoreCorruptError, StoreUnavailableError
from .file import file_store
from .locks import LockTimeoutError, file_lock, local_lock, postgres_lock, redis_lock
from .memory import in_memory_store
from .postgres import postgres_store
from .redis import redis_store
from .sqlite import sqlite_store

__all__ = [
    "StoreCorruptError",
    "StoreUnavailableError",
    "LockTimeoutError",
    "in_memory_store",
    "file_store",
    "DecryptionError",
    "capped_store",
    "encrypted",
    "namespaced",
    "observed",
    "read_through",
    "retention",
    "sanitize_ids",
    "sanitized_file_store",
    "local_lock",
    "sqlite_store",
    "redis_store",
    "postgres_store",
    "file_lock",
    "redis_lock",
    "postgres_lock",
]
