"""Failover across providers and dialects: `fallback(primary, *others, on=None)`.

    chain = fallback(claude, gpt, gemini)      # a value every verb takes
    r = run(chain, "hi", toolkit=tk, conversation_id="u1")
    r["served_by"]                             # {"style", "model", "base_url"} that answered

An exchange starts on the first client of the chain that is not cooling down. When one
of its model requests fails with the provider's fault (`core.retry.provider_fault`: 5xx
and 529, overloads, network failures and timeouts, a 429 whose wait is past the
client's bound), after that client's own retries, the exchange goes on with the next
client: the transcript so far, tool results included, translated to that client's
dialect (core.failover); no tool runs twice. `on=` (a predicate over the error)
replaces that rule. The exchange's store, lock, message log, hooks, max_turns and
deadline are the primary's; each client sends with its own model, system prompt,
request params, retries and body transform.

A client that failed over is skipped by later exchanges for a cool-down (`Breaker`,
DEFAULT_COOLDOWN_S, or the provider's own Retry-After when longer, up to
MAX_COOLDOWN_S), shared by every thread and task using the fallback value; after it, the
client is asked again. See docs/failover.md.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .client import Client
from .core.failover import as_leg
from .core.retry import provider_fault, retry_after

__all__ = ["fallback", "Fallback", "Breaker", "DEFAULT_COOLDOWN_S", "MAX_COOLDOWN_S"]

DEFAULT_COOLDOWN_S = 60.0  # how long a client that failed over is skipped
MAX_COOLDOWN_S = 3600.0  # the longest cool-down a provider's Retry-After may ask for


class Breaker:
    """The clients of one fallback value cooling down, and until when (a circuit breaker).

    Shared by the threads and tasks using the value: one lock around one small dict,
    held for a few instructions. `clock` is a monotonic clock in seconds (tests give
    their own).
    """

    def __init__(self, cooldown_s: float, clock: Callable[[], float] = time.monotonic):
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._until: dict[int, float] = {}
        _LIVE.add(self)

    def order(self, n: int) -> tuple[int, ...]:
        """Return the indexes of `n` clients an exchange asks, in order: those cooling
        down are left out (all of them, in order, when every one is cooling)."""
        now = self._clock()
        with self._lock:
            for i in [i for i, until in self._until.items() if until <= now]:
                del self._until[i]  # cooled down: asked again
            cooling = set(self._until)
        ready = tuple(i for i in range(n) if i not in cooling)
        return ready or tuple(range(n))

    def trip(self, index: int, seconds: float) -> None:
        """Skip client `index` for `seconds` from now (a longer cool-down already set stays)."""
        if seconds <= 0:
            return
        until = self._clock() + seconds
        with self._lock:
            self._until[index] = max(until, self._until.get(index, until))

    def cooling(self) -> dict[int, float]:
        """Return {index: seconds left} of the clients cooling down now."""
        now = self._clock()
        with self._lock:
            return {i: until - now for i, until in self._until.items() if until > now}

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork

    def __repr__(self) -> str:
        return f"Breaker(cooldown_s={self.cooldown_s}, cooling={sorted(self.cooling())})"


_LIVE: weakref.WeakSet[Breaker] = weakref.WeakSet()
os.register_at_fork(after_in_child=lambda: [b._after_fork() for b in list(_LIVE)])


class Fallback(NamedTuple):
    """A chain of clients every verb takes (see `fallback`); what an exchange needs beyond
    its chain (store, lock, log, hooks, runtime, deadline) is read from the primary."""

    clients: tuple[Client, ...]
    on: Callable[[BaseException], bool] | None
    breaker: Breaker

    @property
    def primary(self) -> Client:
        """The first client: its store, lock, message log and hooks serve every exchange."""
        return self.clients[0]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends look for these: not the primary's
            raise AttributeError(name)
        return getattr(self.clients[0], name)  # an exchange's settings are the primary's

    def set(self, *args: Any, **changes: Any) -> Any:
        """Refuse: a chain has no options of its own (the primary's `set` would return the
        primary alone, not a chain)."""
        raise TypeError("a fallback chain has no options of its own: evolve its clients "
                        "(client.set(...)) and make a new chain with fallback(...)")  # fmt: skip

    def close(self) -> None:
        """Close every client of the chain (their runtimes); idempotent."""
        for c in self.clients:
            c.close()

    def __enter__(self) -> Fallback:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        names = ", ".join(f"{c.style}:{c.model}" for c in self.clients)
        return f"Fallback({names}; cooling={sorted(self.breaker.cooling())})"

    __str__ = __repr__


def fallback(
    primary: Client,
    *others: Client,
    on: Callable[[BaseException], bool] | None = None,
    cooldown_s: float = DEFAULT_COOLDOWN_S,
) -> Fallback:
    """Return a chain of clients that every verb takes: an exchange goes on with the next
    client when one fails with the provider's fault (or as `on(error)` says), and a
    client that failed is skipped for `cooldown_s` seconds (0: never skipped).

    The primary's store, lock, message log and hooks serve the whole exchange; each
    client sends with its own model, system prompt, params and retries.
    """
    clients = (primary, *others)
    for c in clients:
        if not isinstance(c, Client):
            what = "a fallback (give its clients instead)" if isinstance(c, Fallback) else (
                type(c).__name__)  # fmt: skip
            raise TypeError(f"fallback takes clients made by create_client, got {what}")
    if not others:
        raise ValueError("fallback needs at least two clients: a primary and a fallback")
    if on is not None and not callable(on):
        raise ValueError("on must be a function(error) -> bool")
    if isinstance(cooldown_s, bool) or not isinstance(cooldown_s, int | float) or cooldown_s < 0:
        raise ValueError(f"cooldown_s must be a number >= 0, got {cooldown_s!r}")
    return Fallback(clients, on, Breaker(float(cooldown_s)))


def cooldown_for(breaker: Breaker, error: BaseException) -> float:
    """Return how long a client that failed with `error` is skipped: the breaker's
    cool-down, or the wait the provider asked for when longer (at most MAX_COOLDOWN_S)."""
    if breaker.cooldown_s <= 0:
        return 0.0
    asked = getattr(error, "retry_after", None)
    if asked is None:
        asked = retry_after(getattr(error, "headers", None), time.time())
    asked = asked if isinstance(asked, int | float) else 0.0
    return max(breaker.cooldown_s, min(float(asked), MAX_COOLDOWN_S))


# ---- an exchange over a chain ----------------------------------------------------------


class Legs(NamedTuple):
    """The driver contexts of an exchange over a chain: the primary's (the exchange's
    own effects) and each client's, by its index (its model requests)."""

    primary: Any
    by_leg: tuple


