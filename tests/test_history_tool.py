"""The chat_history tool: schema, privacy scoping, the size budget, and a model using it."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus import chat_history_tool, create_in_process_client, execute, run, to_openai, toolkit
from toolnexus.core.tool import tool
from toolnexus.history import (
    NoMessageLogError,
    in_memory_log,
    make_entry,
    record_exchange,
    sqlite_log,
)
from toolnexus.history.tool import render
from toolnexus.history.wiring import (
    lookup_tool_for,
    lookup_toolkits,
    require_log,
    with_lookup_tool,
)

NOW = datetime(2026, 5, 9, 15, 30, tzinfo=UTC)
clock = lambda: NOW  # noqa: E731


def call(t, **args):
    return t["execute"](args)


def test_schema_and_shape():
    t = chat_history_tool(in_memory_log(), scope="u1")
    assert t["name"] == "chat_history"
    schema = t["input_schema"]
    assert set(schema["properties"]) == {"contains", "since", "until", "limit"}
    assert schema["additionalProperties"] is False and "required" not in schema
    assert "ISO 8601" in schema["properties"]["since"]["description"]
    [spec] = to_openai(toolkit(t))
    assert spec["function"]["name"] == "chat_history"


@pytest.mark.parametrize("scope", [None, "", [], ["a", ""], {"a": 1}, 42])
def test_scope_must_be_explicit(scope):
    with pytest.raises(ValueError, match="scope"):
        chat_history_tool(in_memory_log(), scope=scope)


def _seed(log, owners=("alice", "bob", "carol")):
    for i, owner in enumerate(owners * 3):
        ts = NOW - timedelta(hours=i)
        log["record"](make_entry(owner, f"{owner}-secret-{i} shared words", "user", ts))


@settings(max_examples=40)
@given(
    args=st.fixed_dictionaries(
        {},
        optional={
            "contains": st.sampled_from(["secret", "shared", "bob", "", "alice-secret"]),
            "since": st.sampled_from(["2026-05-09", "2026-05-09T10:00Z", "yesterday"]),
            "until": st.sampled_from(["2026-05-09", "today"]),
            "limit": st.integers(1, 20),
        },
    ),
    wide=st.booleans(),
)
def test_a_tool_never_sees_outside_its_scope(args, wide):
    log = in_memory_log()
    _seed(log)
    scope = {"alice", "carol"} if wide else "alice"
    out = call(chat_history_tool(log, scope=scope, now=clock), **args)
    assert not out["is_error"]
    assert "bob-" not in out["output"]
    if not wide:
        assert "carol-" not in out["output"]


def test_wider_scope_sees_each_of_its_conversations():
    log = in_memory_log()
    _seed(log)
    out = call(chat_history_tool(log, scope=["alice", "carol"], now=clock), limit=50)["output"]
    assert "alice-secret" in out and "carol-secret" in out and "bob-" not in out
    assert "[alice]" in out  # with several conversations, each line says which


@settings(max_examples=60)
@given(
    texts=st.lists(st.text(min_size=0, max_size=600), min_size=0, max_size=40),
    max_chars=st.integers(200, 3000),
)
def test_rendering_stays_within_budget_newest_first(texts, max_chars):
    es = [  # newest first; render takes oldest first
        make_entry(
            "c", t.replace("\x00", ""), "ai" if i % 2 else "user", NOW - timedelta(minutes=i)
        )
        for i, t in enumerate(texts)
    ]
    out = render(tuple(reversed(es)), max_chars, NOW)
    assert len(out) <= max_chars
    lines = out.split("\n")
    shown = [ln for ln in lines[1:] if not ln.startswith("… ")]
    stamps = [ln[:16] for ln in shown]
    assert stamps == sorted(stamps, reverse=True)
    assert all((" user: " in ln) or (" ai: " in ln) for ln in shown)
    if len(shown) < len(es):
        assert lines[-1].startswith(f"… {len(es) - len(shown)} older not shown")


def test_results_are_dated_lines_newest_first():
    log = in_memory_log()
    log["record"](make_entry("u", "first question", "user", NOW - timedelta(days=1, hours=2)))
    log["record"](make_entry("u", "first answer", "ai", NOW - timedelta(days=1, hours=1)))
    out = call(chat_history_tool(log, scope="u", now=clock), since="2026-05-08")["output"]
    assert out.splitlines() == [
        "2 messages, newest first (now: 2026-05-09 15:30 UTC):",
        "2026-05-08 14:30 UTC ai: first answer",
        "2026-05-08 13:30 UTC user: first question",
    ]
    empty = call(chat_history_tool(log, scope="u", now=clock), contains="nothing like this")
    assert empty["output"].startswith("No messages found") and not empty["is_error"]


@pytest.mark.parametrize(
    "args, says",
    [
        ({"since": "last tuesday"}, "since: not an ISO 8601"),
        ({"until": "2026-02-30"}, "until:"),
        ({"since": 20260508}, "since:"),
        ({"limit": 0}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"contains": ["a"]}, "contains"),
    ],
)
def test_bad_input_is_an_error_value(args, says):
    out = call(chat_history_tool(in_memory_log(), scope="u"), **args)
    assert out["is_error"] and says in out["output"]


def test_a_broken_log_is_an_error_value_not_an_exception(tmp_path):
    log = sqlite_log(tmp_path / "gone.db")
    log["close"]()
    out = call(chat_history_tool(log, scope="u"), contains="x")
    assert out["is_error"] and "ProgrammingError" in out["output"]


# ---- a scripted model asks "what did we talk about yesterday?" -------------------


def _yesterday_model(since_arg):
    def generate(request):
        last = request["messages"][-1]
        if last["role"] == "tool":
            return {"content": f"Yesterday we talked about:\n{last['content']}"}
        assert "chat_history" in [t["function"]["name"] for t in request["tools"]]
        day = since_arg()
        return {"tool_calls": [{"name": "chat_history", "arguments": {"since": day, "until": day}}]}

    return generate


@pytest.mark.parametrize("since", ["iso", "keyword"])
def test_model_recalls_yesterday(tmp_path, since):
    log = sqlite_log(tmp_path / "log.db")
    day = timedelta(days=1)
    for text, when in [
        ("two days ago we discussed tax forms", NOW - 2 * day),
        ("yesterday: plan a trip to Lisbon", NOW - day - timedelta(hours=3)),
        ("Lisbon in May is lovely", NOW - day - timedelta(hours=2)),
        ("today: what did we talk about yesterday?", NOW),
    ]:
        log["record"](make_entry("user-1", text, "user" if "?" in text else "ai", when))
    log["record"](make_entry("user-2", "someone else's yesterday secret", "user", NOW - day))

    arg = (lambda: (NOW - day).date().isoformat()) if since == "iso" else (lambda: "yesterday")
    client = create_in_process_client(model="scripted", generate=_yesterday_model(arg))
    tk = toolkit(chat_history_tool(log, scope="user-1", now=clock))
    r = run(client, "what did we talk about yesterday?", toolkit=tk, conversation_id="user-1")
    assert r["tool_calls"][0]["name"] == "chat_history"
    assert "plan a trip to Lisbon" in r["text"] and "Lisbon in May is lovely" in r["text"]
    assert "tax forms" not in r["text"] and "today:" not in r["text"]
    assert "secret" not in r["text"]
    log["close"]()


# ---- wiring helpers the client uses ---------------------------------------------


def test_record_exchange_records_prompt_then_answer():
    log = in_memory_log()
    got = record_exchange(log, "c1", "hi?", "hello!", now=NOW, asked_at=NOW - timedelta(seconds=3))
    assert [(e["direction"], e["text"]) for e in log["query"]()] == [
        ("user", "hi?"),
        ("ai", "hello!"),
    ]
    assert got == log["query"]()
    assert [e["timestamp"] for e in got] == [NOW - timedelta(seconds=3), NOW]
    assert len(record_exchange(log, None, "no id, no answer", "", now=NOW)) == 1
    assert log["query"](contains="no id")[0]["conversation_id"] is None


def test_record_exchange_never_loses_the_run(tmp_path, caplog):
    log = sqlite_log(tmp_path / "closed.db")
    log["close"]()  # a real failure: the database is gone
    events = []
    with caplog.at_level(logging.WARNING, logger="toolnexus.history"):
        assert record_exchange(log, "c1", "private prompt", "answer", on_metric=events.append) == ()
    [event] = events
    assert event["event"] == "log_error" and "conversation_id" not in event
    assert "ProgrammingError" in event["error"]
    assert "private prompt" not in caplog.text and "c1" in caplog.text
    with pytest.raises(Exception, match="closed"):
        record_exchange(log, "c1", "p", "a", strict=True)


def test_record_exchange_survives_a_broken_metrics_hook(tmp_path):
    log = sqlite_log(tmp_path / "closed.db")
    log["close"]()

    def bad_hook(event):
        raise RuntimeError("metrics down")

    assert record_exchange(log, "c1", "p", "a", on_metric=bad_hook) == ()


def test_lookup_tool_wiring():
    log = in_memory_log()
    assert lookup_tool_for(log, None) is None  # no id: nothing to scope to
    assert lookup_tool_for(log, "c1", enabled=False) is None
    assert lookup_tool_for(None, "c1") is None
    tk = toolkit(tool("echo", "Echo.", None, lambda a: "x"))
    wired = with_lookup_tool(tk, log, "c1")
    assert [t["name"] for t in wired["tools"]] == ["echo", "chat_history"]
    assert [t["name"] for t in tk["tools"]] == ["echo"]  # a new value
    assert with_lookup_tool(wired, log, "c2") is wired  # the caller's own tool wins
    assert with_lookup_tool(None, log, "c1")["tools"][0]["name"] == "chat_history"
    assert with_lookup_tool(tk, log, None) is tk
    assert with_lookup_tool(tk, log, "c1", enabled=False) is tk


def test_the_wired_toolkit_stays_scoped_to_its_conversation():
    log = in_memory_log()
    record_exchange(log, "c1", "one question", "one answer")
    record_exchange(log, "c2", "two question", "two answer")
    tk = toolkit(tool("echo", "Echo.", None, lambda a: "x"))
    first = with_lookup_tool(tk, log, "c1")
    assert [t["name"] for t in first["tools"]] == ["echo", "chat_history"]
    other = with_lookup_tool(tk, log, "c2")
    found = {c: execute(t, "chat_history", {"contains": "question"})["output"]
             for c, t in (("c1", first), ("c2", other))}  # fmt: skip
    assert "one question" in found["c1"] and "two" not in found["c1"]
    assert "two question" in found["c2"] and "one" not in found["c2"]


def test_scoped_toolkits_share_one_build_and_stay_scoped():
    """`lookup_toolkits` (what a client uses, once per toolkit) gives each conversation
    the same toolkit as `with_lookup_tool`, its request entries built once, its handler
    searching that conversation only and still checking its arguments."""
    log = in_memory_log()
    record_exchange(log, "c1", "one question", "one answer")
    record_exchange(log, "c2", "two question", "two answer")
    tk = toolkit(tool("echo", "Echo.", None, lambda a: "x"))
    scoped = lookup_toolkits(tk, log)
    first, other = scoped("c1"), scoped("c2")
    assert first["wire_json"] is other["wire_json"]
    assert first["wire_json"] == with_lookup_tool(tk, log, "c1")["wire_json"]
    assert [t["name"] for t in other["tools"]] == ["echo", "chat_history"]
    found = {c: execute(t, "chat_history", {"contains": "question"})["output"]
             for c, t in (("c1", first), ("c2", other))}  # fmt: skip
    assert "one question" in found["c1"] and "two" not in found["c1"]
    assert "two question" in found["c2"] and "one" not in found["c2"]
    bad = execute(other, "chat_history", {"limit": "many"})
    assert bad["is_error"] and "limit" in bad["output"]
    assert scoped(None) is tk and lookup_toolkits(tk, None)("c1") is tk


def test_require_log():
    with pytest.raises(NoMessageLogError, match="message_log="):
        require_log(None)
    with pytest.raises(NoMessageLogError, match="lacks"):
        require_log({"record": print})
    log = in_memory_log()
    assert require_log(log) is log
