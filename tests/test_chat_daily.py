"""The chat command for daily use: errors do not end it, slash commands stay local, the message
log is written next to the store and found by `history search`, Ctrl-C stops one answer."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

from test_chat import SIGINT_DEFAULT

from toolnexus.cli import main
from toolnexus.commands.chat import SLASH_HELP, parse_slash
from toolnexus.store import sqlite_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

KEY = "sk-daily-chat-secret-17"


def cli(*argv, stdin="", timeout=60):
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "toolnexus", *map(str, argv)], input=stdin,
                          capture_output=True, text=True, env=env, timeout=timeout)  # fmt: skip


def chat_in_process(monkeypatch, capsys, *argv, stdin=""):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["chat", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def sent_texts(fp) -> str:
    return "\n".join(json.dumps(r["body"]) for r in fp.requests)


def test_a_503_is_shown_the_chat_goes_on_slash_stays_local_and_history_finds_it(tmp_path):
    """Failed before: the 503 ended the session, and "/help" was sent to the model and stored."""
    store = f"sqlite:{tmp_path / 'chat.db'}"
    script = [
        {"status": 503, "body": {"error": {"message": "overloaded, try later"}}},
        text_reply("Paris is the capital of France."),
    ]
    lines = "capital of France?\n/help\n/nonsense\ncapital of France, again?\n/quit\nnever sent\n"
    with fake_provider(script) as fp:
        r = cli("chat", "--base-url", fp.url, "--model", "m", "--id", "trip", "--store", store,
                "--retries", "0", stdin=lines)  # fmt: skip
    assert r.returncode == 1, r.stderr  # one exchange failed; the session went on
    assert len(r.stderr.splitlines()) == 1 and "503" in r.stderr and "overloaded" in r.stderr
    assert SLASH_HELP in r.stdout and "unknown command /nonsense" in r.stdout
    assert "Paris is the capital of France." in r.stdout
    assert len(fp.requests) == 2
    sent = sent_texts(fp)
    assert "/help" not in sent and "/nonsense" not in sent and "never sent" not in sent
    stored = sqlite_store(tmp_path / "chat.db")["get"]("trip")
    assert [m["content"] for m in stored] == [
        "capital of France, again?",  # the failed exchange saved nothing
        "Paris is the capital of France.",
    ]
    found = cli("history", "search", "capital", "--db", tmp_path / "history.db")
    assert found.returncode == 0, found.stderr
    hits = found.stdout.splitlines()
    # The failed exchange's prompt is logged too (it was sent), though nothing was saved.
    assert len(hits) == 3 and all("  trip  " in h for h in hits)
    assert "capital of France?" in hits[0] and "capital of France, again?" in hits[1]
    assert "Paris is the capital" in hits[2]


def test_fork_reset_model_show_and_history_commands(tmp_path, monkeypatch, capsys):
    store = f"file:{tmp_path / 'convs'}"
    script = [text_reply("one"), text_reply("two"), text_reply("three")]
    lines = "first\n/fork b\nsecond\n/model bigger\nthird\n/show\n/history th\n/reset\n/show\n"
    with fake_provider(script) as fp:
        code, out, err = chat_in_process(monkeypatch, capsys, "--base-url", fp.url,
                                         "--model", "m", "--id", "a", "--store", store,
                                         stdin=lines)  # fmt: skip
    assert (code, err) == (0, "")
    assert [r["body"]["model"] for r in fp.requests] == ["m", "m", "bigger"]
    assert "forked 'a' to 'b'; now in 'b'" in out and "model: bigger" in out
    # /show printed b's four messages then (after /reset) nothing
    assert "user: first\nassistant: one\nuser: second\nassistant: two\nuser: third" in out
    assert "(nothing yet)" in out and "conversation cleared" in out
    history_lines = [line for line in out.splitlines() if "UTC, b]" in line]
    assert [line.split("] ", 1)[1] for line in history_lines] == ["third", "three"]
    from toolnexus.store import file_store

    s = file_store(tmp_path / "convs")
    assert [m["content"] for m in s["get"]("a")] == ["first", "one"]  # the fork left a alone
    assert s["get"]("b") is None  # reset forgot b
    assert (tmp_path / "convs" / "history.db").exists()  # the log lives next to the store
    assert "/fork" not in sent_texts(fp) and "/model" not in sent_texts(fp)


def test_double_slash_sends_a_slash_and_log_none_writes_no_log(tmp_path, monkeypatch, capsys):
    with fake_provider([text_reply("ok")]) as fp:
        code, _, _ = chat_in_process(monkeypatch, capsys, "--base-url", fp.url, "--model", "m",
                                     "--id", "x", "--store", f"sqlite:{tmp_path / 'c.db'}",
                                     "--log", "none", stdin="//etc/hosts?\n")  # fmt: skip
    assert code == 0 and fp.requests[0]["body"]["messages"][-1]["content"] == "/etc/hosts?"
    assert not (tmp_path / "history.db").exists()


def test_parse_slash():
    assert parse_slash("/History  paris trip ") == ("history", "paris trip")
    assert parse_slash("/quit") == ("quit", "")
    assert parse_slash("hello /help") is None and parse_slash("//x") is None


def wait_for(condition, timeout=30.0):
    """Block until `condition()` holds (checked every 10 ms), failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_ctrl_c_stops_the_answer_not_the_session(tmp_path):
    """Failed before: Ctrl-C during an answer ended the whole session."""
    skills = tmp_path / "skills" / "greet"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: greet\ndescription: Greets.\n---\nBe nice.\n")
    script = [
        tool_calls_reply(("skill", {"name": "greet"})),
        text_reply("never finished", stream_stall=120),  # held until the provider stops
        text_reply("second answer"),
    ]
    with fake_provider(script) as fp:
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        p = subprocess.Popen(
            # as from a terminal, wherever the suite runs (see test_chat.SIGINT_DEFAULT)
            [sys.executable, "-c", SIGINT_DEFAULT, "chat", "--base-url", fp.url, "--model", "m",
             "--id", "c", "--store", f"sqlite:{tmp_path / 'c.db'}",
             "--skills", tmp_path / "skills"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env,
        )  # fmt: skip
        p.stdin.write("hi\n")
        p.stdin.flush()
        assert p.stdout.readline().startswith("[tool] skill")
        assert p.stdout.readline().startswith("  -> ")
        wait_for(lambda: len(fp.requests) == 2)  # the answer's request is held: under way
        p.send_signal(signal.SIGINT)
        assert p.stdout.readline() == "\n"
        assert p.stdout.readline() == "[cancelled]\n"
        p.stdin.write("again\n")
        p.stdin.flush()
        assert p.stdout.readline() == "second answer\n"
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and err == ""
    third = fp.requests[2]["body"]["messages"]
    assert [m["content"] for m in third if m["role"] == "user"] == ["again"]  # nothing saved


def test_auto_lock_beside_a_sqlite_store_excludes_another_process(tmp_path):
    """--lock auto on a SQLite store is the store's own file lock, which another process
    really has to wait for."""
    from toolnexus.backends.file.lock import lock_directory
    from toolnexus.commands.places import lock_for, open_store

    spec = f"sqlite:{tmp_path / 'chat.db'}"
    store = open_store(spec)
    assert lock_for("auto", spec, store) is None  # the client takes the store's own lock
    where = lock_directory(tmp_path / "chat.db")
    probe = (
        "import sys\nfrom toolnexus.store import file_lock, LockTimeoutError\n"
        "try:\n    with file_lock(sys.argv[1], timeout=0.2)('c'):\n        print('taken')\n"
        "except LockTimeoutError:\n    print('waited')\n"
    )
    with store["lock"]("c"):
        held = subprocess.run([sys.executable, "-c", probe, where],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    free = subprocess.run([sys.executable, "-c", probe, where],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (held.stdout, free.stdout) == ("waited\n", "taken\n"), held.stderr + free.stderr


def test_lock_option_mistakes_are_one_line(tmp_path, monkeypatch, capsys):
    for option, words in [("file:/no/such/dir/locks", "does not exist"), ("redis", "unknown")]:
        code, out, err = chat_in_process(monkeypatch, capsys, "--base-url", "http://x/v1",
                                         "--model", "m", "--id", "a", "--store", "memory",
                                         "--lock", option, "--log", "none")  # fmt: skip
        assert code == 1 and out == "" and len(err.splitlines()) == 1 and words in err
