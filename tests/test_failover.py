"""fallback(): what fails over and what does not, the cool-down shared by threads, streams,
async runs, conversation(), and what the host sees (served_by, the metric, the span event,
the hooks), over loopback providers."""

from __future__ import annotations

import asyncio
import threading

import pytest
from dialect_kit import RING, mixed
from failover_kit import (
    BAD_REQUEST,
    Counter,
    Provider,
    answer,
    call,
    client,
    failing,
    invalid_requests,
    stream_result,
)

from toolnexus import (
    Fallback,
    ProviderError,
    aask,
    arun,
    ask,
    astream,
    conversation,
    conversation_store,
    create_client,
    create_in_process_client,
    fallback,
    forget,
    get_chat_history,
    metrics,
    run,
    stream,
)
from toolnexus.fallback import DEFAULT_COOLDOWN_S, MAX_COOLDOWN_S, Breaker, cooldown_for
from toolnexus.store import in_memory_store


@pytest.fixture(scope="module")
def providers():
    made = [Provider("primary-model"), Provider("second-model"), Provider("third-model")]
    yield made
    for p in made:
        p.stop()


PAIR = mixed(2, 1)  # two rows of the registry, the second and third


def _chain(providers, styles=PAIR, **options):
    clients = [client(p, s) for p, s in zip(providers, styles, strict=False)]
    return fallback(*clients, **options)


# ---- what fails over, and what does not ---------------------------------------------------


def test_a_primary_that_answers_serves_alone(providers):
    one, two, _ = providers
    one.load([answer("hello")])
    two.load([])
    r = run(_chain(providers), "hi")
    assert r["text"] == "hello" and r["served_by"]["model"] == "primary-model"
    assert r["served_by"]["style"] == "anthropic" and two.requests == []


def test_a_plain_client_names_itself_in_served_by(providers):
    one = providers[0].load([answer("hello")])
    r = run(client(one, "openai"), "hi")
    assert dict(r["served_by"]) == {"style": "openai", "model": "primary-model",
                                    "base_url": one.url}  # fmt: skip


def test_the_fallback_is_asked_only_after_the_primarys_own_retries(providers):
    one, two, _ = providers
    one.load(failing("529", times=3))
    two.load([answer("from the fallback")])
    chain = fallback(client(one, "anthropic", retries=2), client(two, "openai"))
    assert run(chain, "hi")["text"] == "from the fallback"
    assert len(one.requests) == 3 and len(two.requests) == 1


def test_a_429_whose_wait_is_past_the_bound_fails_over_at_once(providers):
    one, two, _ = providers
    one.load([{"status": 429, "headers": {"retry-after": "120"}, "body": "slow down"}])
    two.load([answer("elsewhere")])
    chain = fallback(client(one, "openai", max_retry_wait_ms=1000), client(two, "anthropic"))
    assert run(chain, "hi")["text"] == "elsewhere" and len(one.requests) == 1
    # ...and the primary cools down for as long as it asked (past the default).
    assert chain.breaker.cooling()[0] > DEFAULT_COOLDOWN_S


def test_on_widens_failover_to_a_context_window_refusal(providers):
    one, two, _ = providers
    too_long = {"status": 400, "body": {"error": {"message": "context_length_exceeded",
                                                  "type": "invalid_request_error"}}}  # fmt: skip
    one.load([too_long])
    two.load([answer("a longer window")])
    chain = _chain(providers, on=lambda e: e.status == 400 and "context" in str(e.body))
    assert run(chain, "hi")["text"] == "a longer window"


def test_on_narrows_failover(providers):
    one, two, _ = providers
    one.load(failing("503"))
    two.load([answer("never")])
    with pytest.raises(ProviderError) as e:
        run(_chain(providers, on=lambda e: e.status == 529), "hi")
    assert e.value.status == 503 and two.requests == []


def test_a_bad_request_is_raised_and_nothing_is_saved(providers):
    one, two, _ = providers
    one.load([BAD_REQUEST])
    two.load([answer("never")])
    chain = _chain(providers)
    with pytest.raises(ProviderError):
        run(chain, "hi", conversation_id="c")
    assert two.requests == [] and conversation_store(chain)["get"]("c") is None


