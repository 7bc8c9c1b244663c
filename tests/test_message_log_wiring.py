"""The client's message_log option: recording, the scoped lookup tool, history helpers."""

from datetime import UTC, datetime, timedelta

import pytest

from toolnexus import (
    ask,
    clear_chat_history,
    create_in_process_client,
    get_chat_history,
    run,
)
from toolnexus.history import in_memory_log, sqlite_log


def echo(req):
    return {"content": "re: " + req["messages"][-1]["content"]}


def test_runs_record_prompt_and_answer_with_the_conversation_id(tmp_path):
    log = sqlite_log(tmp_path / "h.db")
    c = create_in_process_client(model="m", generate=echo, message_log=log)
    ask(c, "hello", id="u1")
    run(c, "no id")
    entries = get_chat_history(c)
    assert [(e["conversation_id"], e["direction"], e["text"]) for e in entries] == [
        ("u1", "user", "hello"),
        ("u1", "ai", "re: hello"),
        (None, "user", "no id"),
        (None, "ai", "re: no id"),
    ]
    assert [e["text"] for e in get_chat_history(c, conversation_id="u1", contains="RE:")] == [
        "re: hello"
    ]
    assert clear_chat_history(c, before=datetime.now(UTC) + timedelta(seconds=1)) == 4
    assert get_chat_history(c) == ()


def test_lookup_tool_is_added_only_with_an_id_and_scoped_to_it():
    seen_tools = []

    def gen(req):
        seen_tools.append([t["function"]["name"] for t in req["tools"]])
        return {"content": "ok"}

    log = in_memory_log()
    c = create_in_process_client(model="m", generate=gen, message_log=log)
    run(c, "a")
    ask(c, "b", id="u")
    off = create_in_process_client(model="m", generate=gen, message_log=log, lookup_tool=False)
    ask(off, "c", id="u")
    assert seen_tools == [[], ["chat_history"], []]


def test_recording_failures_never_lose_the_run_unless_strict():
    def broken(entry):
        raise OSError("disk full")

    log = {**in_memory_log(), "record": broken, "record_many": broken}
    events = []
    c = create_in_process_client(model="m", generate=echo, message_log=log, on_metric=events.append)
    assert run(c, "hi")["text"] == "re: hi"
    assert any(e["event"] == "log_error" for e in events)
    strict = create_in_process_client(model="m", generate=echo, message_log=log, strict_log=True)
    with pytest.raises(OSError, match="disk full"):
        run(strict, "hi")


def test_history_helpers_need_a_log():
    c = create_in_process_client(model="m", generate=echo)
    with pytest.raises(ValueError, match="no message log"):
        get_chat_history(c)
    with pytest.raises(ValueError, match="no message log"):
        clear_chat_history(c)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_failing_log_after_a_locked_save_keeps_the_exchange_and_the_run_metric(driver):
    # With a conversation id the async driver saves, releases the lock and writes the log
    # in one hand-off: a log failure there must still leave the exchange saved, the lock
    # free and the run counted as a success, raising only when the log is strict.
    import asyncio

    from toolnexus import aask, conversation_store

    def broken(entry):
        raise OSError("disk full")

    def ask_with(client, text):
        if driver == "sync":
            return ask(client, text, id="c")
        return asyncio.run(aask(client, text, id="c"))

    for strict in (False, True):
        events = []
        log = {**in_memory_log(), "record": broken, "record_many": broken}
        c = create_in_process_client(
            model="m", generate=echo, message_log=log, strict_log=strict, on_metric=events.append
        )
        if strict:
            with pytest.raises(OSError, match="disk full"):
                ask_with(c, "hi")
        else:
            assert ask_with(c, "hi")["text"] == "re: hi"
        runs = [e for e in events if e["event"] == "run"]
        assert [r["error"] for r in runs] == [False]
        assert [e["event"] for e in events].count("log_error") == 1
        assert [m["content"] for m in conversation_store(c)["get"]("c")] == ["hi", "re: hi"]
        # the lock was released: the next exchange in the conversation goes through
        c2 = create_in_process_client(
            model="m", generate=echo, store=conversation_store(c), lock=c.lock
        )
        assert ask_with(c2, "again")["text"] == "re: again"
        assert len(conversation_store(c)["get"]("c")) == 4


def test_the_scoped_lookup_toolkit_is_made_once_per_conversation_in_the_runtime():
    """The runtime keeps it (bounded, cleared on close), so an exchange does not rebuild
    the lookup tool and its request JSON; another toolkit or conversation gets its own."""
    from toolnexus import create_in_process_client, define_tool, run, toolkit
    from toolnexus.history import in_memory_log

    seen = []

    def model(req):
        seen.append(tuple(t["function"]["name"] for t in req["tools"]))
        return {"content": "ok"}

    @define_tool
    def echo(s: str) -> str:
        """Echo."""
        return s

    c = create_in_process_client(model="m", generate=model, message_log=in_memory_log())
    tk = toolkit(echo)
    run(c, "one", toolkit=tk, id="a")
    made = c.runtime.lookup_toolkit(tk, c.message_log, "a", lambda: None)
    run(c, "two", toolkit=tk, id="a")
    assert c.runtime.lookup_toolkit(tk, c.message_log, "a", lambda: None) is made
    assert made is not None and seen == [("echo", "chat_history")] * 2
    # A new conversation reuses the toolkit's scoper (its request entries built once).
    b = c.runtime.lookup_toolkit(tk, c.message_log, "b", lambda: None)
    assert b["wire_json"] is made["wire_json"] and b["index"]["chat_history"] is not None
    assert b["index"]["chat_history"]["execute"] is not made["index"]["chat_history"]["execute"]
    other = toolkit(echo)
    assert c.runtime.lookup_toolkit(other, c.message_log, "a", lambda: lambda id: "new") == "new"
    c.close()
    after = c.runtime.lookup_toolkit(tk, c.message_log, "a", lambda: lambda id: "after " + id)
    assert after == "after a"
