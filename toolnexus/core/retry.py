"""Retries as pure decisions: Retry-After, backoff with jitter, retry or fail.

The decisions never sleep and never raise on odd input: `plan(error, attempt, ...)`
returns the seconds to wait before the next attempt, or None to give up. The loop
(`loop.run_flow`) asks it after each failed model call and yields a "sleep" effect,
which each driver performs within the run's deadline and cancellation token.

Attempts are numbered from 1: `attempt` is the number of the try that just failed, so
with `retries=2` there are at most 3 tries and a retry is allowed while attempt <= 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pyrsistent import PMap, pmap

__all__ = [
    "RETRYABLE_STATUS",
    "parse_retry_after",
    "retry_after",
    "backoff_ms",
    "is_network_error",
    "is_abort",
    "retryable",
    "error_info",
    "decide",
    "delay_for",
    "plan",
]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 2147483647  # the largest delay-seconds honoured (2**31 - 1)
MAX_BACKOFF_MS = 30_000.0
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() also accepts other scripts' digits
Rng = Callable[[], float]


def parse_retry_after(value: Any) -> int | None:
    """Return the seconds of a Retry-After delay-seconds value, else None (never raises).

    Only ASCII digits in 0..2147483647 count; an HTTP date, a negative, a fraction,
    other scripts' digits, an empty or a huge value all give None (fall back to backoff).

    >>> parse_retry_after("120"), parse_retry_after(" 0 "), parse_retry_after("1.5")
    (120, 0, None)
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), parse_retry_after("-1")
    (None, None)
    >>> parse_retry_after("٣"), parse_retry_after("2147483648")
    (None, None)
    """
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str):
        return None
    value = value.strip(" \t")  # optional whitespace around a header value
    if not _DIGITS.fullmatch(value):
        return None
    # Bound the length before int(): Python refuses to convert very long digit strings.
    significant = value.lstrip("0") or "0"
    if len(significant) > 10:
        return None
    seconds = int(significant)
    return seconds if seconds <= MAX_RETRY_AFTER else None


def retry_after(headers: Any) -> int | None:
    """Return the Retry-After seconds of a headers mapping (name matched case-insensitively).

    >>> retry_after({"RETRY-AFTER": "3"}), retry_after({"retry-after": "soon"}), retry_after(None)
    (3, None, None)
    """
    if not isinstance(headers, Mapping) and not hasattr(headers, "items"):
        return None
    try:
        items = list(headers.items())
    except Exception:  # a headers object that cannot list itself has no usable delay
        return None
    for name, value in items:
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(name, str) and name.lower() == "retry-after":
            return parse_retry_after(value)
    return None


def backoff_ms(attempt: int, base_ms: float, rng: Rng, max_ms: float = MAX_BACKOFF_MS) -> float:
    """Return the backoff before retrying after failed try `attempt`: exponential, jittered.

    The ceiling doubles per attempt (base, 2*base, 4*base, ... capped at `max_ms`) and the
    delay is drawn in [ceiling/2, ceiling]: half fixed so retries stay spaced, half random
    so many clients do not retry in lockstep. `rng` returns a float in [0, 1).

    >>> backoff_ms(1, 500, rng=lambda: 0.0), backoff_ms(3, 500, rng=lambda: 1.0)
    (250.0, 2000.0)
    """
    exponent = min(max(int(attempt), 1) - 1, 60)  # 2**60 * any base is past any cap
    ceiling = min(_clamp(base_ms, 0.0, math.inf) * 2.0**exponent, _clamp(max_ms, 0.0, math.inf))
    jitter = _clamp(rng(), 0.0, 1.0)
    return ceiling / 2 + jitter * ceiling / 2


def _clamp(x: Any, low: float, high: float) -> float:
    # NaN, None or junk from a caller's rng or options must not become a NaN delay.
    try:
        x = float(x)
    except (TypeError, ValueError):
        return low
    return low if math.isnan(x) else min(max(x, low), high)


def _chain(error: BaseException | None) -> list[BaseException]:
    # A driver may wrap the transport error (`raise ProviderError(...) from e`, or even
    # `from None`, which still keeps __context__): look one level down as well.
    if error is None:
        return []
    inner = error.__cause__ or error.__context__
    return [error] if inner is None else [error, inner]


def is_network_error(error: BaseException | None) -> bool:
    """Return whether an error is a network failure worth retrying (not a timeout).

    The transport marks the ProviderError of a connect/read/write failure or a server
    closing the connection `network=True` (timeouts are not: a deadline abort is never
    retried); a bare ConnectionError counts too.
    """
    return any(getattr(e, "network", False) is True or isinstance(e, ConnectionError)
               for e in _chain(error))  # fmt: skip


def is_abort(error: BaseException | None) -> bool:
    """Return whether an error is a deadline or cancellation abort (never retried).

    A timeout, our cancel error, and anything that is not an Exception (an asyncio
    cancellation, KeyboardInterrupt) are aborts.
    """
    from .errors import RunCancelledError

    if error is None:
        return False
    return not isinstance(error, Exception) or isinstance(error, TimeoutError | RunCancelledError)


def _status(error: BaseException | None) -> int | None:
    for e in _chain(error):
        status = getattr(e, "status", None)
        if status is None:  # httpx.HTTPStatusError carries its response instead
            status = getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def retryable(status: int | None = None, error: BaseException | None = None) -> bool:
    """Return whether a failure is worth retrying: 429/500/502/503/504 or a network error.

    >>> retryable(429), retryable(400), retryable(error=ConnectionResetError())
    (True, False, True)
    """
    if is_abort(error):
        return False
    status = status if status is not None else _status(error)
    return status in RETRYABLE_STATUS or is_network_error(error)


def error_info(error: BaseException, attempt: int) -> PMap:
    """Return the info map of a failed try: {error, status?, attempt, retryable}."""
    status = _status(error)
    info = {"error": error, "attempt": attempt, "retryable": retryable(status, error)}
    if status is not None:
        info["status"] = status
    return pmap(info)


def decide(info: Mapping, retries: int, on_error: Callable | None = None) -> str:
    """Return "retry" or "fail" for a failed try; `on_error(info)` overrides within `retries`.

    `on_error` sees every failure (also the last); it returns "retry", "fail", or None
    to keep the default (retry when `info["retryable"]`). It can never add tries beyond
    `retries`, nor retry an abort (deadline or cancellation).

    >>> decide({"attempt": 1, "retryable": True}, 2), decide({"attempt": 3, "retryable": True}, 2)
    ('retry', 'fail')
    >>> decide({"attempt": 1, "retryable": False}, 2, on_error=lambda info: "retry")
    'retry'
    """
    default = "retry" if info.get("retryable") else "fail"
    choice = on_error(info) if on_error is not None else None
    if choice is None:
        choice = default
    elif choice not in ("retry", "fail"):
        raise ValueError(f"on_error must return 'retry', 'fail' or None, got {choice!r}")
    attempt = info.get("attempt", 1)
    within = isinstance(attempt, int) and isinstance(retries, int) and attempt <= retries
    if choice == "retry" and within and not is_abort(info.get("error")):
        return "retry"
    return "fail"


def delay_for(
    attempt: int,
    base_ms: float,
    headers: Any = None,
    rng: Rng | None = None,
    max_ms: float = MAX_BACKOFF_MS,
) -> float:
    """Return the seconds to wait before the next try: Retry-After if usable, else backoff.

    A Retry-After of 0 means retry now. Never negative.

    >>> delay_for(1, 500, {"Retry-After": "0"}), delay_for(1, 500, {"Retry-After": "x"}, lambda: 0)
    (0.0, 0.25)
    """
    seconds = retry_after(headers)
    if seconds is not None:
        return float(seconds)
    if rng is None:  # the core draws no random numbers itself: the driver's source is used
        raise ValueError("a backoff needs rng, a function returning a float in [0, 1)")
    return backoff_ms(attempt, base_ms, rng, max_ms) / 1000.0


def _headers(error: BaseException) -> Any:
    for e in _chain(error):
        headers = getattr(e, "headers", None)
        if headers is None:
            headers = getattr(getattr(e, "response", None), "headers", None)
        if headers is not None:
            return headers
    return None


def plan(
    error: BaseException,
    attempt: int,
    *,
    retries: int,
    base_ms: float,
    on_error: Callable | None = None,
    rng: Rng,
) -> float | None:
    """Return the seconds to wait before retrying after failed try `attempt`, or None to fail.

    Status and headers are read from the error (`.status` / `.headers`, or an httpx
    `.response`), also from the error it wraps.
    """
    if decide(error_info(error, attempt), retries, on_error) == "fail":
        return None
    return delay_for(attempt, base_ms, _headers(error), rng)
