"""Pure message-log values: entries, query validation, filtering, and date parsing.

Every backend of the message log shares these rules, and the in-memory backend *is*
these functions over a list, so the contract tests use them as the model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from ..core.frozen import FrozenMap

__all__ = [
    "DIRECTIONS",
    "entry",
    "make_entry",
    "check_entry",
    "entry_fields",
    "utc",
    "fold",
    "check_query",
    "matches",
    "predicate",
    "select",
    "select_rows",
    "parse_when",
    "instant",
    "cutoff",
]

DIRECTIONS = ("user", "ai")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc(dt: Any, what: str = "timestamp") -> datetime:
    """Return the timezone-aware datetime `dt` in UTC; a naive one is a ValueError.

    >>> from datetime import timezone
    >>> utc(datetime(2026, 5, 8, 14, 0, tzinfo=timezone(timedelta(hours=2)))).isoformat()
    '2026-05-08T12:00:00+00:00'
    >>> utc(datetime(2026, 5, 8))
    Traceback (most recent call last):
    ...
    ValueError: timestamp must be timezone-aware (got naive 2026-05-08 00:00:00); use e.g. datetime.now(timezone.utc)
    """  # noqa: E501
    if not isinstance(dt, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(dt).__name__}")
    if dt.tzinfo is None or dt.tzinfo.utcoffset(dt) is None:
        # Never guess local time: the same code would record different instants per host.
        raise ValueError(
            f"{what} must be timezone-aware (got naive {dt}); use e.g. datetime.now(timezone.utc)"
        )
    return dt.astimezone(UTC)


def _check_text(value: Any, what: str, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not allow_empty and not value:
        raise ValueError(f"{what} must be a non-empty string")
    # PostgreSQL text cannot hold NUL, and no backend can store lone surrogates:
    # reject them everywhere so every backend accepts the same entries.
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid Unicode (no lone surrogates)") from None
    return value


def entry(
    conversation_id: str | None,
    text: str,
    direction: str,
    timestamp: datetime | None = None,
    id: str | None = None,
) -> FrozenMap:
    """Return a validated, immutable log entry {id, conversation_id, text, timestamp, direction}.

    `timestamp` defaults to now (UTC) and is normalized to UTC; `id` defaults to a fresh UUID.

    >>> e = entry("c1", "hi", "user", datetime(2026, 5, 8, tzinfo=UTC), id="m1")
    >>> e["direction"], e["timestamp"].isoformat()
    ('user', '2026-05-08T00:00:00+00:00')
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'user' or 'ai', got {direction!r}")
    if conversation_id is not None:
        _check_text(conversation_id, "conversation_id", allow_empty=False)
    return FrozenMap(
        {
            "id": uuid.uuid4().hex if id is None else _check_text(id, "id", allow_empty=False),
            "conversation_id": conversation_id,
            "text": _check_text(text, "text"),
            "timestamp": datetime.now(UTC) if timestamp is None else utc(timestamp),
            "direction": direction,
        }
    )


make_entry = entry


_KEYS = frozenset({"id", "conversation_id", "text", "timestamp", "direction"})


def check_entry(e: Any) -> FrozenMap:
    """Return `e` as a validated entry map (a log's `record` accepts any such mapping)."""
    id, conversation_id, text, timestamp, direction = entry_fields(e)
    if type(e) is FrozenMap and len(e) == len(_KEYS) and e["timestamp"] is timestamp:
        return e  # already exactly an entry (its time in UTC): the same value, not a copy
    return FrozenMap({"id": id, "conversation_id": conversation_id, "text": text,
                 "timestamp": timestamp, "direction": direction})  # fmt: skip


