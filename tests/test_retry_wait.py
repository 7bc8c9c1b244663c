"""Bounded waits (core.retry): HTTP-date Retry-After with `now` passed in; a wait longer
than max_wait_s or than the run's time left is raised at once with retry_after."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core import retry as r
from toolnexus.core.errors import ProviderError

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()


def busy(retry_after: str, status: int = 429) -> ProviderError:
    return ProviderError("busy", status=status, headers={"retry-after": retry_after})


@given(st.integers(-(10**6), 10**7))
def test_an_http_date_is_the_seconds_from_now(offset):
    date = format_datetime(datetime.fromtimestamp(NOW + offset, UTC), usegmt=True)
    assert r.parse_retry_after(date, now=NOW) == max(offset, 0)
    assert r.parse_retry_after(date) is None  # no clock in core: without `now`, ignored


@pytest.mark.parametrize(
    "value", ["Wed, 99 Oct 2015 07:28:00 GMT", "soon", "Mon, 1 Jan", "x" * 500]
)
def test_a_bad_date_is_ignored(value):
    assert r.parse_retry_after(value, now=NOW) is None


@given(
    st.integers(0, 10_000),
    st.none() | st.floats(0, 5_000),
    st.none() | st.floats(0, 5_000),
)
def test_a_wait_past_either_limit_is_raised_at_once(seconds, max_wait, remaining):
    error = busy(str(seconds))
    limits = [x for x in (max_wait, remaining) if x is not None]
    kwargs = dict(retries=2, base_ms=500, max_wait_s=max_wait, remaining_s=remaining)
    if limits and seconds > min(limits):
        with pytest.raises(ProviderError) as e:
            r.plan(error, 1, **kwargs)
        assert e.value.retry_after == seconds and e.value.status == 429
        assert str(e.value) == "busy" and error.retry_after is None  # given error untouched
    else:
        assert r.plan(error, 1, **kwargs) == seconds


def test_the_default_limit_is_sixty_seconds_and_old_keywords_still_work():
    assert r.plan(busy("60"), 1, retries=2, base_ms=500) == 60
    with pytest.raises(ProviderError) as e:
        r.plan(busy("3600"), 1, retries=2, base_ms=500, on_error=None, rng=lambda: 0.5)
    assert e.value.retry_after == 3600


def test_backoff_longer_than_the_time_left_is_raised_too():
    error = ProviderError("down", status=503)
    assert r.plan(error, 1, retries=2, base_ms=500, rng=lambda: 0.0) == 0.25
    with pytest.raises(ProviderError) as e:
        r.plan(error, 1, retries=2, base_ms=500, rng=lambda: 0.0, remaining_s=0.1)
    assert e.value.retry_after == 0.25


def test_an_http_date_counts_in_plan_when_now_is_given():
    date = format_datetime(datetime.fromtimestamp(NOW + 30, UTC), usegmt=True)
    assert r.plan(busy(date), 1, retries=2, base_ms=500, now=NOW) == 30
    with pytest.raises(ProviderError):
        r.plan(busy(date), 1, retries=2, base_ms=500, now=NOW, remaining_s=10)


def test_no_retry_left_is_still_none():
    assert r.plan(busy("3600"), 3, retries=2, base_ms=500) is None
