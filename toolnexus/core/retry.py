"""Retries as pure decisions: Retry-After, backoff with jitter, retry or fail.

The decisions never sleep, never read a clock and never raise on odd input:
`plan(error, attempt, ...)` returns the seconds to wait before the next attempt, or
None to give up. The loop (`flow.run_flow`) asks it after each failed model call and
yields a "sleep" effect, which each driver performs within the run's deadline and
cancellation token. A wait longer than `max_wait_s`, or than the run's time left, is
never planned: `plan` raises the ProviderError at once, with `retry_after` on it.

A Retry-After is delay-seconds or an HTTP-date; a date needs the current wall-clock
time passed in as `now` (epoch seconds), else it is ignored (backoff instead). A
`retry-after-ms` header (milliseconds, OpenAI's and Anthropic's) is read before it.

Which failures are retried follows the official SDKs' `_base_client.py` (openai-python
3.3.1, anthropic-sdk-python 0.121.0; docs/retries.md): `x-should-retry: true|false`
decides first, then 408, 409, 429 and every status >= 500 (Anthropic's 529 included),
connection errors and timeouts. `failure_kind` names the kind of a failure, for retries and
for whoever decides to go to another provider.

Attempts are numbered from 1: `attempt` is the number of the try that just failed, so
with `retries=2` there are at most 3 tries and a retry is allowed while attempt <= 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from .frozen import FrozenMap

__all__ = [
    "RETRYABLE_STATUS",
    "retryable_status",
    "should_retry_header",
    "failure_kind",
    "provider_fault",
    "PROVIDER_FAULTS",
    "parse_retry_after",
    "parse_retry_after_ms",
    "retry_after",
    "backoff_ms",
    "is_network_error",
    "is_abort",
    "retryable",
    "error_info",
    "decide",
    "delay_for",
    "plan",
    "MAX_WAIT_S",
    "too_long",
]

# The statuses below 500 the SDKs retry (408 request timeout, 409 lock timeout, 429 rate
# limit); every status >= 500 is retried too (see `retryable_status`).
RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER = 2147483647  # the largest delay-seconds honoured (2**31 - 1)
MAX_BACKOFF_MS = 30_000.0
MAX_WAIT_S = 60.0  # the longest wait a retry may sleep; a longer Retry-After fails at once
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() also accepts other scripts' digits
_DECIMAL = re.compile(r"[0-9]{1,16}(?:\.[0-9]{1,16})?")  # retry-after-ms: "1500", "1500.5"
Rng = Callable[[], float]


def parse_retry_after(value: Any, now: float | None = None) -> float | None:
    """Return the seconds a Retry-After value asks to wait, else None (never raises).

    Delay-seconds: only ASCII digits in 0..2147483647 count (an int). An HTTP-date
    counts only when `now` (epoch seconds) is given: the seconds from `now` to it, 0 for
    a date past. A negative, a fraction, other scripts' digits, an empty or a huge
    value, or junk all give None (fall back to backoff).

    >>> parse_retry_after("120"), parse_retry_after(" 0 "), parse_retry_after("1.5")
    (120, 0, None)
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), parse_retry_after("-1")
    (None, None)
    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    10.0
    >>> parse_retry_after("٣"), parse_retry_after("2147483648")
    (None, None)
    """
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str):
        return None
    value = value.strip(" \t")  # optional whitespace around a header value
    if not _DIGITS.fullmatch(value):
        return _date_delay(value, now) if now is not None else None
    # Bound the length before int(): Python refuses to convert very long digit strings.
    significant = value.lstrip("0") or "0"
    if len(significant) > 10:
        return None
    seconds = int(significant)
    return seconds if seconds <= MAX_RETRY_AFTER else None


def _date_delay(value: str, now: float) -> float | None:
    if len(value) > 64:  # an HTTP-date is 29 characters; junk is not parsed
        return None
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:  # "-0000" / no zone: HTTP-dates are always GMT
            when = when.replace(tzinfo=UTC)
        delay = when.timestamp() - float(now)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if math.isnan(delay):
        return None
    return min(max(delay, 0.0), float(MAX_RETRY_AFTER))


def parse_retry_after_ms(value: Any) -> float | None:
    """Return the seconds a `retry-after-ms` value asks to wait, else None (never raises).

    Milliseconds as ASCII digits with an optional fraction (the SDKs read it as a float);
    anything else gives None (the `retry-after` header is read instead).

    >>> parse_retry_after_ms("1500"), parse_retry_after_ms(" 20.5 "), parse_retry_after_ms("-1")
    (1.5, 0.0205, None)
    """
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str):
        return None
    value = value.strip(" \t")
    if not _DECIMAL.fullmatch(value):
        return None
    return min(float(value) / 1000.0, float(MAX_RETRY_AFTER))


def _header(headers: Any, wanted: str) -> Any:
    # The value of one header (name matched case-insensitively), else None; a headers
    # object that cannot list itself has none.
    if not isinstance(headers, Mapping) and not hasattr(headers, "items"):
        return None
    try:
        items = list(headers.items())
    except Exception:
        return None
    for name, value in items:
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(name, str) and name.lower() == wanted:
            return value
    return None


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """Return the wait a headers mapping asks for: `retry-after-ms`, else `Retry-After`.

    Names are matched case-insensitively; `now` (epoch seconds) lets an HTTP-date
    count (see `parse_retry_after`). An unreadable `retry-after-ms` falls back to
    `Retry-After`, as the SDKs do.

    >>> retry_after({"RETRY-AFTER": "3"}), retry_after({"retry-after": "soon"}), retry_after(None)
    (3, None, None)
    >>> retry_after({"retry-after-ms": "2500", "retry-after": "3"})
    2.5
    """
    ms = parse_retry_after_ms(_header(headers, "retry-after-ms"))
    if ms is not None:
        return ms
    value = _header(headers, "retry-after")
    return None if value is None else parse_retry_after(value, now)


def should_retry_header(headers: Any) -> bool | None:
    """Return what an `x-should-retry` header says (True, False), or None when absent.

    Only the exact values "true" and "false" count, as in the SDKs.

    >>> should_retry_header({"X-Should-Retry": "false"}), should_retry_header({})
    (False, None)
    """
    value = _header(headers, "x-should-retry")
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return {"true": True, "false": False}.get(value) if isinstance(value, str) else None


def backoff_ms(attempt: int, base_ms: float, rng: Rng, max_ms: float = MAX_BACKOFF_MS) -> float:
    """Return the backoff before retrying after failed try `attempt`: exponential, jittered.

    The ceiling doubles per attempt (base, 2*base, 4*base, ... capped at `max_ms`) and the
    delay is drawn in [ceiling/2, ceiling]: half fixed so retries stay spaced, half random
    so many clients do not retry in lockstep. `rng` returns a float in [0, 1); a driver
    passes its own (the core draws no random numbers itself).

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


