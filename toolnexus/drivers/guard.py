"""A run's deadline (`timeout_ms`) and cancellation token, shared by both drivers."""

from __future__ import annotations

import time
from typing import Any

from ..core.errors import RunCancelledError, RunTimeoutError

__all__ = ["Guard"]


class Guard:
    """The deadline and cancel token of one run; drivers check it between effects.

    `cancel` is anything with `is_set()`: a threading.Event for the sync driver, an
    asyncio.Event for the async one.
    """

    def __init__(self, timeout_ms: float | None, cancel: Any = None):
        self.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        self.cancel = cancel

    def check(self) -> None:
        """Raise RunCancelledError or RunTimeoutError if the run must stop now."""
        if self.cancel is not None and self.cancel.is_set():
            raise RunCancelledError("the run was cancelled")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise RunTimeoutError("the run's deadline (timeout_ms) passed")

    def after_failure(self) -> None:
        """Raise the abort if a failed request was cut short by the deadline or cancel."""
        if self.deadline is not None and time.monotonic() >= self.deadline - 0.05:
            raise RunTimeoutError("the run's deadline (timeout_ms) passed")
        self.check()

    def remaining(self, default: float | None = None) -> float | None:
        """Return the seconds left before the deadline (`default` without one)."""
        if self.deadline is None:
            return default
        return max(0.001, self.deadline - time.monotonic())
