"""The rules of history/tool.py no other test asserts: the exact schema a model sees, the
limits (50 by default, 1 to 500, 10.0 read as 10), one line's 400 characters, render's
budget to the character, the per-conversation limit of each query, the default
max_chars, the scoper's refusals, the clock read as UTC, the handler's own checks (behind
the schema's), and the descriptions of a tool for one and for several conversations."""

from __future__ import annotations

import inspect
import time as systime
from datetime import UTC, datetime, timedelta, timezone

import pytest

from toolnexus.core.frozen import thaw
from toolnexus.history import chat_history_tool, in_memory_log, make_entry
from toolnexus.history.tool import chat_history_scoper, render

NOW = datetime(2026, 5, 9, 15, 30, tzinfo=UTC)
DATE_HELP = (
    "ISO 8601 date or date-time in UTC unless an offset is given, e.g. 2026-05-08, "
    "2026-05-08T14:30Z or 2026-05-08T14:30+02:00; 'today' and 'yesterday' also work."
)


def seeded(n: int, cid: str = "c", text: str = "m{}") -> dict:
    log = in_memory_log()
    for i in range(n):
        log["record"](make_entry(cid, text.format(i), "user", NOW - timedelta(minutes=n - i)))
    return log


def out(t, **args) -> str:
    result = t["execute"](args)
    assert not result["is_error"], result["output"]
    return result["output"]


def test_the_schema_the_model_sees():
    t = chat_history_tool(in_memory_log(), scope="c")
    assert thaw(t["input_schema"]) == {
        "type": "object",
        "properties": {
            "contains": {
                "type": "string",
                "description": "Only messages containing this text (case-insensitive, literal).",
            },
            "since": {
                "type": "string",
                "description": "Only messages at or after this time. A date alone means from the "
                "start of that day. " + DATE_HELP,
            },
            "until": {
                "type": "string",
                "description": "Only messages at or before this time. A date alone means up to "
                "the end of that day. " + DATE_HELP,
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 500,
                "description": "At most this many of the newest matches (default 50).",
            },
        },
        "additionalProperties": False,
    }
    wide = chat_history_tool(in_memory_log(), scope=["a", "b"])
    assert wide["input_schema"] == t["input_schema"]


def test_the_descriptions_name_the_scope():
    one = chat_history_tool(in_memory_log(), scope="c")["description"]
    assert one.startswith("Search the earlier messages of this conversation (what the user said")
    assert one.endswith("Use it to answer questions like 'what did we talk about yesterday?'.")
    two = chat_history_tool(in_memory_log(), scope=["a", "b"])["description"]
    assert two.startswith("Search the earlier messages of 2 conversations (what the user said")


def test_fifty_newest_by_default_and_from_one_to_five_hundred():
    t = chat_history_tool(seeded(60), scope="c", max_chars=100_000, now=lambda: NOW)
    shown = out(t)
    assert shown.startswith("50 messages, newest first") and "m10" in shown and "m9\n" not in shown
    assert out(t, limit=500).startswith("60 messages")
    assert out(t, limit=1).startswith("1 message, newest first")
    assert out(t, limit=2.0).startswith("2 messages")  # some models send 10.0
    for bad in (0, 501):
        result = t["execute"]({"limit": bad})
        assert result["is_error"] and result["output"] == (
            f"Error: limit must be an integer from 1 to 500, got {bad}"
        )


def test_an_empty_date_is_no_bound():
    t = chat_history_tool(seeded(3), scope="c", now=lambda: NOW)
    assert out(t, since="", until="").startswith("3 messages")


def test_one_line_holds_at_most_400_characters():
    log = in_memory_log()
    log["record"](make_entry("c", "x" * 400, "user", NOW))
    log["record"](make_entry("c", "y" * 401, "ai", NOW))
    lines = out(chat_history_tool(log, scope="c", max_chars=2000, now=lambda: NOW)).splitlines()
    assert lines[1].endswith(" ai: " + "y" * 399 + "…")
    assert lines[2].endswith(" user: " + "x" * 400)


THREE = [make_entry("c", f"message {i}", "user", NOW - timedelta(hours=3 - i), id=f"m{i}")
         for i in range(3)]  # fmt: skip


def test_every_line_is_shown_when_all_of_them_fit_the_budget():
    """Failed before: each line but the last kept room for the note even when the rest
    fit, so a budget holding every line showed "… 2 older not shown" instead."""
    full = render(THREE, 10_000, NOW)
    assert render(THREE, len(full), NOW) == full


