"""A load made ready from the memo of what its first messages became (core.loading.extended)
equals the whole pass over it (translate, repair, replayable, texts), whenever it applies.

The transcripts are made messy on purpose: several dialects joined, messages dropped (tool
calls left open, orphan results), repeated (reused call ids), empty answers and system
messages added; each is split at a random point and made ready for a random dialect.
"""

from __future__ import annotations

import json

import httpx
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

import toolnexus as tn
from toolnexus.core import loading
from toolnexus.core.frozen import freeze
from toolnexus.core.transcript import open_calls
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.translate import native_call_ids
from toolnexus.store import in_memory_store
from toolnexus.testing import openai_response, text_reply, transcripts

_EXTRA = st.sampled_from(
    [
        {"role": "assistant", "content": ""},  # an empty answer: not replayed
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
        {"role": "system", "content": "be brief"},
        {"role": "tool", "tool_call_id": "orphan_1", "content": "?"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "?"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "f.x:0", "type": "function",
                                                               "function": {"name": "f",
                                                                            "arguments": "{}"}}]},
    ]
)  # fmt: skip


@st.composite
def messy(draw) -> list:
    """A transcript of joined dialects, with messages dropped, repeated and added."""
    out = [m for part in draw(st.lists(transcripts(max_turns=3), max_size=3)) for m in part]
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["drop", "repeat", "add"]))
        at = draw(st.integers(0, len(out)))
        if kind == "drop" and at < len(out):
            del out[at]
        elif kind == "repeat" and at < len(out):
            out.insert(at, out[at])
        elif kind == "add":
            out.insert(at, draw(_EXTRA))
    return out


def _memo(prefix, dialect: str) -> dict:
    """What the runtime would know of `prefix`: its whole pass and its facts."""
    ready = loading.whole(prefix, dialect)
    ids = native_call_ids(prefix, dialect, keep_system=True)
    facts = (dialect, ids) if ids is not None else None
    return {"messages": prefix, "history": ready.history, "texts": ready.texts, "facts": facts}


@given(messy(), st.data(), st.sampled_from(tuple(DIALECTS)))
def test_the_incremental_load_equals_the_whole_pass_whenever_it_applies(t, data, dialect):
    t = freeze(t)
    k = data.draw(st.integers(0, len(t)))
    prefix = pvector(t[:k])
    memo = _memo(prefix, dialect)
    loaded = prefix.extend(t[k:])  # the store hands back those very messages plus the new
    try:
        whole = loading.whole(loaded, dialect, "text")
    except ValueError:  # what the dialect cannot carry even as text: the whole pass refuses
        return
    got = loading.extended(memo, loaded, dialect)
    if got is None:
        return
    assert list(got.history) == list(whole.history)
    assert list(got.texts) == list(whole.texts)
    assert got.lifted == whole.lifted == ""
    if got.facts is not None:  # known when the memo's history is its messages
        assert got.facts == whole.facts


@given(st.sampled_from(tuple(DIALECTS)), st.data())
def test_a_clean_transcript_split_after_a_whole_turn_is_made_ready_incrementally(dialect, data):
    """The usual case takes the incremental path: one dialect, every call answered."""
    t = freeze(data.draw(transcripts(dialect, max_turns=4)))
    cuts = [k for k in range(1, len(t)) if not open_calls(t[:k])]
    if not cuts:
        return
    k = data.draw(st.sampled_from(cuts))
    prefix = pvector(t[:k])
    memo = _memo(prefix, dialect)
    got = loading.extended(memo, prefix.extend(t[k:]), dialect)
    assert got is not None
    assert list(got.history) == list(loading.whole(prefix.extend(t[k:]), dialect).history)


def test_it_does_not_apply_where_the_whole_pass_would_differ():
    """Open calls at the memo's end, a reused call id, another dialect, copies."""
    fn = {"name": "f", "arguments": "{}"}
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": fn}]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "c1", "content": "4"}
    q, a = {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}
    cases = [
        ([q, call], [result, a]),  # the call is open where the memo ends
        ([q, call, result, a], [q, call, result, a]),  # c1 used again: translate renames it
    ]
    for before, after in cases:
        prefix = freeze(before)
        memo = _memo(prefix, "openai")
        assert loading.extended(memo, prefix.extend(freeze(after)), "openai") is None
    prefix = freeze([q, a])
    memo = _memo(prefix, "openai")
    assert loading.extended(memo, prefix.extend(freeze([q, a])), "openai") is not None
    assert loading.extended(memo, prefix.extend(freeze([q, a])), "anthropic") is None
    assert loading.extended(memo, freeze([q, a, q, a]), "openai") is None  # equal, not the same


def _client(store, sent: list) -> tn.Client:
    answer = json.dumps(openai_response(text_reply("ok"))).encode()

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, content=answer, headers={"content-type": "application/json"})

    return tn.create_client(base_url="http://model.test/v1", model="m", store=store,
                            transport=httpx.MockTransport(reply))  # fmt: skip


def test_two_clients_taking_turns_make_only_the_new_messages_ready(monkeypatch):
    """Each client's load goes on from what its runtime saved: no whole pass after the
    first, and the request is the one a whole pass over the same history would send."""
    store, sent = in_memory_store(), []
    a, b = _client(store, sent), _client(store, sent)
    for c, prompt in ((a, "1"), (b, "2")):
        tn.run(c, prompt, id="c")
    whole = []
    real = loading.whole
    monkeypatch.setattr(loading, "whole", lambda *args: whole.append(1) or real(*args))
    before = store["get"]("c")
    tn.run(a, "3", id="c")  # b saved last: a makes only b's exchange ready
    tn.run(b, "4", id="c")
    assert whole == []
    fresh = []
    tn.run(_client(in_memory_store(), fresh), "3", history=before)  # the whole pass
    assert sent[-2] == fresh[0]
