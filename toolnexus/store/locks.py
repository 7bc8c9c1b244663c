"""Per-conversation locks: `fn(id) -> context manager` held around get -> run -> save.

`local_lock` serves one process; the databases' locks (`file_lock` for several processes
on one host, `redis_lock` and `postgres_lock` for many hosts) live in their folders under
`toolnexus.backends`, built on the helpers here. A lock not taken within its timeout
raises LockTimeoutError: a run never goes on without its lock.

Every shipped durable store carries the cross-process lock that suits it under its
"lock" key (`paired_lock` makes it on first use), and the client takes that lock by
default, so processes racing on one conversation id lose no turn without any option.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from typing import Any

__all__ = ["local_lock", "paired_lock", "PairedLock", "LockTimeoutError", "LockLostError"]


class LockTimeoutError(TimeoutError):
    """A conversation lock could not be taken in time (the run never goes on without it)."""


class LockLostError(RuntimeError):
    """A conversation lock was lost while held (it expired, or its session ended), so the
    save was refused: whatever another writer saved since is kept, and this exchange is
    not acknowledged (ask again)."""


class _Local:
    """One id's in-process lock, entered by `with`: see `local_lock`."""

    # No mutant: a class's slots are made with it, before tools/mutate.py swaps the code in
    # (a misspelt slot fails every use; the tests build _Local on each lock).
    __slots__ = ("_locks", "_guard", "_timeout", "_id", "_entry")  # pragma: no mutate

    def __init__(self, locks: dict, guard: threading.Lock, timeout: float, id: str) -> None:
        self._locks, self._guard, self._timeout, self._id = locks, guard, timeout, id
        self._entry: list | None = None

    def __enter__(self) -> _Local:
        with self._guard:
            entry = self._locks.get(self._id)
            if entry is None:
                # A Lock, not an RLock: the async driver may release it from another thread.
                entry = self._locks[self._id] = [threading.Lock(), 0]
            entry[1] += 1  # holders and waiters: the entry goes when the last one leaves
        if not entry[0].acquire(timeout=self._timeout):
            self._leave(entry)
            raise LockTimeoutError(
                f"conversation lock for {self._id!r} not taken within {self._timeout}s"
            )
        self._entry = entry
        return self

    def __exit__(self, *exc: Any) -> None:
        entry, self._entry = self._entry, None
        if entry is None:  # never taken, or let go already: never release another's hold
            return
        entry[0].release()
        self._leave(entry)

    def _leave(self, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if not entry[1]:
                del self._locks[self._id]


def local_lock(timeout: float = 60.0) -> Callable[[str], AbstractContextManager]:
    """Return an in-process lock per conversation id (the default for a store with no "lock")."""
    locks: dict[str, list] = {}  # id -> [its Lock, how many hold or wait for it]
    guard = threading.Lock()

    def hold(id: str) -> _Local:
        return _Local(locks, guard, timeout, id)

    return hold


def paired_lock(make: Callable[[], Callable]) -> PairedLock:
    """Return a lock made by `make()` on its first use: the "lock" a store pairs itself with.

    Made lazily, so a store that is never locked creates no lock files, pools or
    threads. `close()` closes the made lock if it has a "close" (a pool it owns).
    """
    return PairedLock(make)


class PairedLock:
    """A lock made on its first use (see `paired_lock`): `lock(id)` is the made lock's.

    The store that pairs itself with it asks `made()` for the lock its fused calls take
    (the store's own database lock, with its own methods) and `peek()` whether it was
    ever made (a save while nothing is held holds nothing).
    """

    # No mutant: as _Local's slots (made with the class, before a mutant's code is in).
    __slots__ = ("_make", "_made", "_guard")  # pragma: no mutate

    def __init__(self, make: Callable[[], Callable]) -> None:
        self._make, self._made, self._guard = make, [], threading.Lock()

    def __call__(self, id: str) -> AbstractContextManager:
        return self.made()(id)

    def made(self) -> Callable[[str], AbstractContextManager]:
        """Return the made lock, making it now if this is its first use."""
        if not self._made:
            with self._guard:
                if not self._made:
                    self._made.append(self._make())
        return self._made[0]

    def peek(self) -> Callable[[str], AbstractContextManager] | None:
        """Return the made lock, or None if it was never used (a save then holds nothing)."""
        return self._made[0] if self._made else None

    def close(self) -> None:
        """Close the made lock (when it has a close: a pool it owns); a later use makes
        another."""
        with self._guard:
            made = self._made.pop() if self._made else None
        if callable(getattr(made, "close", None)):
            made.close()


# ---- cross-process locks ---------------------------------------------------
# Each one is a `take(id, seconds) -> release` function wrapped by `_per_id`: threads
# of one process first queue on the local lock, so only one of them at a time polls
# the shared backend. Like the local lock, these are not reentrant (taking an id you
# hold times out), and may be released from another thread than the one that took
# them (the async driver enters and exits them in worker threads).

# No mutant: an alias for annotations only (strings here, never evaluated).
Take = Callable[[str, float], Callable[[], None]]  # pragma: no mutate


def _per_id(
    take: Take, timeout: float, inner: Callable | None = None
) -> Callable[[str], AbstractContextManager]:
    inner = inner or local_lock(timeout)

    @contextmanager
    def hold(id: str):
        deadline = time.monotonic() + timeout
        with inner(id):
            release = take(id, max(0.0, deadline - time.monotonic()))
            try:
                yield
            finally:
                release()

    return hold


def _queued(queue: Callable, id: str, timeout: float, take: Callable[[float], Any]) -> tuple:
    """Enter `id`'s place in this process's queue (`queue`, a local lock), then call
    `take(deadline)`; return (the entered queue entry, what `take` returned). A failed
    take leaves the queue. For the takes a store's fused calls make (see `_per_id`)."""
    deadline = time.monotonic() + timeout
    queued = queue(id)
    queued.__enter__()
    try:
        return queued, take(deadline)
    except BaseException:
        queued.__exit__(None, None, None)
        raise


def _poll(try_once: Callable[[], bool], seconds: float, what: str) -> None:
    """Call `try_once` until it returns True, backing off from 1 ms to 50 ms; time out."""
    deadline = time.monotonic() + seconds
    pause = 0.001
    while not try_once():
        if time.monotonic() >= deadline:
            raise LockTimeoutError(f"{what} not taken within {seconds:.3g}s")
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.05)


def _warn_lost(what: str) -> None:
    warnings.warn(
        f"{what} was lost while held (expired or its session ended): another process may "
        "have written the conversation at the same time",
        RuntimeWarning,
        stacklevel=4,
    )