# Exception types by (top-level module, class name), matched anywhere in an error's MRO:
# the core classifies errors without importing the HTTP stack or asyncio.
_NETWORK = frozenset(
    (module, name)
    for module in ("httpx", "httpcore")
    for name in ("NetworkError", "RemoteProtocolError")
)
_CANCELLED = frozenset({("asyncio", "CancelledError"), ("concurrent", "CancelledError")})


def _is_a(error: BaseException, kinds: frozenset) -> bool:
    return any((c.__module__.partition(".")[0], c.__name__) in kinds for c in type(error).__mro__)


def is_network_error(error: BaseException | None) -> bool:
    """Return whether an error is a network failure worth retrying (not a timeout).

    A ProviderError the transport marked `network=True` (connect/read/write failures, a
    server closing the connection), httpx's and httpcore's errors and ConnectionError
    count; timeouts do not (a deadline abort is never retried), nor do local protocol
    or setup mistakes.

    >>> is_network_error(ConnectionResetError()), is_network_error(TimeoutError())
    (True, False)
    """
    return any(getattr(e, "network", False) is True or isinstance(e, ConnectionError)
               or _is_a(e, _NETWORK) for e in _chain(error))  # fmt: skip


def is_abort(error: BaseException | None) -> bool:
    """Return whether an error is a deadline or cancellation abort (never retried).

    A timeout, our cancel error, and anything that is not an Exception (an asyncio
    cancellation, KeyboardInterrupt) are aborts.
    """
    from .errors import RunCancelledError

    if error is None:
        return False
    return (not isinstance(error, Exception) or isinstance(error, TimeoutError | RunCancelledError)
            or _is_a(error, _CANCELLED))  # fmt: skip


def _status(error: BaseException | None) -> int | None:
    for e in _chain(error):
        status = getattr(e, "status", None)
        if status is None:  # httpx.HTTPStatusError carries its response instead
            status = getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    return None


def retryable_status(status: Any) -> bool:
    """Return whether the SDKs retry an HTTP status: 408, 409, 429 and every one >= 500.

    >>> [retryable_status(s) for s in (400, 408, 409, 429, 500, 529, None)]
    [False, True, True, True, True, True, False]
    """
    if not isinstance(status, int) or isinstance(status, bool):
        return False
    return status in RETRYABLE_STATUS or status >= 500


def retryable(status: int | None = None, error: BaseException | None = None) -> bool:
    """Return whether a failure is worth retrying, by the official SDKs' rules.

    An abort never is; an `x-should-retry: true|false` header on the error's response
    decides next; then the status (`retryable_status`), then a network failure
    (connection errors and timeouts the transport marked).

    >>> retryable(429), retryable(529), retryable(400), retryable(error=ConnectionResetError())
    (True, True, False, True)
    """
    if is_abort(error):
        return False
    said = should_retry_header(_headers(error)) if error is not None else None
    if said is not None:
        return said
    status = status if status is not None else _status(error)
    return retryable_status(status) or is_network_error(error)


