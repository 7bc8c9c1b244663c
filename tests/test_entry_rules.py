"""The rules of history/entry.py no other test asserts: each refusal names its field, the
epoch and exact microseconds, entry_fields' checks and UTC, a query's bounds, `matches`
answering False, and times read as UTC whatever the machine's own zone (TZ set apart)."""

from __future__ import annotations

import time as systime
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from toolnexus.history import entry as E

PLUS2 = timezone(timedelta(hours=2))
WHEN = datetime(2026, 5, 8, 12, 0, tzinfo=UTC)


@pytest.fixture
def far_zone(monkeypatch):
    """The machine's local zone far from UTC: a time read as local would show."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    systime.tzset()
    yield
    monkeypatch.undo()
    systime.tzset()


def test_microseconds_count_exactly_from_the_unix_epoch():
    assert E.EPOCH == datetime(1970, 1, 1, tzinfo=UTC)
    us = E.micros(datetime(1970, 1, 1, 0, 0, 1, 7, tzinfo=UTC))
    assert us == 1_000_007 and type(us) is int
    big = datetime(2262, 4, 11, 23, 47, 16, 854_775, tzinfo=UTC)  # float would round it
    assert E.micros(big) == 9_223_372_036_854_775 and E.from_micros(E.micros(big)) == big


@pytest.mark.parametrize(
    "call, error, says",
    [
        (lambda: E.utc("2026"), TypeError, "^timestamp must be a datetime, got str$"),
        (lambda: E.utc(5, "since"), TypeError, "^since must be a datetime, got int$"),
        (lambda: E.entry("c", 5, "user"), TypeError, "^text must be a string, got int$"),
        (lambda: E.entry(5, "t", "user"), TypeError, "^conversation_id must be a string, got int$"),
        (
            lambda: E.entry("", "t", "user"),
            ValueError,
            "^conversation_id must be a non-empty string$",
        ),
        (lambda: E.entry("c", "t", "user", id=""), ValueError, "^id must be a non-empty string$"),
        (lambda: E.entry("c", "t", "user", id=5), TypeError, "^id must be a string, got int$"),
    ],
)
def test_each_refusal_of_an_entry_names_its_field(call, error, says):
    with pytest.raises(error, match=says):
        call()


def test_an_entry_may_have_empty_text():
    assert E.entry("c", "", "ai", WHEN, id="m")["text"] == ""


def fields(**change):
    e = {"id": "m", "conversation_id": "c", "text": "t", "timestamp": WHEN, "direction": "user"}
    return {**e, **change}


@pytest.mark.parametrize(
    "e, error, says",
    [
        (5, TypeError, "^an entry is a mapping, got int$"),
        ({}, ValueError, r"^entry is missing \['conversation_id', 'direction', 'id', 'text', "
                         r"'timestamp'\]$"),
        ({"id": "m", "text": "t"}, ValueError,
         r"^entry is missing \['conversation_id', 'direction', 'timestamp'\]$"),
        (fields(direction="bot"), ValueError, "^direction must be 'user' or 'ai', got 'bot'$"),
        (fields(conversation_id=""), ValueError, "^conversation_id must be a non-empty string$"),
        (fields(conversation_id=5), TypeError, "^conversation_id must be a string, got int$"),
        (fields(id=""), ValueError, "^id must be a non-empty string$"),
        (fields(id=5), TypeError, "^id must be a string, got int$"),
        (fields(text=5), TypeError, "^text must be a string, got int$"),
        (fields(timestamp="now"), TypeError, "^timestamp must be a datetime, got str$"),
    ],
)  # fmt: skip
def test_entry_fields_refuses_as_entry_does(e, error, says):
    with pytest.raises(error, match=says):
        E.entry_fields(e)


def test_entry_fields_gives_the_time_in_utc_and_takes_empty_text():
    _, cid, text, ts, _ = E.entry_fields(
        fields(timestamp=datetime(2026, 5, 8, 14, tzinfo=PLUS2), text="")
    )
    assert (cid, text, ts) == ("c", "", WHEN) and ts.tzinfo is UTC
    assert E.entry_fields(fields(conversation_id=None))[1] is None


@pytest.mark.parametrize("limit", [-1, True, "3", 2.0])
def test_a_query_limit_is_an_integer_of_at_least_zero(limit):
    with pytest.raises(ValueError, match=r"^limit must be an integer >= 0 or None, got "):
        E.check_query(limit=limit)


def test_a_query_names_what_is_wrong_and_reads_its_bounds_as_whole_days():
    with pytest.raises(TypeError, match="^contains must be a string, got int$"):
        E.check_query(contains=5)
    with pytest.raises(TypeError, match="^conversation_id must be a string, got int$"):
        E.check_query(conversation_id=5)
    with pytest.raises(ValueError, match="^since: not an ISO 8601"):
        E.check_query(since="soon")
    with pytest.raises(ValueError, match="^until: not an ISO 8601"):
        E.check_query(until="later")
    q = E.check_query(since="2026-05-08", until="2026-05-08", limit=0, conversation_id="c")
    assert q["since"] == datetime(2026, 5, 8, tzinfo=UTC)
    assert q["until"] == datetime(2026, 5, 8, 23, 59, 59, 999_999, tzinfo=UTC)
    assert (q["limit"], q["conversation_id"]) == (0, "c")


def test_matches_answers_true_or_false():
    e = E.entry("c", "Été", "user", WHEN, id="m")
    assert E.matches(E.fold("Été"), e, E.check_query(contains="été")) is True
    assert E.matches(E.fold("Été"), e, E.check_query(contains="hiver")) is False
    assert E.matches(E.fold("Été"), e, E.check_query(conversation_id="d")) is False


def test_parse_when_refuses_what_is_no_text():
    for bad in (5, "", "  "):
        with pytest.raises(ValueError, match=r"^expected an ISO 8601 date like 2026-05-08, got "):
            E.parse_when(bad)


def test_today_is_the_utc_day_of_now_whatever_the_local_zone(far_zone):
    late = datetime(2026, 5, 8, 23, 30, tzinfo=UTC)  # already May 9 in Tokyo
    assert E.parse_when("today", now=lambda: late) == datetime(2026, 5, 8, tzinfo=UTC)
    assert E.parse_when("yesterday", now=lambda: late) == datetime(2026, 5, 7, tzinfo=UTC)


def test_a_time_without_offset_is_utc_whatever_the_local_zone(far_zone):
    got = E.parse_when("2026-05-08T14:00")
    assert got == datetime(2026, 5, 8, 14, tzinfo=UTC) and got.tzinfo is UTC
    got = E.parse_when("2026-05-08T14:00+02:00")
    assert got == WHEN and got.tzinfo is UTC


def test_instant_names_what_it_reads_and_ends_a_day_string_at_its_last_instant():
    with pytest.raises(ValueError, match="^timestamp must be timezone-aware"):
        E.instant(datetime(2026, 5, 8))
    with pytest.raises(ValueError, match="^since must be timezone-aware"):
        E.instant(datetime(2026, 5, 8), "since")
    assert E.instant("2026-05-08", "until", end=True) == datetime(
        2026, 5, 8, 23, 59, 59, 999_999, tzinfo=UTC
    )


def test_cutoff_keeps_a_given_day_and_names_before_when_it_cannot_read():
    last_of_the_7th = datetime(2026, 5, 7, 23, 59, 59, 999_999, tzinfo=UTC)
    assert E.cutoff(date(2026, 5, 8)) == last_of_the_7th
    assert E.cutoff(" 2026-05-08 ") == last_of_the_7th
    assert E.cutoff(WHEN) == WHEN
    with pytest.raises(ValueError, match="^before: not an ISO 8601"):
        E.cutoff("soon")
    with pytest.raises(TypeError, match="^before must be a datetime, a date or"):
        E.cutoff(5)
