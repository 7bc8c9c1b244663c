"""The message-log contract: one state machine, run against every backend and a list model."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from toolnexus.backends.sqlite.log import trigram_supported, word_prefilter
from toolnexus.history import in_memory_log, make_entry, postgres_log, sqlite_log
from toolnexus.history.entry import check_query, fold, parse_when, select, utc

# Text that a naive backend would interpret: SQL wildcards, FTS5 operators, quotes,
# escapes, and characters whose case folding is not one-to-one.
HOSTILE = [
    "'", '"', "%", "_", "\\", "NEAR", "near(", "AND", "OR", "NOT", "*", "^", "(", ")", ":",
    "-", "+", "{a b}", "🎉", "👩‍💻", "ÉTÉ", "été", "Straße", "SS", "İ", "ﬁ", " ", "\n", "a",
    "ab", "abc", "NEAR/2", '"x"*', "%_%", "\\%", "col:val",
]  # fmt: skip

safe_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
texts = st.lists(st.sampled_from(HOSTILE) | st.text(safe_chars, max_size=6), max_size=6).map(
    "".join
)
zones = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7))])
# A few instants, so equal timestamps (ties) are common.
BASE = datetime(2026, 5, 1, tzinfo=UTC)
instants = st.builds(
    lambda d, us, tz: (BASE + timedelta(days=d, microseconds=us)).astimezone(tz),
    st.integers(0, 4),
    st.sampled_from([0, 1, 999_999]),
    zones,
)
conversations = st.sampled_from(["c1", "c2", "üser 3"])
entries = st.builds(
    make_entry,
    conversation_id=conversations | st.none(),
    text=texts,
    direction=st.sampled_from(["user", "ai"]),
    timestamp=instants,
)


def as_dicts(found):
    return [dict(e) for e in found]


class LogContract(RuleBasedStateMachine):
    """Any message log behaves like `select` over the list of entries recorded so far."""

    log: dict = {}  # set per backend by `contract`

    recorded = Bundle("recorded")

    @initialize()
    def start_empty(self):
        self.log["clear"]()
        self.model = []

    def _add(self, e):
        if e["id"] not in {m["id"] for m in self.model}:
            self.model.append(e)

    @rule(target=recorded, e=entries)
    def record(self, e):
        self.log["record"](e)
        self._add(e)
        return e

    @rule(es=st.lists(entries, max_size=4))
    def record_many(self, es):
        self.log["record_many"](es)
        for e in es:
            self._add(e)

    @rule(e=recorded)
    def record_again_is_a_no_op(self, e):
        changed = e.set("text", e["text"] + " changed")
        self.log["record"](changed)  # ignored unless `e` was cleared meanwhile
        self._add(changed)

    @rule(
        data=st.data(),
        since=st.none() | instants,
        until=st.none() | instants,
        limit=st.none() | st.integers(0, 4),
        conversation_id=st.none() | conversations,
    )
    def query(self, data, since, until, limit, conversation_id):
        if self.model and data.draw(st.booleans()):
            text = data.draw(st.sampled_from([m["text"] for m in self.model]))
            i = data.draw(st.integers(0, len(text)))
            j = data.draw(st.integers(i, len(text)))
            contains = data.draw(st.sampled_from([str.upper, str.lower, str]))(text[i:j])
        else:
            contains = data.draw(st.none() | st.sampled_from(HOSTILE) | texts)
        q = dict(
            contains=contains,
            since=since,
            until=until,
            limit=limit,
            conversation_id=conversation_id,
        )
        expected = select(self.model, check_query(**q))
        assert as_dicts(self.log["query"](**q)) == as_dicts(expected)

    @rule(before=st.none() | instants, conversation_id=st.none() | conversations)
    def clear(self, before, conversation_id):
        def gone(m):
            old = before is None or m["timestamp"] <= before
            return old and conversation_id in (None, m["conversation_id"])

        keep = [m for m in self.model if not gone(m)]
        removed = self.log["clear"](before=before, conversation_id=conversation_id)
        assert removed == len(self.model) - len(keep)
        self.model = keep

    @rule(data=st.data())
    def naive_datetimes_are_refused(self, data):
        naive = datetime(2026, 5, 2, 12)
        which = data.draw(st.sampled_from(["since", "until", "before", "record"]))
        with pytest.raises(ValueError, match="timezone-aware"):
            if which == "before":
                self.log["clear"](before=naive)
            elif which == "record":
                e = make_entry("c1", "naive", "user", BASE)
                self.log["record"](dict(e, timestamp=naive))
            else:
                self.log["query"](**{which: naive})

    @invariant()
    def everything_is_there_oldest_first(self):
        got = as_dicts(self.log["query"]())
        assert got == as_dicts(select(self.model, check_query()))


def contract(log: dict, max_examples: int) -> None:
    """Run the shared contract against `log`."""
    machine = type("Contract", (LogContract,), {"log": log})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=max_examples, stateful_step_count=12)
    )


def test_contract_in_memory():
    contract(in_memory_log(), 60)


@pytest.mark.parametrize("fts", ["trigram", "unicode61"])
def test_contract_sqlite(tmp_path, fts):
    if fts == "trigram" and not trigram_supported():
        pytest.skip("this SQLite has no trigram tokenizer")
    log = sqlite_log(tmp_path / "log.db", fts=fts)
    assert log["fts"] == fts
    try:
        contract(log, 40)
    finally:
        log["close"]()


@pytest.fixture
def pg_log(postgres_dsn, unique):
    import psycopg

    log = postgres_log(postgres_dsn, table=unique)
    yield log
    log["close"]()
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{unique}"')


def test_contract_postgres(pg_log):
    contract(pg_log, 25)


def test_postgres_records_a_large_batch_whole_or_not_at_all(pg_log, postgres_dsn, unique):
    """Past one INSERT's worth of rows the batch spans statements, still all or nothing."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    batch = [make_entry("c", f"m{i}", "user", t0 + timedelta(seconds=i)) for i in range(1201)]
    pg_log["record_many"](batch)
    assert [e["text"] for e in pg_log["query"](limit=1000)][-1] == "m1200"
    assert pg_log["clear"]() == 1201
    import psycopg

    with psycopg.connect(postgres_dsn) as conn:  # a row the database itself refuses
        conn.execute(f"ALTER TABLE \"{unique}\" ADD CONSTRAINT no_boom CHECK (text <> 'boom')")
    broken = [*batch[:1100], make_entry("c", "boom", "user", t0)]  # in the third INSERT
    with pytest.raises(psycopg.errors.CheckViolation):
        pg_log["record_many"](broken)
    assert pg_log["query"]() == ()


