"""The rules of store/scoped.py no other test asserts, on a log made of plain functions that
record what reaches them: entries (plain dicts and PMaps) mapped to the scope's keys by
record, record_many and the fused "rows"; a query's ids and limit; `before` passed to
clear; the identity scope; what align_log returns or refuses."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.scope import IDENTITY, scope_of
from toolnexus.store import in_memory_store, namespaced
from toolnexus.store.fused import declared, derive, fuse
from toolnexus.store.scoped import align_log, scoped_log

A = scope_of(namespaced("a", in_memory_store()))


def plain_log(entries=()):
    """A log of plain functions over a list; `seen` records what each operation got."""
    kept = [FrozenMap(e) for e in entries]
    seen: dict[str, list] = {"record": [], "record_many": [], "rows": [], "query": [], "clear": []}

    def query(**filters):
        seen["query"].append(filters)
        cid, limit = filters.get("conversation_id"), filters.get("limit")
        found = [e for e in kept if cid is None or e["conversation_id"] == cid]
        return tuple(found if limit is None else found[-limit:])

    def clear(before=None, *, conversation_id=None):
        seen["clear"].append((before, conversation_id))
        return 1

    log = derive(
        {"desc": "plain"},
        record=seen["record"].append,
        record_many=seen["record_many"].append,
        query=query,
        clear=clear,
        fused={"rows": fuse(seen["rows"].append, "record", "record_many", where="db-1")},
    )
    return log, seen


def test_record_maps_the_id_of_a_plain_dict_and_of_a_pmap_and_keeps_their_kind():
    log, seen = plain_log()
    scoped = scoped_log(A, log)
    scoped["record"]({"conversation_id": "c", "text": "hi"})
    scoped["record"](FrozenMap({"conversation_id": "c", "text": "hi"}))
    scoped["record"]({"text": "no id"})  # an entry without an id goes as it is
    plain, frozen, bare = seen["record"]
    assert plain == {"conversation_id": "a:c", "text": "hi"} and type(plain) is dict
    assert isinstance(frozen, FrozenMap) and frozen == FrozenMap(
        {"conversation_id": "a:c", "text": "hi"}
    )
    assert bare == {"text": "no id"}


def test_record_many_and_the_fused_rows_map_every_id():
    log, seen = plain_log()
    scoped = scoped_log(A, log)
    scoped["record_many"]([{"conversation_id": "c"}, {"conversation_id": "d"}])
    assert seen["record_many"] == [[{"conversation_id": "a:c"}, {"conversation_id": "a:d"}]]
    rows = declared(scoped, "rows")
    assert rows is not None and rows.where == "db-1"
    assert rows.needs == frozenset({"record", "record_many"})
    rows.call([{"conversation_id": "c"}])
    assert seen["rows"] == [[{"conversation_id": "a:c"}]]


def test_a_log_without_record_many_or_rows_gets_neither():
    log, _ = plain_log()
    bare = {k: v for k, v in log.items() if k not in ("record_many", "fused")}
    scoped = scoped_log(A, bare)
    assert "record_many" not in scoped and declared(scoped, "rows") is None


def test_the_scoped_log_says_what_it_is():
    log, _ = plain_log()
    scoped = scoped_log(A, log)
    assert scoped["desc"] == f"scoped({A!r}, plain)" and scoped["unscoped"] is log
    assert scoped["scope"] is A
    nameless = {k: v for k, v in log.items() if k != "desc"}
    assert scoped_log(A, nameless)["desc"] == f"scoped({A!r}, message_log)"


def test_the_identity_scope_gives_the_log_back_as_a_copy():
    log, _ = plain_log()
    same = scoped_log(IDENTITY, log)
    assert same == log and same is not log


def test_a_query_by_id_asks_for_the_key_and_answers_with_the_scope_s_id():
    log, seen = plain_log([{"conversation_id": "a:c", "text": "hi"}])
    found = scoped_log(A, log)["query"](conversation_id="c", limit=5)
    assert [dict(e) for e in found] == [{"conversation_id": "c", "text": "hi"}]
    assert seen["query"] == [{"conversation_id": "a:c", "limit": 5}]
    with pytest.raises(TypeError, match="^conversation_id must be a string, got int$"):
        scoped_log(A, log)["query"](conversation_id=5)


def test_a_query_s_limit_applies_after_the_scope_and_may_exceed_what_there_is():
    entries = [{"conversation_id": k, "text": t}
               for k, t in [("a:c", "1"), ("b:c", "x"), ("a:d", "2"), ("a:c", "3")]]  # fmt: skip
    scoped = scoped_log(A, plain_log(entries)[0])
    assert [e["text"] for e in scoped["query"](limit=2)] == ["2", "3"]
    assert [e["text"] for e in scoped["query"](limit=5)] == ["1", "2", "3"]
    assert [e["text"] for e in scoped["query"]()] == ["1", "2", "3"]


def test_clear_passes_before_on_with_the_keys_of_the_scope_only():
    entries = [{"conversation_id": k} for k in ("a:c", "b:c", "a:d")]
    log, seen = plain_log(entries)
    scoped = scoped_log(A, log)
    assert scoped["clear"]("2026-01-01") == 2
    assert seen["clear"] == [("2026-01-01", "a:c"), ("2026-01-01", "a:d")]
    seen["clear"].clear()
    assert scoped["clear"]("2026-02-02", conversation_id="c") == 1
    assert seen["clear"] == [("2026-02-02", "a:c")]


def test_align_log_gives_back_what_is_no_log_and_what_it_may_not_scope():
    store = namespaced("a", in_memory_store())
    log, _ = plain_log()
    assert align_log(store, "not a log") == "not a log"
    assert align_log(store, log, auto=False) is log


def test_a_log_the_user_scoped_otherwise_is_refused_not_unwrapped():
    store = namespaced("a", in_memory_store())
    log, _ = plain_log()
    theirs = scoped_log(scope_of(namespaced("b", in_memory_store())), log)
    with pytest.raises(ValueError, match="message_log is scoped .* but the store"):
        align_log(store, theirs)
    mine = align_log(store, log)
    assert mine["scoped_by_client"] and mine["scope"] == A
    assert align_log(namespaced("c", in_memory_store()), mine)["scope"] == scope_of(
        namespaced("c", in_memory_store())
    )  # the client's own scoping is unwrapped, then scoped anew


def test_a_log_declaring_a_scope_of_no_steps_counts_as_unscoped():
    from toolnexus.core.scope import Scope

    store = namespaced("a", in_memory_store())
    log, _ = plain_log()
    empty = {**log, "scope": Scope((), lambda i: i, lambda k: k)}  # maps nothing, as IDENTITY
    assert align_log(store, empty)["scope"] == A
