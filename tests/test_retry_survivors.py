"""The retry rules of `core/retry.py`, each asserted where mutation testing found none
(tools/mutate.py: a survivor named behaviour no test checked): Retry-After's trimming
and bounds, headers that are not mappings, the statuses and errors that count, the
fields a too-long wait carries."""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.message
import time

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.errors import ProviderError, RunCancelledError
from toolnexus.core.retry import (
    MAX_BACKOFF_MS,
    MAX_WAIT_S,
    backoff_ms,
    decide,
    delay_for,
    error_info,
    is_abort,
    is_network_error,
    parse_retry_after,
    plan,
    retry_after,
    retryable,
    too_long,
)

DATE = "Wed, 21 Oct 2015 07:28:00 GMT"  # 10 s after NOW
NOW = 1445412470.0


class Pairs:
    """Headers that are not a Mapping but list themselves (as email.message.Message, or a
    framework's multi-dict): `.items()` only."""

    def __init__(self, *pairs):
        self.pairs = pairs

    def items(self):
        return list(self.pairs)


def _status_error(status: int, headers: dict | None = None) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://llm.test/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return httpx.HTTPStatusError("failed", request=request, response=response)


# ---- Retry-After ----------------------------------------------------------------------


def test_retry_after_trims_spaces_and_tabs_only():
    assert parse_retry_after(" \t5\t ") == 5
    for other in ("\n5", "5\r", "\x0b5", "\x0c5", "\u00a05"):  # not HTTP's optional whitespace
        assert parse_retry_after(other) is None, repr(other)
    for junk in ("X5", "5X", "X5X", "+5", "5 5"):
        assert parse_retry_after(junk) is None, junk


def test_retry_after_bytes_are_read_as_latin_1():
    assert parse_retry_after(b"7") == 7 and parse_retry_after(b" 7 ") == 7
    assert parse_retry_after(b"\xff7") is None  # decoded (never raises), then refused


def test_retry_after_digits_are_bounded_by_value_not_by_how_they_are_written():
    assert parse_retry_after("000") == 0
    assert parse_retry_after("1000000000") == 10**9  # ten digits
    assert parse_retry_after("2147483647") == 2147483647
    assert parse_retry_after("0" * 40 + "2147483647") == 2147483647  # leading zeros
    assert parse_retry_after("2147483648") is None
    assert parse_retry_after("99999999999") is None


def test_a_retry_after_of_thousands_of_digits_is_none_at_once():
    start = time.perf_counter()
    assert parse_retry_after("9" * 100_000) is None  # int() would refuse it past 4300
    assert time.perf_counter() - start < 0.5


@given(st.integers(0, 2147483647), st.integers(0, 30))
def test_any_delay_seconds_in_range_reads_back(n, zeros):
    assert parse_retry_after("0" * zeros + str(n)) == n


def test_an_http_date_is_read_up_to_64_characters():
    padded = DATE.replace("Wed, ", "Wed," + " " * (64 - len(DATE) + 1))
    assert len(padded) == 64 and parse_retry_after(padded, now=NOW) == 10.0
    longer = DATE.replace("Wed, ", "Wed," + " " * (65 - len(DATE) + 1))
    assert len(longer) == 65 and parse_retry_after(longer, now=NOW) is None


def test_a_date_without_a_zone_is_gmt_whatever_the_local_zone(monkeypatch):
    no_zone = "Wed, 21 Oct 2015 07:28:00 -0000"  # parsed as a naive datetime
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    try:
        assert parse_retry_after(no_zone, now=NOW) == 10.0
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_date_past_is_zero_and_junk_is_none():
    assert parse_retry_after(DATE, now=NOW + 100) == 0.0
    assert parse_retry_after("Wed, 99 Oct 2015 07:28:00 GMT", now=NOW) is None
    assert parse_retry_after(DATE, now=float("nan")) is None


# ---- headers --------------------------------------------------------------------------


def test_retry_after_reads_headers_that_only_list_themselves():
    assert retry_after(Pairs(("Content-Type", "x"), ("Retry-After", "3"))) == 3
    assert retry_after(Pairs((b"Retry-After", b"4"))) == 4  # raw header bytes
    message = email.message.Message()
    message["Retry-After"] = "5"
    assert retry_after(message) == 5
    assert retry_after(httpx.Headers({"retry-after": "6"})) == 6


def test_retry_after_without_usable_headers_is_none():
    class Broken:
        def items(self):
            raise RuntimeError("no")

    for headers in (None, [("Retry-After", "3")], "Retry-After: 3", Broken(), Pairs()):
        assert retry_after(headers) is None, headers
    assert retry_after(Pairs((3, "4"), ("retry-after", "2"))) == 2  # odd names skipped


# ---- backoff --------------------------------------------------------------------------


def test_backoff_is_capped_at_thirty_seconds_by_default():
    assert MAX_BACKOFF_MS == 30_000.0
    assert backoff_ms(30, 500, rng=lambda: 0.999999) == pytest.approx(30_000.0, abs=0.1)
    assert backoff_ms(30, 500, rng=lambda: 0.0) == 15_000.0


