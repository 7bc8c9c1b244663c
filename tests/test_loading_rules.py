"""The rules of core/loading.py no other test asserts, on fixed transcripts: a native
transcript kept as the very object, system messages kept in place (never lifted), the
policy for parts a dialect cannot carry, the facts of a history changed on the way, and
`extended`'s facts, bounds and system messages; `facts_after`'s checks."""

from __future__ import annotations

import pytest
from pyrsistent import pset, pvector

from toolnexus.core import loading
from toolnexus.core.frozen import freeze
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.translate import native_call_ids

S = {"role": "system", "content": "be brief"}
Q = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}


def call(i):
    fn = {"name": "f", "arguments": "{}"}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": fn}]}  # fmt: skip


def result(i):
    return {"role": "tool", "tool_call_id": i, "content": "4"}


T = freeze([S, Q, call("c1"), result("c1"), A])


def test_a_native_transcript_is_kept_as_the_very_object_with_its_facts():
    w = loading.whole(T, "openai")
    assert w.history is T and w.lifted == ""
    assert w.facts == ("openai", pset(["c1"]))


# Every row T is not written in (read off the records: not every message native there).
OTHERS = [d for d, rec in DIALECTS.items() if not all(rec.native(m) for m in T)]


def test_t_is_native_to_its_own_row_only():
    assert len(OTHERS) == len(DIALECTS) - 1 and "openai" not in OTHERS


@pytest.mark.parametrize("dialect", OTHERS)
def test_another_dialect_keeps_the_system_message_in_place(dialect):
    w = loading.whole(T, dialect)
    assert w.lifted == "" and w.history[0] == freeze(S)
    assert w.facts == (dialect, pset(["c1"]))


def test_the_policy_for_a_part_the_dialect_cannot_carry_is_passed_on():
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    t = freeze([{"role": "user", "content": [{"type": "text", "text": "x"}, audio]}])
    with pytest.raises(ValueError, match="anthropic cannot carry the audio"):
        loading.whole(t, "anthropic")
    w = loading.whole(t, "anthropic", "text")
    assert w.history[0]["content"][1]["text"].startswith("[audio (audio/wav) omitted")


def test_a_history_changed_on_the_way_has_its_own_facts():
    t = freeze([S, Q, call("c1")])  # the call is open: repair answers it
    w = loading.whole(t, "openai")
    assert w.history is not t and len(w.history) == 4
    assert w.facts == ("openai", pset(["c1"]))


def memo_of(prefix, dialect="openai", history_as_list=False):
    ready = loading.whole(prefix, dialect)
    ids = native_call_ids(prefix, dialect, keep_system=True)
    history = list(ready.history) if history_as_list else ready.history
    return {"messages": prefix, "history": history, "texts": ready.texts,
            "facts": (dialect, ids) if ids is not None else None}  # fmt: skip


def test_extended_needs_new_messages():
    prefix = freeze([Q, A])
    assert loading.extended(memo_of(prefix), prefix, "openai") is None


@pytest.mark.parametrize(
    "new",
    [
        [S, Q, A],  # a system message added: kept in place, still right for the dialect
        [Q, call("c2"), result("c2"), A],  # new call ids join the facts
        [Q, call("c2")],  # an open call: repair answers it, the facts are the ready ones'
    ],
)
def test_extended_gives_what_whole_gives_facts_included(new):
    prefix = freeze([S, Q, call("c1"), result("c1"), A])
    loaded = prefix.extend(freeze(new))
    got = loading.extended(memo_of(prefix), loaded, "openai")
    want = loading.whole(loaded, "openai")
    assert got is not None
    assert list(got.history) == list(want.history) and list(got.texts) == list(want.texts)
    assert got.facts == want.facts and got.facts is not None and got.lifted == ""


def test_extended_takes_a_memo_whose_history_is_a_plain_list():
    prefix = freeze([Q, A])
    loaded = prefix.extend(freeze([Q, A]))
    got = loading.extended(memo_of(prefix, history_as_list=True), loaded, "openai")
    assert got is not None and got.history == pvector(loading.whole(loaded, "openai").history)
    assert got.facts is None  # the memo's history is not its messages: facts unknown


def test_facts_after_checks_the_dialect_the_system_messages_and_the_ids_taken():
    facts = ("openai", pset(["c1"]))
    added = freeze([S, Q, call("c2"), result("c2")])
    assert loading.facts_after(facts, added, "openai") == ("openai", pset(["c1", "c2"]))
    assert loading.facts_after(facts, freeze([Q, call("c1")]), "openai") is None  # reused
    assert loading.facts_after(None, added, "openai") is None
    assert loading.facts_after(("anthropic", pset()), added, "openai") is None


def test_anthropic_keeps_a_new_system_message_in_place_on_the_quick_path_too():
    prefix = freeze([Q, A])
    loaded = prefix.extend(freeze([S, Q, A]))
    got = loading.extended(memo_of(prefix, "anthropic"), loaded, "anthropic")
    want = loading.whole(loaded, "anthropic")
    assert got is not None and list(got.history) == list(want.history)
    assert got.facts == want.facts == ("anthropic", pset())
    assert loading.facts_after(("anthropic", pset()), freeze([S, Q]), "anthropic") == (
        "anthropic",
        pset(),
    )