def test_every_client_failing_raises_the_last_ones_error_and_saves_nothing(providers):
    one, two, three = providers
    one.load(failing("529"))
    two.load(failing("503"))
    three.load(failing("drop"))
    counter = Counter()
    chain = _chain(providers, mixed(3, 1))
    with pytest.raises(ProviderError) as e:
        run(chain, "hi", toolkit=counter.toolkit, conversation_id="c")
    assert e.value.url.startswith(three.url) and len(three.requests) == 2
    assert conversation_store(chain)["get"]("c") is None and counter.runs == []


def test_the_fallbacks_own_store_is_not_touched(providers):
    one, two, _ = providers
    one.load(failing("503"))
    two.load([answer("ok")])
    theirs = in_memory_store()
    chain = fallback(client(one, "openai"), client(two, "anthropic", store=theirs))
    run(chain, "hi", conversation_id="c")
    assert theirs["get"]("c") is None and conversation_store(chain)["get"]("c") is not None


def test_an_in_process_model_can_be_the_fallback(providers):
    one = providers[0].load([call(7), *failing("503")])
    counter, seen = Counter(), []

    def generate(request):
        seen.append(request["messages"])
        return {"content": "local answer"}

    local = create_in_process_client(model="local", generate=generate)
    r = run(fallback(client(one, "anthropic"), local), "hi", toolkit=counter.toolkit)
    assert r["text"] == "local answer" and r["served_by"]["model"] == "local"
    assert counter.runs == [7] and "RESULT-7" in str(seen[0])


def test_the_primarys_sqlite_store_and_message_log_serve_the_whole_exchange(providers, tmp_path):
    from toolnexus.history import sqlite_log
    from toolnexus.store import sqlite_store

    one, two, _ = providers
    one.load([call(1), *failing("529")])
    two.load([answer("the answer")])
    counter = Counter()
    store, log = sqlite_store(tmp_path / "chat.db"), sqlite_log(tmp_path / "log.db")
    primary = client(one, "anthropic", store=store, message_log=log, lookup_tool=False)
    chain = fallback(primary, client(two, "responses"))
    r = run(chain, "the question", toolkit=counter.toolkit, conversation_id="u1")
    assert store["get"]("u1") == r["messages"] and counter.runs == [1]
    said = [(e["direction"], e["text"]) for e in get_chat_history(chain, conversation_id="u1")]
    assert said == [("user", "the question"), ("ai", "the answer")]


@pytest.mark.parametrize(("first", "second"), RING)
def test_structured_output_is_asked_in_the_fallbacks_own_way(providers, first, second):
    one, two, _ = providers
    one.load(failing("529"))
    two.load([answer('{"city": "Oslo"}')])
    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"], "additionalProperties": False}  # fmt: skip
    r = run(_chain(providers, (first, second)), "where?", output_schema=schema)
    assert dict(r["output"]) == {"city": "Oslo"} and invalid_requests(two) == []


# ---- the cool-down ---------------------------------------------------------------------------


def test_a_client_that_failed_over_is_skipped_until_its_cool_down_ends(providers):
    one, two, _ = providers
    now = [0.0]
    chain = _chain(providers)
    chain = chain._replace(breaker=Breaker(30.0, clock=lambda: now[0]))
    one.load(failing("529"))
    two.load([answer("first"), answer("second")])
    assert run(chain, "a")["text"] == "first" and len(one.requests) == 2
    one.load([answer("primary again")])
    assert run(chain, "b")["text"] == "second" and one.requests == []  # not paid twice
    now[0] = 31.0
    r = run(chain, "c")
    assert r["text"] == "primary again" and r["served_by"]["model"] == "primary-model"


