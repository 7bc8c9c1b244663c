"""The SQLite store over real files: append vs replace, restart, corruption, threads, processes."""

from __future__ import annotations

import sqlite3

import durable_store_cases as cases
import pytest

from toolnexus.backends.sqlite.store import sqlite_store
from toolnexus.core.frozen import thaw
from toolnexus.store import StoreCorruptError, StoreUnavailableError


@pytest.fixture
def db(tmp_path):
    (tmp_path / "sub").mkdir()  # a store makes its file, never missing directories
    return tmp_path / "sub" / "chat.db"


def raw_for(path) -> dict:
    """Reach past the store into its SQLite file."""

    def run(sql, *args):
        with sqlite3.connect(path, timeout=10) as c:
            return c.execute(sql, args).fetchall()

    return {
        "set_body": lambda id, seq, text: run(
            "UPDATE toolnexus_messages SET body = ? WHERE id = ? AND seq = ?", text, id, seq
        ),
        "drop_row": lambda id, seq: run(
            "DELETE FROM toolnexus_messages WHERE id = ? AND seq = ?", id, seq
        ),
        "set_version": lambda id, v: run(
            "UPDATE toolnexus_conversations SET version = ? WHERE id = ?", v, id
        ),
        "set_count": lambda id, n: run(
            "UPDATE toolnexus_conversations SET count = ? WHERE id = ?", n, id
        ),
        "rows": lambda id: [
            r[0] for r in run("SELECT body FROM toolnexus_messages WHERE id = ? ORDER BY seq", id)
        ],
    }


def test_round_trip_and_restart(db):
    cases.check_round_trip_and_restart(lambda: sqlite_store(db))