# ---- hostile text, one by one, on every backend ------------------------------


@pytest.fixture(params=["memory", "sqlite", "sqlite-words", "postgres"])
def any_log(request, tmp_path):
    if request.param == "memory":
        yield in_memory_log()
    elif request.param.startswith("sqlite"):
        fts = "unicode61" if request.param == "sqlite-words" else "auto"
        log = sqlite_log(tmp_path / "h.db", fts=fts)
        yield log
        log["close"]()
    else:
        yield request.getfixturevalue("pg_log")


@pytest.mark.parametrize(
    "needle",
    ['"', "'", "%", "_", "\\", "NEAR", "near(a b)", "*", "a OR b", "x AND", '"quoted"', "🎉"],
)
def test_hostile_needles_are_literal(any_log, needle):
    texts = [
        'he said "quoted" twice',
        "100% sure",
        "snake_case",
        "C:\\path",
        "NEAR the end",
        "near(a b) call",
        "glob *.py",
        "a OR b",
        "x AND y",
        "party 🎉",
        "it's",
        "plain words",
    ]
    for i, t in enumerate(texts):
        any_log["record"](make_entry("c", t, "user", BASE + timedelta(minutes=i)))
    got = [e["text"] for e in any_log["query"](contains=needle)]
    assert got == [t for t in texts if fold(needle) in fold(t)]
    assert got  # every needle is in at least one text


