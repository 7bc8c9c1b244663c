"""`python -m toolnexus history search|clear`, run as a user would, on a real SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from toolnexus.cli import main
from toolnexus.history import make_entry, sqlite_log


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", "history", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "history.db"
    log = sqlite_log(path)
    for day, conv, text, direction in [
        (6, "alice", "Book a table for 100% of us", "user"),
        (7, "alice", "Done: table_for_four at 8pm", "ai"),
        (8, "bob", "What is the weather in Zürich?", "user"),
        (8, "bob", "Sunny in ZÜRICH,\nabout 20°C", "ai"),
    ]:
        log["record"](make_entry(conv, text, direction, datetime(2026, 5, day, 12, tzinfo=UTC)))
    log["close"]()
    return str(path)


def test_search_prints_readable_lines(db):
    r = cli("search", "zürich", "--db", db)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "2026-05-08 12:00:00 UTC  bob  user  What is the weather in Zürich?",
        "2026-05-08 12:00:00 UTC  bob  ai    Sunny in ZÜRICH, about 20°C",
    ]
    assert "2 messages" in r.stderr


def test_search_by_dates_literal_text_and_limit(db):
    r = cli("search", "%", "--since", "2026-05-06", "--until", "2026-05-07", "--db", db)
    assert r.returncode == 0 and r.stdout.count("\n") == 1 and "100%" in r.stdout
    r = cli("search", "--since", "2026-05-07T00:00Z", "--limit", "1", "--db", db)
    assert r.returncode == 0 and r.stdout.count("\n") == 1 and "ZÜRICH" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("search", "x", "--since", "last week"),
        ("search", "x", "--until", "2026-02-30"),
        ("search", "x", "--limit", "0"),
        ("clear", "--before", "tomorrow-ish"),
    ],
)
def test_bad_input_is_one_line_and_status_2(db, args, capsys):
    # In process (the same `main` as `python -m toolnexus`) to keep the suite fast.
    assert main(["history", *args, "--db", db]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and err.startswith("error: ")


def test_bad_date_from_the_command_line(db):
    r = cli("search", "x", "--since", "08/05/2026", "--db", db)
    assert r.returncode == 2 and r.stderr.startswith("error: bad date")
    assert "Traceback" not in r.stderr


def test_clear_before_a_day_keeps_that_day(db):
    r = cli("clear", "--before", "2026-05-08", "--db", db)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("removed 2 messages recorded before 2026-05-08")
    left = sqlite_log(db)["query"]()
    assert [e["conversation_id"] for e in left] == ["bob", "bob"]


def test_default_db_under_the_data_dir_and_missing_file(tmp_path):
    r = cli("search", "x", env={"XDG_DATA_HOME": str(tmp_path), "TOOLNEXUS_HISTORY_DB": ""})
    assert r.returncode == 1
    assert str(tmp_path / "toolnexus" / "history.db") in r.stderr
    assert not (tmp_path / "toolnexus").exists()  # searching never creates a database
