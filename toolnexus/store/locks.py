"""Per-conversation locks: `fn(id) -> context manager` held around get -> run -> save."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager

__all__ = ["local_lock", "LockTimeoutError"]


class LockTimeoutError(TimeoutError):
    """A conversation lock could not be taken in time (the run never goes on without it)."""


def local_lock(timeout: float = 60.0) -> Callable[[str], AbstractContextManager]:
    """Return an in-process lock per conversation id (the client's default)."""
    locks: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
    guard = threading.Lock()

    @contextmanager
    def hold(id: str):
        with guard:
            lock = locks.get(id)
            if lock is None:
                lock = locks[id] = threading.RLock()
        if not lock.acquire(timeout=timeout):
            raise LockTimeoutError(f"conversation lock for {id!r} not taken within {timeout}s")
        try:
            yield
        finally:
            lock.release()

    return hold