def note(count: int) -> str:
    return f"… {count} older not shown (narrow with since/until/contains)"


LONG = [make_entry("c", f"message {i} " + "w" * 90, "user", NOW - timedelta(hours=3 - i))
        for i in range(3)]  # fmt: skip


@pytest.mark.parametrize("show", [False, True])
@pytest.mark.parametrize("entries", [THREE, LONG], ids=["short", "long"])
def test_render_fills_its_budget_to_the_character_keeping_room_for_the_note(entries, show):
    """Under every budget: all lines when all fit; else the newest k lines that leave room
    for the note of all n (the note then says how many were left out)."""
    full = render(entries, 10_000, NOW, show)
    head, *lines = full.splitlines()
    assert len(lines) == 3 and (" [c] user: " in lines[0]) == show
    for budget in range(len(head) - 5, len(full) + 3):
        if budget >= len(full):
            want = full
        else:
            k = max(k for k in range(3)
                    if k == 0 or len(head) + sum(1 + len(x) for x in lines[:k]) + 1 + len(note(3))
                    <= budget)  # fmt: skip
            want = "\n".join([head, *lines[:k], note(3 - k)])
        assert render(entries, budget, NOW, show) == want, budget


def test_each_conversation_is_asked_for_the_limit_only():
    asked = []
    log = {"query": lambda **q: asked.append(q) or ()}
    chat_history_tool(log, scope=["a", "b"], now=lambda: NOW)["execute"]({"limit": 7})
    assert [q["limit"] for q in asked] == [7, 7]
    assert [q["conversation_id"] for q in asked] == ["a", "b"]


def test_the_default_budget_is_4000_characters_exactly():
    """A listing of exactly 4001 characters is cut by default, and whole at 4001."""
    base = [make_entry("c", "w" * 300, "user", NOW - timedelta(minutes=20 - i)) for i in range(11)]
    for pad in range(1, 400):
        last = make_entry("c", "v" * pad, "ai", NOW)
        if len(render([*base, last], 100_000, NOW)) == 4001:
            break
    log = in_memory_log()
    for e in (*base, last):
        log["record"](e)
    whole = render([*base, last], 100_000, NOW)
    assert len(whole) == 4001
    assert out(chat_history_tool(log, scope="c", max_chars=4001, now=lambda: NOW)) == whole
    assert out(chat_history_tool(log, scope="c", now=lambda: NOW)) != whole
    assert out(chat_history_scoper(log, now=lambda: NOW)("c")) != whole


def test_the_default_budget_is_about_4000_characters():
    log = seeded(50, text="{} " + "w" * 300)
    shown = out(chat_history_tool(log, scope="c", now=lambda: NOW))
    assert 3600 < len(shown) <= 4000
    small = out(chat_history_tool(log, scope="c", max_chars=1000, now=lambda: NOW))
    assert 600 < len(small) <= 1000
    assert len(out(chat_history_scoper(log, now=lambda: NOW)("c"))) == len(shown)


def test_the_scoper_refuses_what_is_no_log_and_a_budget_under_200():
    for log in ({"record": print}, {"query": "no"}, "log"):
        says = r"^log must be a message log \(a mapping with a callable 'query'\)$"
        with pytest.raises(ValueError, match=says):
            chat_history_scoper(log)
    for bad in (199, 200.0, "300"):
        with pytest.raises(ValueError, match=r"^max_chars must be an integer >= 200, got "):
            chat_history_scoper(in_memory_log(), max_chars=bad)
    chat_history_scoper(in_memory_log(), max_chars=200)


@pytest.fixture
def far_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    systime.tzset()
    yield
    monkeypatch.undo()
    systime.tzset()


def test_now_is_shown_in_utc_whatever_the_local_zone(far_zone):
    plus2 = NOW.astimezone(timezone(timedelta(hours=2)))
    t = chat_history_tool(in_memory_log(), scope="c", now=lambda: plus2)
    assert out(t) == "No messages found (now: 2026-05-09 15:30 UTC)."


def test_the_handler_checks_its_input_itself_too():
    handler = inspect.unwrap(chat_history_tool(seeded(60), scope="c", now=lambda: NOW)["execute"])
    assert handler({"contains": 5})["output"] == "Error: contains must be a string, got int"
    assert handler({"limit": None})["output"].startswith("50 messages")
    assert (
        handler({"limit": True})["output"]
        == "Error: limit must be an integer from 1 to 500, got True"
    )
