"""The usual mix-ups give errors that teach (issue 17): stores, missing extras, dates, schemas,
closed pipes, directories nobody asked for."""

from __future__ import annotations

import datetime as dt
import enum
import os
import subprocess
import sys
import typing
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import create_in_process_client, define_tool, get_chat_history
from toolnexus.history import in_memory_log, make_entry, postgres_log, sqlite_log
from toolnexus.store import capped_store, check_store, in_memory_store, sqlite_store

# ---- check_store ----------------------------------------------------------------------


class MethodStore:
    def get(self, id):
        return None

    def save(self, id, transcript):
        pass


@pytest.mark.parametrize(
    "mistake, hint",
    [
        ("chat.db", "sqlite_store('chat.db')"),
        (Path("convs"), "file_store('convs')"),
        (capped_store(40), "capped_store(40, sqlite_store('chat.db'))"),
        (MethodStore(), '{"get": obj.get, "save": obj.save}'),
        ({"get": lambda id: None}, "'save' is missing or not callable"),
        (None, "got NoneType"),
    ],
    ids=["str", "path", "curried-decorator", "object", "no-save", "none"],
)
def test_a_non_store_is_a_type_error_that_says_what_a_store_is(mistake, hint):
    with pytest.raises(TypeError) as e:
        check_store(mistake, who="create_client(store=)")
    message = str(e.value)
    assert message.startswith("create_client(store=): ") and hint in message
    assert 'a store is a mapping {"get"' in message
    assert "capped_store(40, sqlite_store(" in message


def test_create_client_explains_a_path_given_as_a_store():
    """The lead's call site: create_client(store="chat.db") is check_store's TypeError."""
    from toolnexus import create_client

    with pytest.raises(TypeError, match=r"sqlite_store\('chat.db'\)"):
        create_client(base_url="http://127.0.0.1:9/v1", model="m", store="chat.db")


def test_a_store_passes_unchanged(tmp_path):
    for store in (in_memory_store(), capped_store(3, sqlite_store(tmp_path / "x.db"))):
        assert check_store(store) is store


# ---- missing extras ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, call, extra",
    [
        ("redis", lambda: __import__("toolnexus.store").store.redis_store("redis://x"), "redis"),
        (
            "psycopg",
            lambda: __import__("toolnexus.store").store.postgres_store("postgresql://x/y"),
            "postgres",
        ),
        ("psycopg", lambda: postgres_log("postgresql://x/y"), "postgres"),
        (
            "cryptography",
            lambda: __import__("toolnexus.store").store.encrypted(b"k" * 44, in_memory_store()),
            "crypto",
        ),
        (
            "yaml",
            lambda: __import__("toolnexus.skills").skills.parse_frontmatter("---\nname: x\n---\n"),
            "skills",
        ),
    ],
    ids=["redis", "postgres-store", "postgres-log", "crypto", "skills-yaml"],
)
def test_a_missing_extra_names_what_to_install(monkeypatch, module, call, extra):
    """Failed before: a bare `No module named 'redis'` (None in sys.modules = not installed)."""
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # the import system's "not installed"
    if module == "psycopg":
        monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    with pytest.raises(ImportError) as e:
        call()
    assert f"pip install 'toolnexus[{extra}]'" in str(e.value)


# ---- date strings --------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def a_log(request, tmp_path):
    if request.param == "memory":
        yield in_memory_log()
        return
    if request.param == "sqlite":
        log = sqlite_log(tmp_path / "h.db")
    else:
        dsn, table = request.getfixturevalue("postgres_dsn"), request.getfixturevalue("unique")
        log = postgres_log(dsn, table=table)
    yield log
    if request.param == "postgres":
        log["clear"]()
    log["close"]()


def at(day: int, hour: int = 10) -> dt.datetime:
    return dt.datetime(2026, 5, day, hour, tzinfo=dt.UTC)


def test_date_strings_and_dates_work_in_query_and_clear(a_log):
    """Failed before: since="2026-05-08" was a TypeError (only datetimes were accepted)."""
    a_log["record_many"]([make_entry("c", f"day {d}", "user", at(d)) for d in (7, 8, 9)])

    def texts(**q):
        return [e["text"] for e in a_log["query"](**q)]

    assert texts(since="2026-05-08") == ["day 8", "day 9"]
    assert texts(until="2026-05-08") == ["day 7", "day 8"]  # a day means the whole day
    assert texts(since=dt.date(2026, 5, 9)) == ["day 9"]
    assert texts(since="2026-05-08T11:00Z") == ["day 9"]
    with pytest.raises(ValueError, match="since"):
        a_log["query"](since="last tuesday")
    assert a_log["clear"](before="2026-05-08") == 1  # keeps all of May 8, as the CLI does
    assert texts() == ["day 8", "day 9"]


