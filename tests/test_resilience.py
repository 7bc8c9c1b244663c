"""Retry decisions (pure, hypothesis) and the retry drivers over the loopback fake provider."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core import retry as r
from toolnexus.core.errors import ProviderError, RunCancelledError, RunTimeoutError

# ---- Retry-After -------------------------------------------------------------------


@given(st.integers(0, r.MAX_RETRY_AFTER), st.integers(0, 5))
def test_delay_seconds_round_trip(n, zeros):
    assert r.parse_retry_after("0" * zeros + str(n)) == n


@given(st.integers(r.MAX_RETRY_AFTER + 1, 10**40))
def test_too_large_is_none(n):
    assert r.parse_retry_after(str(n)) is None


def test_very_long_digit_strings_do_not_raise():
    assert r.parse_retry_after("9" * 100_000) is None
    assert r.parse_retry_after("0" * 100_000 + "7") == 7


@given(st.text())
def test_anything_not_ascii_digits_is_none(text):
    result = r.parse_retry_after(text)
    stripped = text.strip(" \t")
    if stripped and all("0" <= c <= "9" for c in stripped):
        assert result == int(stripped) or result is None
    else:
        assert result is None


@given(st.characters(categories=["Nd"]).filter(lambda c: not "0" <= c <= "9"))
def test_other_scripts_digits_are_none(digit):
    assert r.parse_retry_after(digit * 2) is None


@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.integers())))
def test_non_strings_never_raise(value):
    result = r.parse_retry_after(value)
    assert result is None or (isinstance(result, int) and result >= 0)


@pytest.mark.parametrize(
    "value", ["", " ", "-1", "+1", "1.0", "1e3", "Fri, 31 Dec 1999 23:59:59 GMT", "1 2", "0x10"]
)
def test_rejected_values(value):
    assert r.parse_retry_after(value) is None


@given(st.lists(st.booleans(), min_size=11, max_size=11), st.integers(0, 10**6))
def test_header_name_is_case_insensitive(upper, n):
    name = "".join(c.upper() if u else c for c, u in zip("retry-after", upper, strict=True))
    assert r.retry_after({"x-other": "5", name: str(n)}) == n
    assert r.retry_after(httpx.Headers({name: str(n)})) == n


# ---- backoff and delay -------------------------------------------------------------


@given(
    st.integers(-5, 200),
    st.floats(0, 10**6),
    st.floats(allow_nan=True),
    st.floats(0, 10**6),
)
def test_backoff_is_bounded_and_never_negative(attempt, base, u, cap):
    ms = r.backoff_ms(attempt, base, rng=lambda: u, max_ms=cap)
    ceiling = min(base * 2.0 ** min(max(attempt, 1) - 1, 60), cap)
    assert not math.isnan(ms) and ceiling / 2 <= ms <= ceiling


@given(st.integers(1, 20), st.floats(0, 1, exclude_max=True), st.floats(0, 1, exclude_max=True))
def test_backoff_grows_with_attempts_and_jitter(attempt, u, v):
    lo, hi = sorted((u, v))
    assert r.backoff_ms(attempt, 100, lambda: lo) <= r.backoff_ms(attempt, 100, lambda: hi)
    assert r.backoff_ms(attempt, 100, lambda: u) <= r.backoff_ms(attempt + 1, 100, lambda: u)


@given(st.integers(1, 30), st.one_of(st.none(), st.dictionaries(st.text(), st.text())))
def test_delay_is_never_negative(attempt, headers):
    assert r.delay_for(attempt, 500, headers, lambda: 0.5) >= 0


def test_retry_after_wins_over_backoff_and_zero_means_now():
    assert r.delay_for(5, 500, {"retry-after": "0"}) == 0.0
    assert r.delay_for(1, 500, {"Retry-After": "7"}) == 7.0
    assert r.delay_for(2, 500, {"Retry-After": "-7"}, lambda: 0.5) == 0.75


# ---- retryable and decide ----------------------------------------------------------


@given(st.integers(100, 599))
def test_retryable_statuses(status):
    assert r.retryable(status) == (status in {408, 409, 429} or status >= 500)
    assert r.retryable(error=ProviderError("x", status=status)) == r.retryable(status)


def test_retryable_errors():
    from toolnexus.drivers.transport import Endpoint

    request = httpx.Request("POST", "http://h")
    ep = Endpoint("http://h/v1/chat/completions", {}, None, None)
    # The transport classifies its own errors; the pure policy reads the mark.
    assert r.retryable(error=ep.failed(httpx.ConnectError("refused", request=request)))
    assert r.retryable(error=ep.failed(httpx.RemoteProtocolError("closed", request=request)))
    assert r.retryable(error=ep.failed(httpx.ReadTimeout("slow", request=request)))  # as the SDKs
    assert r.retryable(error=ProviderError("x", network=True))
    assert not r.retryable(error=TimeoutError("deadline"))
    assert r.decide({"attempt": 1, "retryable": True, "error": RunCancelledError()}, 2) == "fail"
    assert r.is_abort(RunTimeoutError()) and r.is_abort(asyncio.CancelledError())
    assert not r.retryable(error=ValueError("bug"))
    try:  # a wrapped error: the context still tells
        try:
            raise ConnectionResetError("reset")
        except OSError:
            raise ProviderError("POST failed") from None
    except ProviderError as wrapped:
        assert r.retryable(error=wrapped)


infos = st.fixed_dictionaries(
    {"attempt": st.integers(-3, 50), "retryable": st.booleans()},
    optional={
        "status": st.integers(100, 599),
        "error": st.sampled_from([ValueError("x"), TimeoutError("deadline"), ConnectionError()]),
    },
)


@given(infos, st.integers(-1, 10), st.sampled_from([None, "retry", "fail", "keep"]))
def test_decide_never_exceeds_retries(info, retries, override):
    on_error = None if override == "keep" else (lambda i: override)
    decision = r.decide(info, retries, on_error)
    assert decision in ("retry", "fail")
    if decision == "retry":
        assert info["attempt"] <= retries and not isinstance(info.get("error"), TimeoutError)
        assert override == "retry" or info["retryable"]
    if override == "fail":
        assert decision == "fail"


@given(infos, st.integers(0, 10))
def test_decide_default_follows_retryable(info, retries):
    abort = isinstance(info.get("error"), TimeoutError)
    expected = info["retryable"] and info["attempt"] <= retries and not abort
    assert r.decide(info, retries) == ("retry" if expected else "fail")


def test_on_error_sees_the_info_and_bad_answers_are_refused():
    seen = []
    r.decide({"attempt": 3, "retryable": True, "status": 503}, 2, lambda i: seen.append(i))
    assert seen == [{"attempt": 3, "retryable": True, "status": 503}]
    with pytest.raises(ValueError, match="on_error must return"):
        r.decide({"attempt": 1, "retryable": True}, 2, lambda i: "maybe")
