"""The rules of history/wiring.py no other test asserts: record_many used when the log has
it (one call) and record otherwise, what a failure logs (under "toolnexus.history", with
the conversation id) and a broken metrics hook logged too, require_log's message, and the
lookup tool or toolkit scoped to the conversation asked for."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from toolnexus.core.tool import tool
from toolnexus.core.toolkit import toolkit
from toolnexus.history import in_memory_log, make_entry
from toolnexus.history.wiring import (
    NoMessageLogError,
    lookup_tool_for,
    lookup_toolkits,
    record_exchange,
    require_log,
)

NOW = datetime(2026, 5, 9, 15, 30, tzinfo=UTC)


def logged(calls, many=True):
    log = {"record": lambda e: calls.append(("record", e["text"])), "query": print, "clear": print}
    if many:
        log["record_many"] = lambda es: calls.append(("record_many", [e["text"] for e in es]))
    return log


def test_record_many_takes_the_whole_exchange_in_one_call():
    calls = []
    record_exchange(logged(calls), "c", "hi", ["a", "b"], now=NOW)
    assert calls == [("record_many", ["hi", "a", "b"])]


def test_a_log_without_record_many_records_each_entry():
    calls = []
    record_exchange(logged(calls, many=False), "c", "hi", "a", now=NOW)
    assert calls == [("record", "hi"), ("record", "a")]


def test_a_failure_is_logged_under_toolnexus_history_with_the_conversation_id(caplog):
    def boom(entries):
        raise RuntimeError("disk full")

    log = {**logged([]), "record_many": boom}
    with caplog.at_level(logging.WARNING, logger="toolnexus.history"):
        assert record_exchange(log, "c-7", "secret prompt", "a", now=NOW) == ()
    (rec,) = caplog.records
    assert rec.name == "toolnexus.history" and rec.levelno == logging.WARNING
    assert rec.getMessage() == (
        "message log: recording conversation 'c-7' failed: RuntimeError: disk full"
    )


def test_a_broken_metrics_hook_is_logged_and_the_run_goes_on(caplog):
    def boom(entries):
        raise RuntimeError("disk full")

    def hook(event):
        raise ValueError("metrics down")

    log = {**logged([]), "record_many": boom}
    with caplog.at_level(logging.WARNING, logger="toolnexus.history"):
        assert record_exchange(log, "c", "p", "a", now=NOW, on_metric=hook) == ()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "on_metric raised while reporting a message-log error"
    ]
    assert errors[0].name == "toolnexus.history" and errors[0].exc_info[0] is ValueError


def test_require_log_says_how_to_make_one():
    with pytest.raises(NoMessageLogError) as e:
        require_log(None)
    assert str(e.value) == (
        "this client has no message log: create it with "
        "message_log=sqlite_log('history.db') (or in_memory_log(), postgres_log(...))"
    )


def seeded():
    log = in_memory_log()
    for cid in ("c", "d"):
        log["record"](make_entry(cid, f"secret of {cid}", "user", NOW))
    return log


def test_lookup_tool_for_is_on_by_default_and_scoped_to_the_conversation():
    t = lookup_tool_for(seeded(), "c")
    assert t is not None and t["name"] == "chat_history"
    found = t["execute"]({})["output"]
    assert "secret of c" in found and "secret of d" not in found


def test_the_lookup_toolkit_s_tool_list_holds_the_tool_of_the_conversation():
    mine = tool("echo", "Echo.", None, lambda a: "e")
    scoped = lookup_toolkits(toolkit(mine), seeded())
    tk = scoped("d")
    last = tk["tools"][-1]
    assert last is tk["index"]["chat_history"] and tk["tools"][0]["name"] == "echo"
    found = last["execute"]({})["output"]
    assert "secret of d" in found and "secret of c" not in found