def entry_fields(e: Any) -> tuple[str, str | None, str, datetime, str]:
    """Return `(id, conversation_id, text, timestamp in UTC, direction)` of a valid entry
    mapping, checked as `entry` checks them (an id of None gets a fresh one, a timestamp of
    None now); else
    TypeError or ValueError.

    One lookup per field: a log writes rows from these without building a copy.
    """
    if not isinstance(e, Mapping):
        raise TypeError(f"an entry is a mapping, got {type(e).__name__}")
    try:
        id, conversation_id, text = e["id"], e["conversation_id"], e["text"]
        timestamp, direction = e["timestamp"], e["direction"]
    except KeyError:
        raise ValueError(f"entry is missing {sorted(_KEYS - set(e))}") from None
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'user' or 'ai', got {direction!r}")
    if conversation_id is not None:
        _check_text(conversation_id, "conversation_id", allow_empty=False)
    id = uuid.uuid4().hex if id is None else _check_text(id, "id", allow_empty=False)
    _check_text(text, "text")
    if timestamp is None:  # as `entry`: now
        timestamp = datetime.now(UTC)
    elif not (isinstance(timestamp, datetime) and timestamp.tzinfo is UTC):
        timestamp = utc(timestamp)
    return id, conversation_id, text, timestamp, direction


def fold(text: str) -> str:
    """Return the form of `text` that substring search compares (Unicode casefold).

    >>> fold("ÉTÉ") == fold("été")
    True
    """
    return text.casefold()


def micros(dt: datetime) -> int:
    """Return an aware datetime as integer microseconds since the Unix epoch (exact)."""
    return (dt - EPOCH) // timedelta(microseconds=1)


def from_micros(us: int) -> datetime:
    """Return the UTC datetime of `us` microseconds since the Unix epoch."""
    return EPOCH + timedelta(microseconds=us)


