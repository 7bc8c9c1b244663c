"""Threads a turn's tool calls are offered to while they overlap (see `sync.overlap`).

A call is offered, not handed over: whoever gets to it first runs it, a helper thread or
the thread that offered it once that one is free (a lock taken without waiting decides).
A turn whose first call returns at once takes the others back before a helper got the
interpreter lock, and nothing waits for a thread; a helper that wakes to find its call
taken goes back to sleep after one lock test. `ThreadPoolExecutor` with `cancel()` has
the same rule, at the cost of its futures and semaphores on both threads: in a process
that also serves requests (the loopback benchmark) the helper holding the interpreter
lock for that bookkeeping cost the run 0.3-0.4 ms a turn.

The async driver offers a turn's plain tools here too and never takes one back (the event
loop must not run them): an offer is lighter than an executor's future, and the last call
of the turn wakes the loop once (`aio._in_helpers`).

A runtime owns one `Helpers` (bounded: at most `limit` threads, started on demand) and
closes it with itself; a forked child makes its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Helpers", "Offer"]


class Offer:
    """One offered call: `take()` claims it for the caller; `result()` waits for the
    helper that claimed it instead."""

    __slots__ = ("fn", "args", "claim", "done", "outcome")

    def __init__(self, fn: Callable, args: tuple):
        self.fn, self.args = fn, args
        self.claim = threading.Lock()  # held by whoever runs the call
        self.done = threading.Lock()  # released once a helper has run it
        self.done.acquire()
        self.outcome: tuple = ()

    def take(self) -> bool:
        """Claim the call for the calling thread; False when a helper already has it."""
        return self.claim.acquire(False)

    def result(self) -> Any:
        """Return what the call returned in the helper that took it (or raise its error)."""
        self.done.acquire()
        ok, value = self.outcome
        if not ok:
            raise value
        return value

    def _run_here(self) -> None:
        try:
            self.outcome = (True, self.fn(*self.args))
        except BaseException as e:  # handed to the thread waiting in result()
            self.outcome = (False, e)
        finally:
            self.done.release()


class Helpers:
    """At most `limit` daemon threads that run the calls offered to them."""

    def __init__(self, limit: int, name: str):
        import queue  # on first use: `import toolnexus` does not pay for it

        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._limit, self._name = limit, name
        self._threads = 0  # started and not stopped
        self._idle = 0  # of those, waiting for an offer (as far as offers know)
        self._closed = False

    def __repr__(self) -> str:
        return f"Helpers({self._threads} threads, {self._idle} idle)"

    def offer(self, fn: Callable, *args: Any) -> Offer:
        """Offer fn(*args) to a helper (started when none is idle, up to the limit)."""
        offer = Offer(fn, args)
        with self._lock:
            if self._closed:
                raise RuntimeError("this client was closed: create a new one")
            start = not self._idle and self._threads < self._limit
            if start:
                self._threads += 1
            elif self._idle:
                self._idle -= 1
        self._queue.put(offer)
        if start:
            threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        return offer

    def _serve(self) -> None:
        while True:
            offer = self._queue.get()
            if offer is None:
                return
            if offer.take():
                offer._run_here()
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Stop the threads once they are done with what they run. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._queue.put(None)
