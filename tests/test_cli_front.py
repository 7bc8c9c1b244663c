"""The CLI without rough edges (issue 38, item 4; issue 39, item 7): one default place for
every command, --store in the same forms everywhere, one-line errors for a missing driver,
quiet closed pipes, read-only commands that create nothing, stores that make only the
directory they are given, and control characters escaped in everything printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.commands.terminal import UNSAFE, escape_controls
from toolnexus.store import file_lock, file_store, sqlite_store
from toolnexus.testing import fake_provider, text_reply

ROOT = Path(__file__).resolve().parents[1]


def cli(*argv, env=None, stdin="", cwd=None, prelude=""):
    """Run `python -m toolnexus ARGV` in a child (after `prelude`, Python run first)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    code = f"{prelude}\nimport sys\nfrom toolnexus.cli import main\nsys.exit(main(sys.argv[1:]))"
    argv = [sys.executable, "-c", code, *map(str, argv)]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=full, cwd=cwd,
                          timeout=60)  # fmt: skip


# ---- one default place, one form of --store ------------------------------------------


def test_demo_ids_and_show_share_one_default_place(tmp_path):
    """Failed before: the demo kept its conversation in DATA/toolnexus/demo, which `ids`
    and `show` never read."""
    env = {"XDG_DATA_HOME": str(tmp_path)}
    demo = cli("demo", env=env)
    assert demo.returncode == 0, demo.stderr
    assert "see it: python -m toolnexus show demo\n" in demo.stdout
    assert cli("ids", env=env).stdout == "demo\n"
    shown = cli("show", "demo", env=env)
    assert shown.returncode == 0 and "What's the weather in Paris" in shown.stdout


@pytest.mark.parametrize("form", ["file:{tmp}/chat", "sqlite:{tmp}/chat.db", "memory"])
def test_demo_takes_the_store_forms_of_every_command(tmp_path, form):
    """Failed before: `demo --store file:DIR` said "the directory 'file:...' does not exist"."""
    spec = form.format(tmp=tmp_path)
    demo = cli("demo", "--store", spec)
    assert demo.returncode == 0, demo.stderr
    line = next(x for x in demo.stdout.splitlines() if x.startswith("see it: "))
    assert line == f"see it: python -m toolnexus show demo --store {spec}"
    if spec != "memory":  # what the demo printed finds what it stored
        assert "-- turn 1 --" in cli(*line.split()[5:]).stdout


# ---- errors: a missing driver, closed pipes --------------------------------------------

BLOCK_DRIVERS = (
    "import sys\nfor m in ('psycopg', 'psycopg_pool', 'redis'):\n    sys.modules[m] = None"
)


@pytest.mark.parametrize(
    ("spec", "extra"),
    [("postgresql://app:s3cret@127.0.0.1:1/db", "postgres"), ("redis://127.0.0.1:1/0", "redis")],
)
@pytest.mark.parametrize("command", [["ids"], ["show", "x"], ["demo"]])
def test_a_missing_driver_is_one_line_naming_the_extra(command, spec, extra):
    """Failed before: a 28-line traceback."""
    done = cli(*command, "--store", spec, prelude=BLOCK_DRIVERS)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert f"pip install 'toolnexus[{extra}]'" in done.stderr and "s3cret" not in done.stderr


def test_show_into_a_pipe_closed_early_ends_quietly_with_status_0(tmp_path):
    """Failed before: `show ID | head -1` ended with "Broken pipe" and status 1 (or 141)."""
    store = file_store(tmp_path / "s")
    big = [{"role": "user", "content": f"line {i} " + "x" * 200} for i in range(600)]
    store["save"]("big", big)  # far more than a pipe's buffer: the reader's close is felt
    for _ in range(5):
        argv = [sys.executable, "-m", "toolnexus", "show", "big", "--store", f"file:{tmp_path}/s"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert p.stdout.readline()  # what `head -1` reads, then it goes away
        p.stdout.close()
        assert p.wait(timeout=60) == 0
        assert p.stderr.read() == b""
        p.stderr.close()


# ---- read-only commands create nothing; stores make only the directory given ----------


def test_ids_does_not_create_the_data_directory(tmp_path):
    """Failed before: `ids` created DATA/toolnexus/chat."""
    done = cli("ids", env={"XDG_DATA_HOME": str(tmp_path / "data")})
    assert done.returncode == 0 and done.stdout == ""
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "argv",
    [["show", "x", "--store", "sqlite:nothere.db"], ["export", "x", "--store", "sqlite:nothere.db"],
     ["show", "x", "--store", "file:nothere"], ["ids", "--store", "sqlite:nothere.db"]],
)  # fmt: skip
def test_read_only_commands_leave_nothing_behind(tmp_path, argv):
    """Failed before: `show --store sqlite:nothere.db x` failed and left an empty file."""
    done = cli(*argv, cwd=tmp_path)
    assert done.returncode == (0 if argv[0] == "ids" else 1)
    if argv[0] != "ids":
        assert "no conversation 'x'" in done.stderr and "does not exist" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_file_store_makes_its_directory_but_never_missing_parents(tmp_path):
    """Failed before: file_store('a/tpyo/chats') made the whole tree silently."""
    with pytest.raises(FileNotFoundError, match=f"'{tmp_path / 'a'}' does not exist"):
        file_store(tmp_path / "a" / "chats")
    assert not (tmp_path / "a").exists()
    file_store(tmp_path / "chats")["save"]("x", [{"role": "user", "content": "hi"}])
    assert (tmp_path / "chats").is_dir()