# The kinds of failure that are the provider's (or the way to it), not the request's:
# another try, or another provider, may succeed.
PROVIDER_FAULTS = frozenset({"network", "timeout", "conflict", "rate_limited", "overloaded",
                             "server"})  # fmt: skip


def failure_kind(error: BaseException | None, status: int | None = None) -> str:
    """Return the kind of a failed model call, one word.

    "abort" (deadline, cancellation), "network" (connection failures, transport
    timeouts), "timeout" (408), "conflict" (409), "rate_limited" (429), "overloaded"
    (529, Anthropic's overloaded_error), "server" (other 5xx), "auth" (401, 403),
    "request" (other 4xx: the request itself), "unknown" (no status, no network mark).

    >>> from toolnexus.core.errors import ProviderError
    >>> failure_kind(ProviderError("x", status=529)), failure_kind(ProviderError("x", status=400))
    ('overloaded', 'request')
    >>> failure_kind(ConnectionResetError()), failure_kind(TimeoutError())
    ('network', 'abort')
    """
    if is_abort(error):
        return "abort"
    status = status if status is not None else _status(error)
    if isinstance(status, int) and not isinstance(status, bool):
        if status >= 500:
            return "overloaded" if status == 529 else "server"
        named = {408: "timeout", 409: "conflict", 429: "rate_limited", 401: "auth", 403: "auth"}
        if status in named:
            return named[status]
        if status >= 400:
            return "request"
    return "network" if is_network_error(error) else "unknown"


def provider_fault(error: BaseException | None) -> bool:
    """Return whether a failure is the provider's (or the network's), not the request's:
    the kinds in PROVIDER_FAULTS, where another try or another provider may succeed.

    >>> from toolnexus.core.errors import ProviderError
    >>> provider_fault(ProviderError("x", status=503))
    True
    >>> provider_fault(ProviderError("x", status=401))
    False
    """
    return failure_kind(error) in PROVIDER_FAULTS


def error_info(error: BaseException, attempt: int) -> FrozenMap:
    """Return the info map of a failed try: {error, status?, attempt, retryable, kind}."""
    status = _status(error)
    info = {"error": error, "attempt": attempt, "retryable": retryable(status, error),
            "kind": failure_kind(error, status)}  # fmt: skip
    if status is not None:
        info["status"] = status
    return FrozenMap(info)


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
    now: float | None = None,
) -> float:
    """Return the seconds to wait before the next try: Retry-After if usable, else backoff.

    A Retry-After of 0 means retry now; an HTTP-date counts when `now` is given. Never
    negative.

    >>> delay_for(1, 500, {"Retry-After": "0"}), delay_for(1, 500, {"Retry-After": "x"}, lambda: 0)
    (0.0, 0.25)
    """
    seconds = retry_after(headers, now)
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
    rng: Rng | None = None,
    max_wait_s: float | None = MAX_WAIT_S,
    remaining_s: float | None = None,
    now: float | None = None,
) -> float | None:
    """Return the seconds to wait before retrying after failed try `attempt`, or None to fail.

    Status and headers are read from the error (`.status` / `.headers`, or an httpx
    `.response`), also from the error it wraps. `now` (epoch seconds) lets an HTTP-date
    Retry-After count. A wait longer than `max_wait_s` (None: no limit) or than
    `remaining_s` (the run's time left; None: no deadline) is not slept: `plan` raises
    the ProviderError at once, with `retry_after` set to the wait asked for.

    >>> plan(ConnectionResetError(), 1, retries=2, base_ms=500, rng=lambda: 0.0)
    0.25
    """
    if decide(error_info(error, attempt), retries, on_error) == "fail":
        return None
    wait = delay_for(attempt, base_ms, _headers(error), rng, now=now)
    limits = [x for x in (max_wait_s, remaining_s) if x is not None]
    if limits and wait > _clamp(min(limits), 0.0, math.inf):
        raise too_long(error, wait)  # inside the caller's except: chained to `error`
    return wait


def too_long(error: BaseException, wait: float) -> BaseException:
    """Return the error to raise when a retry's wait is too long: a ProviderError with
    `retry_after` set (a copy; the error given is not modified)."""
    from .errors import ProviderError

    out = ProviderError(
        str(error) if isinstance(error, ProviderError) else f"{type(error).__name__}: {error}",
        status=getattr(error, "status", None) if isinstance(error, ProviderError) else None,
        body=getattr(error, "body", "") if isinstance(error, ProviderError) else "",
        url=getattr(error, "url", "") if isinstance(error, ProviderError) else "",
        headers=getattr(error, "headers", None) if isinstance(error, ProviderError) else None,
        retry_after=wait,
        error_type=getattr(error, "error_type", None),
        code=getattr(error, "code", None),
    )
    return out
