"""Failover over loopback providers, for every ordered pair of the registry's dialects: the
primary fails (529, 503, a dropped connection, an overloaded stream event before any
content) at the first or at a later model turn of a tool exchange and the fallback
answers. Each request either got is valid in its dialect, each tool ran once, the store
holds one transcript, and the primary continues it next turn. Then a property: random
failure schedules over three clients of different dialects."""

from __future__ import annotations

import itertools

import pytest
from failover_kit import (
    BAD_REQUEST,
    FAILURES,
    PAIRS,
    STYLES,
    Counter,
    Provider,
    answer,
    call,
    client,
    failing,
    invalid_requests,
    one_exchange,
    stream_result,
)
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import ProviderError, conversation_store, fallback, run, stream
from toolnexus.core.transcript import dumps
from toolnexus.store import in_memory_store


@pytest.fixture(scope="module")
def providers():
    """Three providers, reused by the module's tests (each test reloads their scripts)."""
    made = [Provider("primary-model"), Provider("second-model"), Provider("third-model")]
    yield made
    for p in made:
        p.stop()


def _run(chain, prompt, tk, cid, streamed):
    if not streamed:
        return run(chain, prompt, toolkit=tk, conversation_id=cid), []
    return stream_result(stream(chain, prompt, toolkit=tk, conversation_id=cid))


@pytest.mark.parametrize("kind", sorted(FAILURES))
@pytest.mark.parametrize("at_turn", [1, 2])
@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_an_exchange_goes_on_with_the_fallback_and_the_primary_continues_it(
    providers, first, second, at_turn, kind
):
    one, two, _ = providers
    counter = Counter()
    streamed = kind == "stream_overloaded"
    fails = failing(kind)
    if at_turn == 1:
        one.load(fails)
        two.load([call(1), answer("the answer")])
    else:
        one.load([call(1), *fails])
        two.load([answer("the answer")])
    store = in_memory_store()
    chain = fallback(client(one, first, store=store), client(two, second), cooldown_s=0)
    r, shown = _run(chain, "question one", counter.toolkit, "c", streamed)

    assert r["text"] == "the answer" and r["status"] == "done"
    assert r["served_by"]["style"] == second and r["model"] == "second-model"
    assert counter.runs == [1], "each tool ran once"
    assert "never shown" not in "".join(shown)
    assert len(one.requests) == at_turn + 1  # its turns, then the failing one and its retry
    assert invalid_requests(one) == [] and invalid_requests(two) == []
    saved = store["get"]("c")
    assert saved == r["messages"]
    one_exchange(saved, "question one", tool_runs=1)
    assert conversation_store(chain) is store

    # The next turn, on the primary again (no cool-down here): a valid request in its own
    # dialect holding the whole exchange, and one transcript saved.
    one.load([answer("next answer")])
    two.load([])
    again = run(chain, "question two", toolkit=counter.toolkit, conversation_id="c")
    assert again["text"] == "next answer" and again["served_by"]["style"] == first
    assert invalid_requests(one) == [] and len(one.requests) == 1
    sent = str(one.requests[0]["body"])
    assert "RESULT-1" in sent and "the answer" in sent and "question one" in sent
    assert counter.runs == [1]
    # Saved once more, as the primary replayed it (in its own dialect now).
    later = store["get"]("c")
    one_exchange(later, "question one", tool_runs=1)
    one_exchange(later, "question two", tool_runs=1)
    text = dumps(later)
    order = [text.index(x) for x in ("question one", "RESULT-1", "the answer", "question two",
                                     "next answer")]  # fmt: skip
    assert order == sorted(order)


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_a_request_the_primary_refuses_is_not_failed_over(providers, first, second):
    one, two, _ = providers
    one.load([call(1), BAD_REQUEST])
    two.load([answer("never")])
    counter, store = Counter(), in_memory_store()
    chain = fallback(client(one, first, store=store), client(two, second))
    with pytest.raises(ProviderError) as e:
        run(chain, "q", toolkit=counter.toolkit, conversation_id="c")
    assert e.value.status == 400 and two.requests == [] and store["get"]("c") is None


# ---- the property: random failure schedules over three clients -------------------------

KINDS = ("ok", "529", "503", "drop", "400")
TRIOS = list(itertools.permutations(STYLES, 3))


def _reply(kind: str, turns_done: int):
    if kind == "400":
        return BAD_REQUEST
    if kind != "ok":
        return FAILURES[kind]
    # Two tool turns, then the answer: what the conversation holds says which turn it is.
    return call(turns_done + 1) if turns_done < 2 else answer("all done")


def _scripted(schedule, counter):
    it = iter(schedule)

    def reply(body, dialect):
        turns_done = str(body).count("RESULT-")
        return _reply(next(it, "ok"), turns_done)

    return [reply] * (len(schedule) + 4)


@given(
    trio=st.sampled_from(TRIOS),
    schedules=st.lists(st.lists(st.sampled_from(KINDS), max_size=4), min_size=3, max_size=3),
)
def test_random_failure_schedules_never_save_a_partial_turn_nor_run_a_tool_twice(
    providers, trio, schedules
):
    counter, store = Counter(), in_memory_store()
    for p, schedule in zip(providers, schedules, strict=True):
        p.load(_scripted(schedule, counter))
    clients = [client(p, s, retries=0) for p, s in zip(providers, trio, strict=True)]
    chain = fallback(clients[0].set(store=store), *clients[1:], cooldown_s=0)
    try:
        r = run(chain, "the question", toolkit=counter.toolkit, conversation_id="p")
    except ProviderError as e:
        asked = [p for p in providers if p.requests]
        assert e.url.startswith(asked[-1].url), "the last client asked raised"
        if e.status != 400:
            assert asked[-1] is providers[-1], "a provider's fault goes on to the end"
        assert store["get"]("p") is None, "a run that raised saved nothing"
    else:
        assert r["text"] == "all done" and r["status"] == "done"
        one_exchange(store["get"]("p"), "the question", tool_runs=len(counter.runs))
    assert sorted(counter.runs) == sorted(set(counter.runs)), "no tool ran twice"
    assert counter.runs == list(range(1, len(counter.runs) + 1))
    for p in providers:
        assert invalid_requests(p) == []