def test_case_insensitive_beyond_ascii(any_log):
    any_log["record"](make_entry("c", "l'été est chaud", "user", BASE))
    any_log["record"](make_entry("c", "ÇA VA", "ai", BASE))
    assert [e["text"] for e in any_log["query"](contains="ÉTÉ")] == ["l'été est chaud"]
    assert [e["text"] for e in any_log["query"](contains="ça va")] == ["ÇA VA"]


@pytest.mark.parametrize("blank", ["", "   ", "\t\n", "\u3000"])
def test_a_blank_contains_means_no_filter(any_log, blank):
    """Fails on the old code for whitespace: it searched for the spaces and found nothing."""
    any_log["record"](make_entry("c", "nospace", "user", BASE))
    any_log["record"](make_entry("c", "two words", "ai", BASE + timedelta(minutes=1)))
    assert [e["text"] for e in any_log["query"](contains=blank)] == ["nospace", "two words"]
    assert [e["text"] for e in any_log["query"](contains=" w")] == ["two words"]  # not blank


@given(st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0c\u00a0\u2003\u3000xÉ"), max_size=6))
def test_a_query_filters_on_text_exactly_when_contains_is_not_blank(text):
    folded = check_query(contains=text)["contains"]
    assert (folded is None) == (text.strip() == "")
    assert folded is None or folded == fold(text)  # a needle is kept as given, spaces too


def test_limit_keeps_the_newest_oldest_first(any_log):
    for d in (3, 1, 2, 5, 4):
        any_log["record"](make_entry("c", f"day {d}", "user", BASE + timedelta(days=d)))
    assert [e["text"] for e in any_log["query"](limit=2)] == ["day 4", "day 5"]
    assert any_log["query"](limit=0) == ()
    assert len(any_log["query"](limit=10)) == 5


def test_since_until_inclusive_and_clear_counts(any_log):
    stamps = [BASE + timedelta(hours=h) for h in range(5)]
    for i, ts in enumerate(stamps):
        any_log["record"](make_entry("c", f"m{i}", "ai", ts))
    got = any_log["query"](since=stamps[1], until=stamps[3])
    assert [e["text"] for e in got] == ["m1", "m2", "m3"]
    assert all(e["timestamp"].tzinfo is not None for e in got)
    assert any_log["clear"](before=stamps[1]) == 2  # <= before
    assert any_log["clear"]() == 3
    assert any_log["query"]() == ()


def test_conversation_filter(any_log):
    any_log["record"](make_entry("alice", "secret plan", "user", BASE))
    any_log["record"](make_entry("bob", "secret cake", "user", BASE))
    any_log["record"](make_entry(None, "secret none", "user", BASE))
    assert [e["text"] for e in any_log["query"](conversation_id="bob")] == ["secret cake"]
    assert len(any_log["query"](contains="secret")) == 3


# ---- entries and pure helpers --------------------------------------------------


@given(ts=st.datetimes(timezones=st.timezones()), text=texts)
def test_make_entry_normalizes_to_utc(ts, text):
    try:
        expected = ts.astimezone(UTC)
    except OverflowError:
        return  # not a representable UTC instant
    e = make_entry("c", text, "ai", ts)
    assert e["timestamp"] == expected and e["timestamp"].utcoffset() == timedelta(0)
    assert set(e) == {"id", "conversation_id", "text", "timestamp", "direction"}


def test_make_entry_validation():
    with pytest.raises(ValueError, match="timezone-aware"):
        make_entry("c", "hi", "user", datetime(2026, 5, 1))
    with pytest.raises(ValueError, match="direction"):
        make_entry("c", "hi", "assistant")
    with pytest.raises(ValueError, match="NUL"):
        make_entry("c", "a\x00b", "user")
    with pytest.raises(ValueError, match="surrogate"):
        make_entry("c", "\ud800", "user")
    with pytest.raises(ValueError, match="conversation_id"):
        make_entry("", "hi", "user")
    assert make_entry("c", "hi", "user")["id"] != make_entry("c", "hi", "user")["id"]


@given(st.lists(entries, max_size=12), st.integers(0, 15), st.none() | st.sampled_from(HOSTILE))
def test_select_limit_is_a_suffix_of_the_unlimited_answer(es, limit, contains):
    everything = select(es, check_query(contains=contains))
    limited = select(es, check_query(contains=contains, limit=limit))
    assert len(limited) == min(limit, len(everything))
    assert limited == (everything[-limit:] if limit else ())
    assert [e["timestamp"] for e in everything] == sorted(e["timestamp"] for e in everything)
    needle = "" if contains is None or contains.isspace() else contains  # blank: no filter
    assert all(fold(needle) in fold(e["text"]) for e in everything)
    if not needle:
        assert len(everything) == len(es)


@given(st.dates(), st.times())
def test_parse_when_dates_cover_the_whole_day(d, t):
    start, end = parse_when(d.isoformat()), parse_when(d.isoformat(), end=True)
    instant = datetime.combine(d, t, tzinfo=UTC)
    assert start <= instant <= end
    assert parse_when(instant.isoformat()) == instant
    assert parse_when(instant.isoformat().replace("+00:00", "Z")) == instant


@given(st.datetimes(timezones=st.timezones()))
def test_parse_when_roundtrips_offsets(dt):
    try:
        expected = utc(dt)
    except OverflowError:
        return
    assert parse_when(dt.isoformat()) == expected


@pytest.mark.parametrize("bad", ["", "yesterdayish", "2026-13-01", "08/05/2026", "soon", None])
def test_parse_when_rejects_malformed(bad):
    with pytest.raises(ValueError):
        parse_when(bad)


def test_parse_when_relative_days():
    now = lambda: datetime(2026, 5, 9, 1, tzinfo=timezone(timedelta(hours=3)))  # noqa: E731
    assert parse_when("yesterday", now=now) == datetime(2026, 5, 7, tzinfo=UTC)
    assert parse_when("today", end=True, now=now).date() == date(2026, 5, 8)


@given(text=texts, data=st.data())
def test_word_prefilter_never_rules_out_a_match(text, data):
    """The unicode61 fallback query matches every text that contains the needle."""
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    needle = fold(text[i:j])
    query = word_prefilter(needle)
    if query is None:
        return
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize = 'unicode61 remove_diacritics 0')")
    con.execute("INSERT INTO f (t) VALUES (?)", (fold(text),))
    assert con.execute("SELECT count(*) FROM f WHERE f MATCH ?", (query,)).fetchone() == (1,)


