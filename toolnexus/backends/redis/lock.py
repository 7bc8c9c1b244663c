"""What a cross-process lock's fused take hands back: `Taken` (Redis) and `Held`
(PostgreSQL), entered locks a store's fused calls release (see `locks`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["Taken", "Held"]


class Taken:
    """A lock taken by `redis_lock(...).take_with`: already entered; `__exit__` releases it.

    `release_with(via)` lets a store release it inside its own script (one round trip
    for a save and the unlock): see `redis_lock`.
    """

    __slots__ = ("_release", "_queued", "_open")

    def __init__(self, release: Callable, queued: AbstractContextManager) -> None:
        self._release, self._queued, self._open = release, queued, True

    def __enter__(self) -> Taken:
        return self

    def __exit__(self, *exc: Any) -> None:
        """Release the lock (once: a second exit does nothing)."""
        self._finish(None)

    def release_with(self, via: Callable[[str, str], bool | None]) -> bool:
        """Release through `via(key, token)`: True (it unlocked our token), False (it found
        the lock not ours: lost, warned) or None (it did not unlock: still held).

        Return whether the lock is released now. If `via` raises, the lock is still held.
        """
        if not self._open:
            return True
        return self._finish(via)

    def _finish(self, via: Callable | None) -> bool:
        if not self._open:
            return True
        try:
            if not self._release(via):
                return False  # `via` left it held: the caller exits it later
        except BaseException:
            if via is not None:
                raise  # still held: the caller's exit releases it the usual way
            self._open = False  # a failed unlock: this process lets go all the same
            self._queued.__exit__(None, None, None)
            raise
        self._open = False
        self._queued.__exit__(None, None, None)
        return True


class Held:
    """A PostgreSQL lock taken by `postgres_lock(...).take_on`: entered; `.conn` is the
    connection whose session holds it, and `__exit__` (or `release`) lets it go. `first`:
    the cursor of a statement sent in the take's round trip (see `take_on`), or None."""

    __slots__ = ("_release", "_queued", "conn", "_open", "first")

    def __init__(
        self, release: Callable[[], None], queued: AbstractContextManager, conn: Any, first=None
    ):
        self._release, self._queued, self.conn, self._open = release, queued, conn, True
        self.first = first

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: Any) -> None:
        """Release the lock (once: a second exit does nothing); raise a failed unlock."""
        if not self._open:
            return
        self._open = False
        try:
            self._release()
        finally:
            self._queued.__exit__(None, None, None)

    def release(self) -> BaseException | None:
        """Release the lock; return the error of a failed unlock instead of raising it."""
        try:
            self.__exit__(None, None, None)
        except Exception as e:
            return e
        return None