def test_the_cool_down_is_shared_by_threads(providers):
    one, two, _ = providers
    one.load(failing("529"))
    two.load([answer("x")] * 9)
    chain = _chain(providers)
    run(chain, "trip it")
    one.load([answer("never")] * 8)
    out, threads = [], []
    for _ in range(8):
        threads.append(threading.Thread(target=lambda: out.append(run(chain, "hi")["text"])))
        threads[-1].start()
    for t in threads:
        t.join()
    assert out == ["x"] * 8 and one.requests == []


def test_when_every_client_cools_down_they_are_all_asked_in_order():
    b = Breaker(10.0, clock=lambda: 0.0)
    b.trip(0, 10)
    b.trip(1, 10)
    assert b.order(3) == (2,)
    b.trip(2, 10)
    assert b.order(3) == (0, 1, 2)


def test_cooldown_follows_a_longer_retry_after_up_to_its_bound():
    b = Breaker(DEFAULT_COOLDOWN_S)
    assert cooldown_for(b, ProviderError("x", status=529)) == DEFAULT_COOLDOWN_S
    assert cooldown_for(b, ProviderError("x", status=429, retry_after=600.0)) == 600.0
    assert cooldown_for(b, ProviderError("x", status=429, retry_after=1e9)) == MAX_COOLDOWN_S
    assert cooldown_for(Breaker(0.0), ProviderError("x", status=429, retry_after=600.0)) == 0


def test_cooldown_zero_asks_the_primary_every_time(providers):
    one, two, _ = providers
    one.load([*failing("529"), answer("back")])
    two.load([answer("away")])
    chain = _chain(providers, cooldown_s=0)
    assert run(chain, "a")["text"] == "away" and run(chain, "b")["text"] == "back"


# ---- streams ------------------------------------------------------------------------------------


def test_a_stream_fails_over_before_anything_reached_the_consumer(providers):
    one, two, _ = providers
    one.load(failing("stream_overloaded"))
    two.load([answer("from the fallback")])
    r, shown = stream_result(stream(_chain(providers), "hi", conversation_id="s"))
    assert "".join(shown) == "from the fallback" and r["served_by"]["model"] == "second-model"


def test_a_stream_whose_turn_showed_text_is_raised_and_saves_nothing(providers):
    one, two, _ = providers
    one.load([answer("a half answer that breaks") | {"stream_fail": "server", "fail_after": 2}])
    two.load([answer("never")])
    chain = _chain(providers)
    shown = []
    with pytest.raises(ProviderError) as e:
        for event in stream(chain, "hi", conversation_id="s"):
            shown.append(event)
    assert e.value.streamed and shown and two.requests == []
    assert conversation_store(chain)["get"]("s") is None


# ---- async, conversation(), ask ------------------------------------------------------------------


def test_arun_and_astream_fail_over_mid_exchange(providers):
    one, two, _ = providers
    counter = Counter()

    async def go(chain):
        one.load([call(1), *failing("503")])
        two.load([answer("async answer")])
        r = await arun(chain, "q", toolkit=counter.toolkit, conversation_id="a")
        one.load(failing("stream_overloaded"))
        two.load([answer("streamed answer")])
        events = [e async for e in astream(chain, "q2", conversation_id="a")]
        one.load(failing("529"))
        two.load([answer("asked")])
        asked = await aask(chain, "q3", id="a")
        return r, events[-1]["result"], asked

    chain = _chain(providers, mixed(2, 2), cooldown_s=0)
    r, streamed, asked = asyncio.run(go(chain))
    assert r["text"] == "async answer" and counter.runs == [1]
    assert streamed["text"] == "streamed answer" and asked["text"] == "asked"
    assert invalid_requests(two) == []


def test_conversation_and_ask_take_a_chain(providers):
    one, two, _ = providers
    chain = _chain(providers, mixed(2, 3), cooldown_s=0)
    chat = conversation(chain)
    one.load(failing("529"))
    two.load([answer("one")])
    assert chat["send"]("first")["text"] == "one"
    one.load([answer("two")])
    assert chat["send"]("second")["text"] == "two" and invalid_requests(one) == []
    one.load([answer("three")])
    assert ask(chain, "third", id="k")["text"] == "three"
    assert forget(chain, "k")["conversation_id"] == "k"