def test_get_chat_history_takes_a_date_string():
    log = in_memory_log()
    c = create_in_process_client(model="m", generate=lambda r: {"content": "ok"}, message_log=log)
    from toolnexus import ask

    ask(c, "hello", id="u1")
    assert [h["direction"] for h in get_chat_history(c, since="2020-01-01")] == ["user", "ai"]
    assert get_chat_history(c, since="2999-01-01") == ()


# ---- schemas ---------------------------------------------------------------------------


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def test_enum_date_uuid_and_path_parameters_get_real_schemas():
    """Failed before: each of these got the empty schema {}."""

    @define_tool
    def plan(
        unit: Unit,
        level: Level,
        day: dt.date,
        at: dt.datetime,
        ref: uuid.UUID,
        path: Path,
        mode: typing.Literal["fast", "slow"] = "fast",
        days: list[dt.date] | None = None,
    ) -> str:
        """Plan."""
        return "ok"

    props = plan["input_schema"]["properties"]
    assert props["unit"] == {"type": "string", "enum": ["celsius", "fahrenheit"]}
    assert props["level"] == {"type": "integer", "enum": [1, 2]}
    assert props["day"] == {"type": "string", "format": "date"}
    assert props["at"] == {"type": "string", "format": "date-time"}
    assert props["ref"] == {"type": "string", "format": "uuid"}
    assert props["path"] == {"type": "string"}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["days"] == {
        "type": ["array", "null"],
        "items": {"type": "string", "format": "date"},
    }
    assert list(plan["input_schema"]["required"]) == ["unit", "level", "day", "at", "ref", "path"]


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=4, unique=True))
def test_any_string_enum_lists_its_values(values):
    from toolnexus.core.tool import schema_for

    e = enum.Enum("E", {f"m{i}": v for i, v in enumerate(values)})
    assert schema_for(e) == {"type": "string", "enum": values}


# ---- commands: closed pipes, directories -----------------------------------------------


def _closed_pipe_run(*argv):
    """Run `python -m toolnexus ARGV` with stdout a pipe whose reader is already gone."""
    r, w = os.pipe()
    os.close(r)  # no reader: the first write fails with EPIPE, whatever the timing
    try:
        return subprocess.run([sys.executable, "-m", "toolnexus", *map(str, argv)],
                              stdout=w, stderr=subprocess.PIPE, text=True, timeout=60)  # fmt: skip
    finally:
        os.close(w)


@pytest.mark.parametrize("argv", [["demo", "--store", "file:{tmp}"], ["--version"], ["--help"]])
def test_commands_exit_quietly_on_a_closed_pipe(tmp_path, argv):
    """Failed before: `python -m toolnexus demo | head -1` printed a BrokenPipeError traceback."""
    p = _closed_pipe_run(*(a.format(tmp=tmp_path / "demo") for a in argv))
    assert p.stderr == "" and p.returncode in (0, 141)  # argparse itself ignores the write error


def test_version():
    import toolnexus

    out = subprocess.run([sys.executable, "-m", "toolnexus", "--version"],
                         capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    assert out.stdout == f"toolnexus {toolnexus.__version__}\n"
    assert toolnexus.__version__[0].isdigit()


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--id", "a",
         "--store", "sqlite:{tmp}/no/such/x.db"],
        ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--id", "a",
         "--store", "file:{tmp}/no/such"],
        ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--id", "a",
         "--store", "memory", "--log", "{tmp}/no/such.db"],
        ["show", "a", "--store", "sqlite:{tmp}/no/such/x.db"],
        ["demo", "--store", "file:{tmp}/no/such"],
    ],
    ids=["chat-sqlite", "chat-file", "chat-log", "show", "demo"],
)  # fmt: skip
def test_no_command_creates_directories_nobody_asked_for(tmp_path, argv):
    """Failed before: `--store sqlite:/no/such/dir/x.db` silently created /no/such/dir."""
    p = subprocess.run([sys.executable, "-m", "toolnexus", *(a.format(tmp=tmp_path) for a in argv)],
                       input="hi\n", capture_output=True, text=True, timeout=60)  # fmt: skip
    assert p.returncode == 1 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and "does not exist" in p.stderr
    assert not (tmp_path / "no").exists()
