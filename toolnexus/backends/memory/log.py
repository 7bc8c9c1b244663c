"""The in-memory message log: the pure filters of entry.py over a list (a linear scan)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime

from ...history.entry import check_entry, check_query, cutoff, fold, select_rows

__all__ = ["in_memory_log"]


def in_memory_log() -> dict:
    """Return a thread-safe message log kept in process memory.

    >>> log = in_memory_log()
    >>> from toolnexus.history.entry import make_entry
    >>> log["record"](make_entry("c1", "Été à Paris", "user"))
    >>> [e["text"] for e in log["query"](contains="ÉTÉ")]
    ['Été à Paris']
    >>> log["clear"]()
    1
    """
    # Rows are (folded text, entry) in recording order; folding once at record time
    # keeps every query a plain scan of comparisons.
    rows: list[tuple[str, Mapping]] = []
    ids: set[str] = set()
    lock = threading.Lock()

    def record_many(entries: Iterable[Mapping]) -> None:
        checked = [check_entry(e) for e in entries]  # all or nothing: validate first
        with lock:
            for e in checked:
                if e["id"] not in ids:  # recording an id twice is a no-op (retry-safe)
                    ids.add(e["id"])
                    rows.append((fold(e["text"]), e))

    def record(e: Mapping) -> None:
        record_many((e,))

    def query(
        *,
        contains: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        conversation_id: str | None = None,
    ) -> tuple:
        q = check_query(contains, since, until, limit, conversation_id)
        with lock:
            snapshot = list(rows)  # scan outside the lock so recorders never wait on a query
        return select_rows(snapshot, q)

    def clear(*, before: datetime | None = None, conversation_id: str | None = None) -> int:
        cut = None if before is None else cutoff(before)

        def removed_(e: Mapping) -> bool:
            old = cut is None or e["timestamp"] <= cut
            return old and (conversation_id is None or e["conversation_id"] == conversation_id)

        with lock:
            keep = [r for r in rows if not removed_(r[1])]
            removed = len(rows) - len(keep)
            rows[:] = keep
            ids.intersection_update(e["id"] for _, e in keep)
        return removed

    return {
        "record": record,
        "record_many": record_many,
        "query": query,
        "clear": clear,
        "desc": "in_memory_log()",
    }
