"""Stores: `{"get", "save"}` closures (plus optional "delete", "ids", "desc")."""

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
    "local_lock",
]