def check_query(
    contains: str | None = None,
    since: datetime | date | str | None = None,
    until: datetime | date | str | None = None,
    limit: int | None = None,
    conversation_id: str | None = None,
) -> FrozenMap:
    """Return the validated query {contains (folded), since, until (UTC), limit, conversation_id}.

    A blank `contains` ("", "   ") means no text filter, like None.

    >>> q = check_query(contains="ÉTÉ", limit=3)
    >>> q["contains"], q["limit"], check_query(contains="   ")["contains"]
    ('été', 3, None)
    """
    if contains is not None and not isinstance(contains, str):
        raise TypeError(f"contains must be a string, got {type(contains).__name__}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"limit must be an integer >= 0 or None, got {limit!r}")
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise TypeError(f"conversation_id must be a string, got {type(conversation_id).__name__}")
    return FrozenMap(
        {
            "contains": fold(contains) if contains and not contains.isspace() else None,
            "since": None if since is None else instant(since, "since"),
            "until": None if until is None else instant(until, "until", end=True),
            "limit": limit,
            "conversation_id": conversation_id,
        }
    )


def matches(folded_text: str, e: Mapping, q: Mapping) -> bool:
    """Return True when entry `e` (whose folded text is given) passes every filter of `q`."""
    return predicate(q)(folded_text, e)


def predicate(q: Mapping) -> Callable[[str, Mapping], bool]:
    """Return fn(folded_text, entry) -> bool testing the filters of `q` (the scan's inner loop)."""
    cid, since, until, needle = q["conversation_id"], q["since"], q["until"], q["contains"]

    def test(folded: str, e: Mapping) -> bool:
        if needle is not None and needle not in folded:  # cheapest and most selective first
            return False
        ts = e["timestamp"]
        return (
            (cid is None or e["conversation_id"] == cid)
            and (since is None or ts >= since)
            and (until is None or ts <= until)
        )

    return test


def select_rows(rows: Iterable[tuple[str, Mapping]], q: Mapping) -> tuple:
    """Return the entries of `(folded_text, entry)` rows (in recording order) matching `q`.

    Oldest first; ties keep recording order; `limit` keeps the newest matches.
    """
    test = predicate(q)
    hits = [e for folded, e in rows if test(folded, e)]
    hits.sort(key=lambda e: e["timestamp"])  # stable: equal instants keep recording order
    limit = q["limit"]
    if limit is not None:
        hits = hits[max(len(hits) - limit, 0) :]
    return tuple(hits)


def select(entries: Iterable[Mapping], q: Mapping) -> tuple:
    """Return the entries (in recording order) matching query `q`, oldest first.

    >>> es = [entry("c", t, "user", datetime(2026, 5, d, tzinfo=UTC)) for t, d in
    ...       [("Été", 3), ("hiver", 1), ("été!", 2)]]
    >>> [e["text"] for e in select(es, check_query(contains="ÉTÉ", limit=1))]
    ['Été']
    """
    return select_rows(((fold(e["text"]), e) for e in entries), q)


def _parse_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def parse_when(
    text: Any, *, end: bool = False, now: Callable[[], datetime] | None = None
) -> datetime:
    """Return the UTC instant of an ISO 8601 date or date-time string (ValueError if malformed).

    A date alone means the whole day in UTC: its first instant, or its last when `end`.
    A time without an offset is read as UTC; `Z` is accepted. "today" and "yesterday"
    (relative to `now`, default the current UTC time) name whole days too.

    >>> parse_when("2026-05-08").isoformat()
    '2026-05-08T00:00:00+00:00'
    >>> parse_when("2026-05-08", end=True).isoformat()
    '2026-05-08T23:59:59.999999+00:00'
    >>> parse_when("2026-05-08T14:00+02:00").isoformat()
    '2026-05-08T12:00:00+00:00'
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"expected an ISO 8601 date like 2026-05-08, got {text!r}")
    s = text.strip()
    day = _parse_day(s)
    if day is None and s.lower() in ("today", "yesterday"):
        day = (now() if now else datetime.now(UTC)).astimezone(UTC).date()
        day -= timedelta(days=1 if s.lower() == "yesterday" else 0)
    if day is not None:
        return datetime.combine(day, time.max if end else time.min, tzinfo=UTC)
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(
            f"not an ISO 8601 date or date-time: {text!r} "
            "(expected e.g. 2026-05-08, 2026-05-08T14:30Z or 2026-05-08T14:30+02:00)"
        ) from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).astimezone(UTC)


def instant(value: Any, what: str = "timestamp", *, end: bool = False) -> datetime:
    """Return the UTC instant of an aware datetime, a date, or an ISO 8601 string.

    A date (or a date-only string) means its first instant in UTC, or its last when
    `end`; strings are read by `parse_when`; a naive datetime is still a ValueError.

    >>> instant("2020-01-01", "since").isoformat()
    '2020-01-01T00:00:00+00:00'
    >>> instant(date(2020, 1, 1), "until", end=True).isoformat()
    '2020-01-01T23:59:59.999999+00:00'
    >>> instant(3, "since")
    Traceback (most recent call last):
    ...
    TypeError: since must be a datetime, a date or an ISO 8601 string like '2026-05-08', got int
    """
    if isinstance(value, datetime):
        return utc(value, what)
    if isinstance(value, date):
        return datetime.combine(value, time.max if end else time.min, tzinfo=UTC)
    if isinstance(value, str):
        try:
            return parse_when(value, end=end)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
    raise TypeError(
        f"{what} must be a datetime, a date or an ISO 8601 string like '2026-05-08', "
        f"got {type(value).__name__}"
    )


def _is_day(value: Any) -> bool:
    return (isinstance(value, date) and not isinstance(value, datetime)) or (
        isinstance(value, str) and _parse_day(value.strip()) is not None
    )


def cutoff(before: Any) -> datetime:
    """Return the last instant a `clear(before=...)` removes (inclusive).

    A datetime or date-time string is itself the cutoff; a day (a date or "2026-05-08")
    keeps that whole day, as `history clear --before` does: up to the end of the day before.

    >>> cutoff("2026-05-08").isoformat()
    '2026-05-07T23:59:59.999999+00:00'
    >>> cutoff("2026-05-08T12:00Z").isoformat()
    '2026-05-08T12:00:00+00:00'
    """
    if _is_day(before):
        return instant(before, "before") - timedelta(microseconds=1)
    return instant(before, "before")