def test_sqlite_store_and_file_lock_never_make_missing_parents(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"'{tmp_path / 'no'}' does not exist"):
        sqlite_store(tmp_path / "no" / "chat.db")
    with pytest.raises(FileNotFoundError, match=f"'{tmp_path / 'no'}' does not exist"):
        file_lock(tmp_path / "no" / "locks")
    assert list(tmp_path.iterdir()) == []
    sqlite_store(tmp_path / "chat.db")["save"]("x", [{"role": "user", "content": "hi"}])
    file_lock(tmp_path / "locks")
    assert {p.name for p in tmp_path.iterdir()} >= {"chat.db", "locks"}


# ---- control characters: printed as text, never acted on -------------------------------

HOSTILE = "clip\x1b]52;c;c2VjcmV0\x07 title\x1b]0;pwned\x1b\\ wipe\x1b[2J\rover\x9b1m rtl\u202e"


def _clean(text: str) -> None:
    assert not UNSAFE.search(text), repr(text)


def test_show_ids_export_and_history_escape_what_a_store_or_log_holds(tmp_path):
    """Failed before: the store's bytes reached the terminal raw (OSC 52 wrote the clipboard)."""
    spec = f"file:{tmp_path / 's'}"
    (tmp_path / "s").mkdir()
    messages = [{"role": "user", "content": "a\tb\nnext " + HOSTILE},
                {"role": "assistant", "content": HOSTILE}]  # fmt: skip
    file_store(tmp_path / "s")["save"]("id\x1b[31m", messages)
    shown = cli("show", "id\x1b[31m", "--store", spec)
    assert shown.returncode == 0, shown.stderr
    _clean(shown.stdout)
    assert "\\u001b]52;c;c2VjcmV0\\u0007" in shown.stdout and "a\tb\n" in shown.stdout
    ids = cli("ids", "--store", spec)
    assert ids.stdout == "id\\u001b[31m\n"
    exported = cli("export", "id\x1b[31m", "--store", spec)
    _clean(exported.stdout)
    assert json.loads(exported.stdout)[1]["parts"][0]["content"] == HOSTILE  # still JSON
    missing = cli("show", "no\x1b]52;c;eA==\x07", "--store", spec)
    _clean(missing.stderr)


def test_history_search_escapes_what_the_log_recorded(tmp_path):
    from toolnexus import ask, create_in_process_client
    from toolnexus.history import sqlite_log

    db = tmp_path / "history.db"
    model = create_in_process_client(model="m", generate=lambda r: {"content": HOSTILE},
                                     message_log=sqlite_log(db))  # fmt: skip
    ask(model, "hi", id="c")
    found = cli("history", "search", "--db", db)
    assert found.returncode == 0, found.stderr
    _clean(found.stdout)
    assert "\\u001b]0;pwned" in found.stdout


def test_chat_escapes_the_model_text_as_it_streams(tmp_path):
    with fake_provider([text_reply(HOSTILE, chunk=3)]) as fp:
        done = cli("chat", "--base-url", fp.url, "--model", "m", stdin="hi\n",
                   env={"OPENAI_API_KEY": "k"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    _clean(done.stdout)
    assert "\\u001b[2J\\u000dover\\u009b1m" in done.stdout


@given(st.text())
def test_escaped_text_holds_no_control_a_terminal_acts_on(text):
    out = escape_controls(text)
    assert not UNSAFE.search(out)
    assert out.count("\n") == text.count("\n") and out.count("\t") == text.count("\t")


@given(st.text(), st.text())
def test_escaping_is_per_character_so_streamed_pieces_escape_alike(a, b):
    assert escape_controls(a) + escape_controls(b) == escape_controls(a + b)


@given(st.text(st.characters(blacklist_categories=("Cc", "Cf"))))
def test_text_without_controls_is_printed_unchanged(text):
    assert escape_controls(text) == text
