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
from .locks import LockTimeoutError, local_lock
from .memory import in_memory_store

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
]