def chained(chain: Fallback, cfg_of: Callable[[Client], Mapping],
            context_of: Callable[[Client], Any]) -> tuple[dict, Legs]:  # fmt: skip
    """Return the flow configuration and the driver contexts of one exchange over `chain`:
    the primary's exchange, its model turns on the first client not cooling down, the
    others to fail over to in order (core.failover)."""
    order = chain.breaker.order(len(chain.clients))
    legs = [{**cfg_of(chain.clients[i]), "leg": i} for i in order]
    breaker = chain.breaker

    def tripped(info: Mapping) -> None:
        breaker.trip(info["leg"], cooldown_for(breaker, info["error"]))

    cfg = {
        **as_leg(cfg_of(chain.primary), legs[0]),
        "legs": tuple(legs[1:]),
        "fails_over": chain.on or provider_fault,
        "on_failover": tripped,
    }
    return cfg, Legs(context_of(chain.primary), tuple(map(context_of, chain.clients)))


def table(make: Callable, legs: Legs, guard: Any, streaming: bool) -> dict:
    """Return the effect table of an exchange over a chain: the primary's handlers, with
    each model request sent by the handlers of the client its leg names."""
    first = make(legs.primary, guard, streaming)
    tables: dict[int, Mapping] = {0: first}  # the primary's own requests: its own handlers

    def llm(request: Mapping) -> Any:
        i = request.get("leg", 0)
        t = tables.get(i)
        if t is None:
            t = tables[i] = make(legs.by_leg[i], guard, streaming)
        return t["llm"](request)

    return {**first, "llm": llm}