# ---- what the host sees -------------------------------------------------------------------------


def test_the_failover_metric_and_the_hooks_name_each_client(providers):
    one, two, _ = providers
    seen, asked = [], []
    one.load([call(1), *failing("529")])
    two.load([answer("done")])
    counter = Counter()
    hooks = {"before_llm": lambda p: asked.append(p["client"]["model"])}
    primary = client(one, "anthropic", on_metric=seen.append, hooks=hooks)
    chain = fallback(primary, client(two, "openai"))
    run(chain, "hi", toolkit=counter.toolkit)
    (event,) = [e for e in seen if e["event"] == "failover"]
    assert (event["model"], event["to_model"], event["kind"]) == (
        "primary-model",
        "second-model",
        "overloaded",
    )
    assert event["status"] == "529" and event["turn"] == 2
    assert asked == ["primary-model", "primary-model", "second-model"]
    text = metrics(chain)
    assert (
        'toolnexus_failovers_total{model="primary-model",to_model="second-model",'
        'kind="overloaded"} 1'
    ) in text


def test_every_leg_reports_to_the_chains_metrics_not_its_own(providers):
    """What a leg's model turn adds to the metrics reaches the chain's (the primary's)
    sink and on_metric: the second client's own stay empty though its model answered."""
    one, two, _ = providers
    seen = []
    one.load([*failing("529")])
    two.load([answer("done")])
    primary = client(one, "anthropic", on_metric=seen.append)
    second = client(two, "openai", on_metric=lambda e: pytest.fail(f"the leg's own: {e}"))
    run(fallback(primary, second), "hi")
    llm = [(e["model"], e["status"]) for e in seen if e["event"] == "llm"]
    assert ("second-model", "ok") in llm
    assert 'toolnexus_llm_requests_total{model="second-model"' in metrics(primary)
    assert "second-model" not in metrics(second)


def test_a_failover_is_an_event_of_the_exchanges_span(providers, monkeypatch):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolnexus import otel

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel._api()
    monkeypatch.setitem(otel._state, "tracer", provider.get_tracer("toolnexus"))
    one, two, _ = providers
    one.load(failing("drop"))
    two.load([answer("ok")])
    run(_chain(providers), "hi")
    (parent,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent"]
    (event,) = [e for e in parent.events if e.name == "toolnexus.failover"]
    assert event.attributes["toolnexus.failover.kind"] == "network"
    assert event.attributes["gen_ai.request.model"] == "second-model"
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert [s.name for s in chats] == ["chat primary-model"] * 2 + ["chat second-model"]
    ports = [s.attributes["server.port"] for s in chats]
    assert ports == [int(one.url.split(":")[2].split("/")[0])] * 2 + [
        int(two.url.split(":")[2].split("/")[0])
    ]


# ---- the value ----------------------------------------------------------------------------------


def test_fallback_checks_what_it_is_given(providers):
    c = client(providers[0], "openai")
    with pytest.raises(ValueError, match="at least two"):
        fallback(c)
    with pytest.raises(TypeError, match="create_client"):
        fallback(c, "not a client")
    with pytest.raises(TypeError, match="a fallback"):
        fallback(c, fallback(c, c))
    with pytest.raises(ValueError, match="cooldown_s"):
        fallback(c, c, cooldown_s=-1)
    with pytest.raises(ValueError, match="on must be"):
        fallback(c, c, on=3)


def test_a_chain_is_a_value_that_shows_its_clients(providers):
    c = client(providers[0], "openai", api_key="sk-secret-1234")
    chain = fallback(c, create_client(base_url=providers[1].url, style="anthropic", model="m2",
                                      api_key="sk-other-5678"))  # fmt: skip
    assert isinstance(chain, Fallback) and chain.primary is c and chain.store is c.store
    shown = repr(chain)
    assert "openai:primary-model" in shown and "anthropic:m2" in shown
    assert "sk-secret" not in shown and "sk-other" not in shown
    with pytest.raises(TypeError, match="no options of its own"):
        chain.set(model="m3")
