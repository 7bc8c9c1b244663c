"""The SQLite message log fails as the stores do: a file it cannot use is unavailable
or read-only, a file or row that is not what it wrote is corrupt, never sqlite3's own
exception (which a caller catching the store errors would let through). Real files."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from toolnexus.history import make_entry, sqlite_log
from toolnexus.store import StoreCorruptError, StoreUnavailableError

WHEN = datetime(2026, 12, 7, tzinfo=UTC)


def _entry(text: str, id: str = "e1"):
    return make_entry("c", text, "user", WHEN, id=id)


def test_a_log_locked_past_its_timeout_is_unavailable(tmp_path):
    path = tmp_path / "log.db"
    log = sqlite_log(path, timeout=0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for longer than we wait
    try:
        with pytest.raises(StoreUnavailableError, match="log.db"):
            log["record"](_entry("hello"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    log["record"](_entry("hello"))  # free again: nothing was left half done
    assert [e["text"] for e in log["query"]()] == ["hello"]
    log["close"]()


@pytest.mark.parametrize("contains", [None, "caf"])
def test_a_row_that_is_not_utf8_is_corrupt_and_named(tmp_path, contains):
    path = tmp_path / "log.db"
    log = sqlite_log(path)
    log["record_many"]([_entry("café", "good"), _entry("café au lait", "bad")])
    bad = "café au lait".encode("latin-1").hex()  # another tool's bytes, not UTF-8
    with sqlite3.connect(path) as c:
        c.execute(f"UPDATE messages SET text = CAST(X'{bad}' AS TEXT) WHERE id = 'bad'")
    with pytest.raises(StoreCorruptError, match="'bad'"):
        log["query"](contains=contains)
    assert [e["id"] for e in log["query"](conversation_id="none")] == []  # reads go on
    log["close"]()


def test_a_file_that_is_not_a_database_is_corrupt(tmp_path):
    path = tmp_path / "log.db"
    path.write_bytes(b"not a database, just some bytes " * 64)
    with pytest.raises(StoreCorruptError, match="log.db"):
        sqlite_log(path)