def test_backoff_of_junk_options_is_a_number_never_an_error():
    assert backoff_ms(1, None, rng=lambda: 0.5) == 0.0
    assert backoff_ms(1, "junk", rng=lambda: 0.5) == 0.0
    assert backoff_ms(1, 500, rng=lambda: None) == 250.0  # jitter of junk: the low end
    assert backoff_ms(1, float("nan"), rng=lambda: 0.5) == 0.0


# ---- what is retried ------------------------------------------------------------------


def test_the_retryable_statuses_are_exactly_the_sdks():
    for status in range(100, 600):  # 408, 409, 429 and every 5xx (529 too): docs/retries.md
        assert retryable(status) is (status in {408, 409, 429} or status >= 500), status


def test_httpx_and_httpcore_network_errors_count_and_timeouts_do_not():
    import httpcore

    request = httpx.Request("POST", "http://llm.test/")
    for e in (httpx.ReadError("x", request=request), httpx.RemoteProtocolError("x"),
              httpx.ConnectError("x"), httpcore.ReadError("x"), httpcore.RemoteProtocolError("x"),
              ConnectionResetError()):  # fmt: skip
        assert is_network_error(e) is True and retryable(error=e) is True, e
    for e in (httpx.ReadTimeout("x"), httpx.LocalProtocolError("x"), ValueError("x"), None):
        assert is_network_error(e) is False, e


def test_aborts_are_never_retried():
    for e in (TimeoutError(), RunCancelledError("stop"), asyncio.CancelledError(),
              concurrent.futures.CancelledError(), KeyboardInterrupt()):  # fmt: skip
        assert is_abort(e) is True, e
        assert retryable(status=503, error=e) is False, e
    assert is_abort(None) is False and is_abort(ValueError()) is False


def test_the_status_of_an_httpx_status_error_is_its_responses():
    info = error_info(_status_error(503), 1)
    assert info["status"] == 503 and info["retryable"] is True
    assert error_info(_status_error(400), 2)["retryable"] is False


def test_only_an_integer_status_counts():
    for odd in (True, "503", 503.0):
        info = error_info(ProviderError("x", status=odd), 1)
        assert "status" not in info and info["retryable"] is False, odd


def test_error_info_carries_the_error_and_its_attempt():
    e = ProviderError("x", status=503)
    assert error_info(e, 2) == {"error": e, "attempt": 2, "retryable": True, "status": 503,
                                "kind": "server"}  # fmt: skip
    assert "status" not in error_info(ConnectionResetError(), 1)


def test_decide_lets_on_error_fail_and_counts_a_missing_attempt_as_the_first():
    assert decide({"attempt": 1, "retryable": True}, 2, on_error=lambda i: "fail") == "fail"
    assert decide({"retryable": True}, 1) == "retry"
    assert decide({"retryable": True}, 0) == "fail"
    with pytest.raises(ValueError, match="on_error must return 'retry', 'fail' or None"):
        decide({"attempt": 1}, 2, on_error=lambda i: "again")


# ---- how long -------------------------------------------------------------------------


def test_a_backoff_without_rng_is_refused_clearly():
    with pytest.raises(ValueError, match="^a backoff needs rng, a function returning a float"):
        delay_for(1, 500)


def test_plan_waits_what_the_errors_headers_ask():
    e = ProviderError("busy", status=429, headers={"retry-after": "3"})
    assert plan(e, 1, retries=2, base_ms=500, rng=lambda: 0.0) == 3.0
    assert plan(_status_error(429, {"Retry-After": "2"}), 1, retries=2, base_ms=500) == 2.0
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = e
    assert plan(wrapped, 1, retries=2, base_ms=500) == 3.0


def test_plan_asks_on_error():
    e = ProviderError("busy", status=503)
    assert plan(e, 1, retries=2, base_ms=500, rng=lambda: 0.0) == 0.25
    assert plan(e, 1, retries=2, base_ms=500, rng=lambda: 0.0, on_error=lambda i: "fail") is None


def test_plan_sleeps_at_most_a_minute_by_default():
    assert MAX_WAIT_S == 60.0
    e = ProviderError("busy", status=429, headers={"retry-after": "60"})
    assert plan(e, 1, retries=2, base_ms=500) == 60.0
    e61 = ProviderError("busy", status=429, headers={"retry-after": "61"})
    with pytest.raises(ProviderError) as info:
        plan(e61, 1, retries=2, base_ms=500)
    assert info.value.retry_after == 61.0


def test_a_too_long_wait_keeps_what_the_provider_said():
    e = ProviderError("busy", status=429, body="slow down", url="http://llm.test/v1",
                      headers={"retry-after": "600"})  # fmt: skip
    out = too_long(e, 600.0)
    assert (str(out), out.status, out.body, out.url, out.headers, out.retry_after) == (
        "busy", 429, "slow down", "http://llm.test/v1", {"retry-after": "600"}, 600.0)  # fmt: skip
    plain = too_long(ConnectionResetError("reset"), 9.0)
    assert (str(plain), plain.status, plain.body, plain.url, plain.headers) == (
        "ConnectionResetError: reset", None, "", "", {})  # fmt: skip
    assert e.retry_after is None  # the error given is not modified