# ---- concurrency and secrets ---------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_threads_record_concurrently(tmp_path, backend):
    log = in_memory_log() if backend == "memory" else sqlite_log(tmp_path / "t.db")

    def work(n):
        for i in range(50):
            log["record"](make_entry(f"c{n}", f"thread {n} msg {i}", "user"))
            log["query"](contains=f"thread {n}", limit=3)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(log["query"]()) == 200
    assert len(log["query"](conversation_id="c2")) == 50


WRITER = """
import sys
from toolnexus.history import sqlite_log, make_entry
log = sqlite_log(sys.argv[1])
for i in range(60):
    log["record"](make_entry(sys.argv[2], f"{sys.argv[2]} says {i}", "user"))
"""


def test_sqlite_processes_share_one_file(tmp_path):
    db = str(tmp_path / "shared.db")
    sqlite_log(db)["close"]()  # create the schema once, as an application would
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, db, f"p{n}"]) for n in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    log = sqlite_log(db)
    assert len(log["query"]()) == 180
    assert len(log["query"](contains="P1 SAYS")) == 60


def test_sqlite_reopens_with_its_index_kind(tmp_path):
    sqlite_log(tmp_path / "w.db", fts="unicode61")["close"]()
    again = sqlite_log(tmp_path / "w.db")  # auto would pick trigram for a new file
    assert again["fts"] == "unicode61"


def test_postgres_desc_hides_the_password(postgres_dsn, unique):
    import psycopg

    dsn = postgres_dsn.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    log = postgres_log(dsn, table=unique)
    try:
        assert "s3cret" not in repr(log) and log["index"] in ("trigram", "scan")
    finally:
        log["close"]()
        with psycopg.connect(postgres_dsn) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{unique}"')


