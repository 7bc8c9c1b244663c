"""history/lazy.py: a log built on its first use, once, again after a failed build, and
closed (when what it built can close) so that a later use builds another."""

from __future__ import annotations

import pytest

from toolnexus.history.lazy import lazy_log


def maker(fail_first: bool = False):
    """make() for lazy_log, counting its builds; each built log records its calls."""
    builds: list[dict] = []

    def make() -> dict:
        if fail_first and not builds:
            builds.append({})
            raise ConnectionError("the database is down")
        calls: list = []

        def op(name):
            return lambda *a, **k: calls.append((name, a, k)) or name

        log = {n: op(n) for n in ("record", "record_many", "query", "clear")}
        log.update(calls=calls, close=lambda: calls.append("closed"))
        builds.append(log)
        return log

    return make, builds


def test_nothing_is_built_until_first_use_and_then_once():
    make, builds = maker()
    log = lazy_log(make, "sqlite_log('x.db')")
    assert builds == [] and log["desc"] == "sqlite_log('x.db')"
    assert log["record"]({"text": "hi"}) == "record"
    assert log["record_many"]([1], fast=True) == "record_many"
    assert log["query"](limit=1) == "query" and log["clear"](before=2) == "clear"
    (built,) = builds
    assert built["calls"] == [
        ("record", ({"text": "hi"},), {}),
        ("record_many", ([1],), {"fast": True}),
        ("query", (), {"limit": 1}),
        ("clear", (), {"before": 2}),
    ]
    assert log["ready"]() is built


def test_a_failed_build_is_tried_again_on_the_next_use():
    make, builds = maker(fail_first=True)
    log = lazy_log(make, "postgres_log")
    with pytest.raises(ConnectionError):
        log["query"]()
    assert log["query"]() == "query" and len(builds) == 2


def test_close_closes_what_was_built_and_a_later_use_builds_another():
    make, builds = maker()
    log = lazy_log(make, "d")
    log["close"]()  # nothing built: nothing to close
    assert builds == []
    first = log["ready"]()
    log["close"]()
    assert first["calls"] == ["closed"]
    assert log["ready"]() is not first and len(builds) == 2
    without = lazy_log(lambda: {"query": print}, "d")
    without["ready"]()
    without["close"]()  # what it built has no close: closed quietly