def test_reads_share_the_message_values_of_equal_rows(db):
    """A conversation read again gives the same (immutable) message values, not copies."""
    store = sqlite_store(db)
    store["save"]("a", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    first, again = store["get"]("a"), store["get"]("a")
    assert first == again and all(x is y for x, y in zip(first, again, strict=True))
    store["save"]("a", [{"role": "user", "content": "changed"}])  # a rewrite
    assert thaw(store["get"]("a")) == [{"role": "user", "content": "changed"}]


def test_empty_transcript(db):
    cases.check_empty_transcript(lambda: sqlite_store(db))


def test_hostile_ids(db):
    cases.check_hostile_ids(lambda: sqlite_store(db))


def test_extend_appends_only_new_rows(db):
    cases.check_extend_appends(lambda: sqlite_store(db), raw_for(db))


def test_rewrite_replaces(db):
    cases.check_rewrite_replaces(lambda: sqlite_store(db), raw_for(db))


def test_interleaved_writers(db):
    cases.check_interleaved_writers(lambda: sqlite_store(db))


def test_corruption_is_an_error_naming_the_id(db):
    cases.check_corruption(lambda: sqlite_store(db), raw_for(db))


def test_large_transcript(db):
    cases.check_large_transcript(lambda: sqlite_store(db))


def test_rows_without_a_head_are_corrupt(db):
    s = sqlite_store(db)
    s["save"]("a", cases.turns(2))
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM toolnexus_conversations WHERE id = 'a'")
    with pytest.raises(StoreCorruptError, match="'a'"):
        s["get"]("a")


def test_a_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not an sqlite database at all" * 100)
    with pytest.raises(StoreCorruptError, match="junk.db"):
        sqlite_store(path)["get"]("a")


def test_failed_save_leaves_the_stored_transcript_unchanged(db):
    s = sqlite_store(db)
    s["save"]("a", cases.turns(2))
    with sqlite3.connect(db) as c:  # the database refuses the third row, mid-save
        c.execute(
            "CREATE TRIGGER refuse AFTER INSERT ON toolnexus_messages WHEN new.seq = 3 "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    with pytest.raises((StoreCorruptError, StoreUnavailableError)):
        s["save"]("a", cases.turns(2) + cases.turns(3, tag="x"))
    with pytest.raises((StoreCorruptError, StoreUnavailableError)):
        s["save"]("a", cases.turns(6, tag="y"))  # a replace, refused as well
    assert thaw(sqlite_store(db)["get"]("a")) == cases.turns(2)


def test_a_locked_database_is_unavailable_not_lost(db):
    s = sqlite_store(db, timeout=0.05)
    s["save"]("a", cases.turns(2))
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailableError, match="chat.db"):
            s["save"]("a", cases.turns(4))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert thaw(s["get"]("a")) == cases.turns(2)


def test_memory_path_is_refused():
    with pytest.raises(ValueError, match="in_memory_store"):
        sqlite_store(":memory:")


def test_desc_names_the_file(db):
    assert sqlite_store(db)["desc"] == f"sqlite({str(db)!r})"


def test_threads_share_one_store(db):
    cases.check_threads_share_one_store(lambda: sqlite_store(db))


def test_property_against_a_dict(tmp_path_factory):
    db = tmp_path_factory.mktemp("prop") / "p.db"
    cases.property_against_a_dict(lambda: sqlite_store(db), max_examples=40)()


def test_store_contract(tmp_path):
    from toolnexus.testing import check_store_contract

    check_store_contract(lambda: sqlite_store(tmp_path / "contract.db"))


def test_racing_savers_never_tear_a_transcript(db):
    cases.check_racing_savers(lambda: sqlite_store(db))


def test_concurrent_first_use_of_new_files(tmp_path):
    """Connections racing to switch a new file to WAL wait for each other, never fail."""
    errors = []

    def use(s, k):
        for i in range(3):
            s["save"](f"c{k}", cases.turns(i + 1))

    for n in range(30):
        s = sqlite_store(tmp_path / f"new-{n}.db", durable=False)
        errors += cases.thread_errors(use, [(s, k) for k in range(4)])
    assert errors == []


def test_a_get_after_a_save_hands_back_the_value_saved(db):
    cases.check_get_hands_back_the_value_saved(lambda: sqlite_store(db), raw_for(db))


def test_a_get_reads_past_what_it_knows_and_hides_nothing(db):
    cases.check_reads_past_what_it_knows_and_hides_nothing(lambda: sqlite_store(db), raw_for(db))


# The schema before edit stamps: no "edited" column, no triggers.
_OLD_SCHEMA = """
CREATE TABLE toolnexus_conversations (
    id TEXT PRIMARY KEY, version INTEGER NOT NULL, count INTEGER NOT NULL, digest TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE toolnexus_messages (
    id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (id, seq)
) WITHOUT ROWID;
"""


def _old_file(path, transcript) -> None:
    """Write `transcript` under id "a" as a toolnexus made before edit stamps did."""
    from toolnexus.store import _rows

    texts = [_rows.encode_message(m) for m in transcript]
    with sqlite3.connect(path) as c:
        c.executescript(_OLD_SCHEMA)
        c.execute("INSERT INTO toolnexus_conversations VALUES ('a', 1, ?, ?)",
                  (len(texts), _rows.chain(_rows.GENESIS, texts)))  # fmt: skip
        c.executemany("INSERT INTO toolnexus_messages VALUES ('a', ?, ?)", enumerate(texts))
    c.close()


def test_a_file_made_before_edit_stamps_gets_them_and_reads_as_before(tmp_path):
    path = tmp_path / "old.db"
    _old_file(path, cases.turns(4))
    s = sqlite_store(path)
    assert thaw(s["get"]("a")) == cases.turns(4)
    with sqlite3.connect(path) as c:
        columns = {r[1] for r in c.execute("PRAGMA table_info(toolnexus_conversations)")}
        found = c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        triggers = {r[0] for r in found}
    c.close()
    assert "edited" in columns
    assert triggers == {"toolnexus_messages_updated", "toolnexus_messages_deleted"}
    # A second process opening it finds it done; the stamps now tell a hand edit at once.
    again = lambda: sqlite_store(path)  # noqa: E731
    cases.check_reads_past_what_it_knows_and_hides_nothing(again, raw_for(path))


def test_a_read_only_file_made_before_edit_stamps_is_read_whole_every_time(tmp_path, monkeypatch):
    """Nothing can give it the stamps: every get reads and compares all rows, as before."""
    import toolnexus.backends.sqlite.store as module
    from toolnexus.store import _rows

    path = tmp_path / "old.db"
    _old_file(path, cases.turns(4))
    ro = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert module._upgrade(ro) is False  # a read-only file that lacks them
    ro.close()
    stamped = []
    real = _rows.read_joined

    def spy(backend, id, query, memo, with_stamps=True, **how):
        stamped.append(with_stamps)
        return real(backend, id, query, memo, with_stamps, **how)

    monkeypatch.setattr(module, "_upgrade", lambda conn: False)  # as on such a file
    monkeypatch.setattr(_rows, "read_joined", spy)
    s = sqlite_store(path)
    assert thaw(s["get"]("a")) == cases.turns(4)
    raw_for(path)["set_body"]("a", 1, '{"content":"by hand","role":"user"}')
    assert thaw(s["get"]("a"))[1] == {"role": "user", "content": "by hand"}
    assert stamped == [False, False]