def test_postgres_unreachable_is_a_clear_error():
    from toolnexus.store import StoreUnavailableError

    with pytest.raises(StoreUnavailableError) as info:
        postgres_log("postgresql://me:s3cret@127.0.0.1:1/none", timeout=1)
    assert "s3cret" not in str(info.value)


def test_postgres_table_name_is_checked():
    with pytest.raises(ValueError, match="identifier"):
        postgres_log("postgresql://x@127.0.0.1:1/none", table='x"; drop table y; --')


# ---- entry_fields: the one-pass check a log writes rows from --------------------------

_FIELD_VALUES = st.one_of(
    st.none(),
    st.text(max_size=6),
    st.sampled_from(["user", "ai", "", "x\x00", "\ud800"]),
    st.integers(),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))])),
    st.datetimes(),  # naive: refused
)


_VALID = {"id": "e1", "conversation_id": "c", "text": "hi", "direction": "ai",
          "timestamp": datetime(2026, 5, 8, 14, tzinfo=timezone(timedelta(hours=2)))}  # fmt: skip


@settings(max_examples=300)
@example(_VALID)
@example({**_VALID, "id": None})
@example({**_VALID, "id": None, "timestamp": None, "conversation_id": None, "text": ""})
@example({**_VALID, "timestamp": datetime(2026, 5, 8, tzinfo=UTC), "extra": 1})
@given(
    st.dictionaries(
        st.sampled_from(["id", "conversation_id", "text", "timestamp", "direction", "extra"]),
        _FIELD_VALUES,
    )
)
def test_entry_fields_accepts_and_refuses_exactly_what_entry_does(raw):
    """entry_fields (one lookup per field, no copy) agrees with building the entry anew."""
    from toolnexus.core.frozen import FrozenMap
    from toolnexus.history.entry import check_entry, entry, entry_fields

    try:
        made = entry(raw["conversation_id"], raw["text"], raw["direction"],
                     raw["timestamp"], raw["id"])  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        with pytest.raises(type(e) if not isinstance(e, KeyError) else ValueError):
            entry_fields(raw)
        return
    fields = entry_fields(raw)
    keys = ("id", "conversation_id", "text", "timestamp", "direction")
    fresh = raw["id"] is None  # a fresh id each time: compared by shape only
    now = raw["timestamp"] is None  # the time of the call: compared by shape only
    same = ("conversation_id", "text", "direction") if now else keys[1:]
    got = dict(zip(keys, fields, strict=True))
    assert [got[k] for k in same] == [made[k] for k in same] and fields[3].tzinfo is UTC
    assert len(fields[0]) == 32 if fresh else fields[0] == made["id"]
    checked = check_entry(FrozenMap(raw))
    drop = ("id", "timestamp") if now else ("id",)
    assert checked.discard(drop[0]).discard(drop[-1]) == made.discard(drop[0]).discard(drop[-1])
    assert check_entry(made) is made  # an exact entry comes back as it is


def _hold_a_write_lock(path, ready) -> None:
    """In another process: hold a new file's write lock for a moment, as a second chat
    starting at the same time does while it sets the file up."""
    import sqlite3
    import time

    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    ready.set()
    time.sleep(0.3)
    con.execute("COMMIT")
    con.close()


def test_a_log_opened_while_another_process_sets_up_the_file_waits_for_it(tmp_path):
    """Fails on the old main (seen once in a full run: two chat processes starting on one
    id): switching a new file to WAL while another process held its write lock failed at
    once with "database is locked" (SQLite does not wait there), where the store retried."""
    import multiprocessing

    path = str(tmp_path / "log.db")
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_a_write_lock, args=(path, ready))
    holder.start()
    assert ready.wait(30)
    try:
        log = sqlite_log(path)  # waits until the other process lets go, then opens
        log["record"](make_entry("c1", "hello", "user"))
        assert [e["text"] for e in log["query"](conversation_id="c1")] == ["hello"]
        log["close"]()
    finally:
        holder.join(30)
