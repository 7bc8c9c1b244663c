"""Behaviour shared by the durable row stores (sqlite, redis, postgres), run by their test files.

Each case takes `make_store()` (a new store object on the same backing: a restart)
and a `raw` map of backend-specific functions that reach past the store to read or
damage what it wrote: set_body(id, seq, text), drop_row(id, seq), set_version(id, v),
set_count(id, n), rows(id) -> list of row texts.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.transcript import FORMAT_VERSION
from toolnexus.store import StoreCorruptError


def msg(role: str, content: str) -> dict:
    """Return a plain message."""
    return {"role": role, "content": content}


def turns(n: int, tag: str = "") -> list[dict]:
    """Return n alternating user/assistant messages."""
    return [msg("user" if i % 2 == 0 else "assistant", f"{tag}{i}") for i in range(n)]


HOSTILE_IDS = ["../x", "a/b/../../c", "héllo 世界 🎉", "x" * 200, "../" * 66 + "z", " ", "a:m:h"]


def thread_errors(work, args: list[tuple]) -> list[BaseException]:
    """Run `work(*a)` for each `a` in `args`, all at once on threads; return what they raised.

    A test asserts the list is empty: an assert failing in a thread would not fail it.
    """
    with ThreadPoolExecutor(len(args)) as pool:
        futures = [pool.submit(work, *a) for a in args]
    return [e for e in (f.exception() for f in futures) if e is not None]


def new_id() -> str:
    """Return a fresh conversation id."""
    return "c-" + uuid.uuid4().hex[:10]


def check_round_trip_and_restart(make_store) -> None:
    """Saved transcripts (nested, unicode) read back equal, also from a new store object."""
    s, cid = make_store(), new_id()
    t = [
        msg("system", "be brief"),
        msg("user", 'héllo \x00 \n "quoted" 🎉'),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1.5"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "n": 1.25, "b": True},
    ]
    assert s["get"](cid) is None
    s["save"](cid, t)
    assert thaw(s["get"](cid)) == t
    assert thaw(make_store()["get"](cid)) == t  # a restart sees it
    assert cid in make_store()["ids"]()
    s["delete"](cid)
    assert s["get"](cid) is None and make_store()["get"](cid) is None
    assert cid not in s["ids"]()


def check_get_hands_back_the_value_saved(make_store, raw, within: int = 1) -> None:
    """A get after a save returns the very value saved (the client's memo keys on it),
    unless what is stored changed since: another writer's save, or a row edited (seen by
    the next get; by one of the next `within` on a store that keeps no edit stamp)."""
    s, cid = make_store(), new_id()
    saved = freeze(turns(4))
    s["save"](cid, saved)
    assert s["get"](cid) is saved
    other = make_store()  # another process: its save moves the head
    other["save"](cid, freeze(turns(6)))
    got = s["get"](cid)
    assert got == freeze(turns(6)) and got is not saved
    s["save"](cid, got)
    assert s["get"](cid) is got
    raw["set_body"](cid, 1, json.dumps(msg("assistant", "edited"), separators=(",", ":")))
    for _ in range(within):  # same head, a changed row: never hidden behind the memo
        edited = s["get"](cid)
        if edited is not got:
            break
    assert thaw(edited[1]) == msg("assistant", "edited") and edited is not got


def _by_hand(text: str) -> str:
    return json.dumps(msg("user", text), separators=(",", ":"))


def check_reads_past_what_it_knows_and_hides_nothing(make_store, raw, within: int = 1) -> None:
    """A get of a conversation this process has seen reads only the rows past what it
    knows (the rest are the very messages it had), and never hides a change: another
    writer's rewrite of an early row with the same count (the digest tells), a row
    changed by hand behind the stores' back with the head as it was (the next get; one
    of the next `within` on a store that keeps no edit stamp), a row dropped by hand."""
    s, other, cid = make_store(), make_store(), new_id()
    s["save"](cid, turns(4))
    s["save"](cid, s["get"](cid).extend(freeze(turns(2, "b"))))  # an append: known by its head
    mine = s["get"](cid)
    other["save"](cid, other["get"](cid).extend(freeze(turns(2, "c"))))
    got = s["get"](cid)
    assert thaw(got) == turns(4) + turns(2, "b") + turns(2, "c")
    assert all(got[i] is mine[i] for i in range(6))  # read past them, not again
    assert s["get"](cid) is got  # nothing new: the very value
    rewritten = other["get"](cid).set(1, freeze(msg("assistant", "rewritten")))
    other["save"](cid, rewritten)  # history rewritten elsewhere, the same count
    got = s["get"](cid)
    assert got == rewritten and len(got) == 8
    s["save"](cid, got.append(freeze(msg("user", "more"))))
    known = s["get"](cid)
    raw["set_body"](cid, 2, _by_hand("by hand"))  # behind the stores' back: head unchanged
    for _ in range(within):
        edited = s["get"](cid)
        if edited is not known:
            break
    assert thaw(edited[2]) == msg("user", "by hand") and len(edited) == 9
    assert thaw(make_store()["get"](cid)) == thaw(edited)  # as every process reads it
    raw["drop_row"](cid, 3)  # a row gone by hand, the head unchanged: corrupt, at once
    for store in (s, make_store()):
        with pytest.raises(StoreCorruptError, match="row"):
            store["get"](cid)


def check_empty_transcript(make_store) -> None:
    """An empty transcript is stored as empty, not as absent."""
    s, cid = make_store(), new_id()
    s["save"](cid, turns(3))
    s["save"](cid, [])
    assert make_store()["get"](cid) == freeze([])


def check_hostile_ids(make_store) -> None:
    """Path-like, unicode and long ids are kept apart and listed as given."""
    s = make_store()
    tag = new_id()
    ids = [tag + i for i in HOSTILE_IDS] + [tag]
    for n, cid in enumerate(ids):
        s["save"](cid, turns(n + 1, tag=cid))
    again = make_store()
    for n, cid in enumerate(ids):
        assert thaw(again["get"](cid)) == turns(n + 1, tag=cid)
    assert set(ids) <= set(again["ids"]())


def check_extend_appends(make_store, raw) -> None:
    """A save that extends the stored transcript writes only the new rows.

    Shown by damaging a stored row behind the store's back: an append leaves it as
    it is, a replace would have rewritten it.
    """
    s, cid = make_store(), new_id()
    s["save"](cid, turns(4))
    t = s["get"](cid)
    marker = json.dumps(msg("user", "changed behind the store's back"))
    raw["set_body"](cid, 0, marker)
    s["save"](cid, t.extend(freeze(turns(2, tag="new"))))  # warm: same objects as the get
    assert raw["rows"](cid)[0] == marker
    # Cold: a new store object (another process) with equal but not identical messages.
    cold = make_store()
    cold["save"](cid, turns(4) + turns(2, tag="new") + [msg("user", "more")])
    rows = raw["rows"](cid)
    assert rows[0] == marker and len(rows) == 7
    assert json.loads(rows[-1]) == msg("user", "more")


def check_rewrite_replaces(make_store, raw) -> None:
    """A save that rewrites history (edited, trimmed, other) replaces all rows."""
    s, cid = make_store(), new_id()
    s["save"](cid, turns(6))
    edited = turns(6)
    edited[2] = msg("user", "edited")
    s["save"](cid, edited)
    assert thaw(make_store()["get"](cid)) == edited
    s["save"](cid, edited[3:])  # trimmed, as a capped store does
    assert thaw(make_store()["get"](cid)) == edited[3:]
    assert len(raw["rows"](cid)) == 3
    s["save"](cid, turns(2, tag="other"))  # shorter and different
    assert thaw(make_store()["get"](cid)) == turns(2, tag="other")
    # Same length, same objects except one: the identity memo must not call it a prefix.
    t = s["get"](cid)
    s["save"](cid, t.set(0, freeze(msg("user", "swapped"))))
    assert thaw(make_store()["get"](cid)) == [msg("user", "swapped"), turns(2, "other")[1]]


def check_interleaved_writers(make_store) -> None:
    """Two store objects saving in turn: the store always holds the last save."""
    a, b, cid = make_store(), make_store(), new_id()
    a["save"](cid, turns(2))
    ta = a["get"](cid)
    b["save"](cid, b["get"](cid).append(freeze(msg("user", "from b"))))
    a["save"](cid, ta.append(freeze(msg("user", "from a"))))  # not an extension of b's
    assert thaw(b["get"](cid)) == turns(2) + [msg("user", "from a")]
    b["save"](cid, b["get"](cid).append(freeze(msg("assistant", "b again"))))
    assert thaw(a["get"](cid)) == turns(2) + [msg("user", "from a"), msg("assistant", "b again")]


def check_racing_savers(make_store) -> None:
    """Threads saving to ONE id (no lock) never leave a mix: get is always one whole save."""
    cid, saved = new_id(), set()

    def key(t) -> tuple:
        return tuple(m["content"] for m in t)

    def work(n: int) -> None:
        store = make_store()  # a store object per thread, like separate processes
        t = freeze([])
        for i in range(12):
            current = store["get"](cid)
            if current is not None:
                assert key(current) in saved, "a torn transcript"
                t = current if i % 3 else t  # sometimes extend theirs, sometimes ours
            t = t.append(freeze(msg("user", f"{n}-{i}")))
            saved.add(key(t))
            store["save"](cid, t)

    errors = thread_errors(work, [(n,) for n in range(4)])
    assert errors == [], errors
    assert key(make_store()["get"](cid)) in saved


def check_threads_share_one_store(make_store, messages: int = 20) -> None:
    """4 threads append to their own ids on ONE store object: nothing lost, reads current."""
    s = make_store()

    def work(n):
        t = freeze([])
        for i in range(messages):
            t = t.append(freeze(msg("user", f"{n}-{i}")))
            s["save"](f"thread-{n}", t)
            assert s["get"](f"thread-{n}") == t

    errors = thread_errors(work, [(n,) for n in range(4)])
    assert errors == [], errors
    assert [len(s["get"](f"thread-{n}")) for n in range(4)] == [messages] * 4


_TWO = '{"role": "user", "content": "a"}%s{"role": "user", "content": "b"}'


def check_corruption(make_store, raw) -> None:
    """Bad data reads as StoreCorruptError naming the id: never None, never skipped rows."""
    s = make_store()
    cases = {
        "not json": lambda cid: raw["set_body"](cid, 1, "{not json"),
        "not a message": lambda cid: raw["set_body"](cid, 1, "42"),
        "no role": lambda cid: raw["set_body"](cid, 1, '{"content": "x"}'),
        # Two messages in one row: never read as two (a store that joins its rows into
        # one text, split again by a separator, must still see a row that holds one).
        "two in a row, by the separator": lambda cid: raw["set_body"](cid, 1, _TWO % "\x1e"),
        "two in a row, by a comma": lambda cid: raw["set_body"](cid, 1, _TWO % ","),
        "missing row": lambda cid: raw["drop_row"](cid, 1),
        "count": lambda cid: raw["set_count"](cid, 5),
        "version": lambda cid: raw["set_version"](cid, FORMAT_VERSION + 98),
    }
    for name, damage in cases.items():
        cid = new_id() + "-" + name.replace(" ", "-")
        s["save"](cid, turns(3))
        damage(cid)
        for store in (s, make_store()):
            with pytest.raises(StoreCorruptError) as e:
                store["get"](cid)
            assert cid in str(e.value), name
        if name == "version":
            assert str(FORMAT_VERSION + 98) in str(e.value)
        # A full save over bad data repairs it (the user's explicit write wins).
        s["save"](cid, turns(2))
        assert thaw(make_store()["get"](cid)) == turns(2)


def check_large_transcript(make_store) -> None:
    """Thousands of messages go in and come back in order (chunked writes)."""
    s, cid = make_store(), new_id()
    t = turns(2500)
    s["save"](cid, t)
    s["save"](cid, t + turns(2, tag="x"))
    assert thaw(make_store()["get"](cid)) == t + turns(2, tag="x")


# ---- a property: random save/extend/rewrite/delete/restart against a dict ----

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_message = st.builds(
    lambda role, content, extra: {"role": role, "content": content, **extra},
    st.sampled_from(["user", "assistant", "tool", "system"]),
    _text | st.none(),
    st.dictionaries(
        st.sampled_from(["name", "tool_call_id", "meta"]),
        _text | st.integers() | st.lists(st.integers(), max_size=3),
        max_size=2,
    ),
)
_msgs = st.lists(_message, max_size=4)
_op = st.one_of(
    st.tuples(st.just("save"), st.integers(0, 2), _msgs),
    st.tuples(st.just("extend"), st.integers(0, 2), _msgs),
    st.tuples(st.just("extend_copy"), st.integers(0, 2), _msgs),
    st.tuples(st.just("rewrite"), st.integers(0, 2), _message),
    st.tuples(st.just("trim"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.none()),
    st.tuples(st.just("restart"), st.none(), st.none()),
)


def property_against_a_dict(make_store, max_examples: int = 25):
    """Return a test: any sequence of operations leaves the store equal to a dict model."""

    @settings(max_examples=max_examples, deadline=None)
    @given(ops=st.lists(_op, max_size=12))
    def test(ops):
        tag = new_id()
        ids = [f"{tag}-{i}" for i in range(3)]
        store, model = make_store(), {}
        for kind, which, arg in ops:
            cid = ids[which] if which is not None else None
            old = model.get(cid)
            if kind == "restart":
                store = make_store()
                continue
            if kind == "delete":
                store["delete"](cid)
                model.pop(cid, None)
                continue
            if kind == "save":
                new = freeze(arg)
            elif kind == "extend":  # warm path: extend what the store returned
                current = store["get"](cid)
                new = (current if current is not None else freeze([])).extend(freeze(arg))
            elif kind == "extend_copy":  # cold path: equal values, new objects
                new = freeze(thaw(old or []) + arg)
            elif kind == "rewrite":
                base = old or freeze([arg])
                new = base.set(len(base) // 2, freeze(arg))
            else:
                new = (old or freeze([]))[arg:]
            store["save"](cid, new)
            model[cid] = new
            assert store["get"](cid) == new
        fresh = make_store()
        for cid in ids:
            assert fresh["get"](cid) == model.get(cid)
        assert {i for i in fresh["ids"]() if i.startswith(tag)} == set(model)

    return test


def store_maker(kind: str, request, tmp_path, unique: str, tag: str):
    """Yield make_store() for a shipped store kind (memory, file, sqlite, redis, postgres):
    a new store object on the same backing each call; what it made is removed after."""
    from toolnexus.store import file_store, in_memory_store, sqlite_store

    if kind == "memory":
        backing: dict = {}
        yield lambda: in_memory_store(backing)
    elif kind == "file":
        yield lambda: file_store(tmp_path / "files")
    elif kind == "sqlite":
        yield lambda: sqlite_store(tmp_path / "chat.db")
    elif kind == "redis":
        import redis

        from toolnexus.store import redis_store

        url = request.getfixturevalue("redis_url")
        prefix = f"tnx-{tag}:{unique}:"
        yield lambda: redis_store(url, prefix=prefix)
        r = redis.Redis.from_url(url)
        keys = list(r.scan_iter(match=prefix + "*"))
        if keys:
            r.delete(*keys)
        r.close()
    else:
        from psycopg_pool import ConnectionPool

        from toolnexus.store import postgres_store

        with ConnectionPool(request.getfixturevalue("postgres_dsn"), min_size=1) as pool:
            table = f"tnx_{unique}"
            yield lambda: postgres_store(pool, table)
            with pool.connection() as c:
                c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")
