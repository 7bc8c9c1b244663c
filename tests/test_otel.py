"""OpenTelemetry GenAI spans, read back with the SDK's in-memory exporter, over the loopback
fake provider: one trace per exchange (invoke_agent, chat, execute_tool, memory spans, lock
events), sync and async, whole and streamed; content only when opted in; no key, ever."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from toolnexus import (  # noqa: E402
    arun,
    astream,
    create_client,
    define_tool,
    get_chat_history,
    otel,
    run,
    stream,
)
from toolnexus.history import in_memory_log  # noqa: E402
from toolnexus.store import in_memory_store, sqlite_store  # noqa: E402
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply  # noqa: E402

KEY = "sk-never-in-a-span-1234"


@pytest.fixture
def spans(monkeypatch):
    """The finished spans of what the test runs (a provider of the test's own)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel._api()  # made once; the test swaps in its own provider's tracer
    monkeypatch.setitem(otel._state, "tracer", provider.get_tracer("toolnexus"))
    monkeypatch.delenv(otel.CONTENT_ENV, raising=False)
    yield exporter.get_finished_spans
    provider.shutdown()


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@define_tool
def broken(city: str) -> str:
    """Always fails."""
    raise ValueError("no such city")


CALL = {"name": "add", "arguments": {"a": 2, "b": 3}}
OPENAI_USAGE = {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140,
                "prompt_tokens_details": {"cached_tokens": 64},
                "completion_tokens_details": {"reasoning_tokens": 30}}  # fmt: skip
ANTHROPIC_USAGE = {"input_tokens": 5, "output_tokens": 7, "cache_read_input_tokens": 40,
                   "cache_creation_input_tokens": 6}  # fmt: skip


def client(fp, style="openai", **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key=KEY, **options)


def by_name(found):
    out: dict[str, list] = {}
    for s in found:
        out.setdefault(s.name, []).append(s)
    return out


def check_one_trace(found):
    """Every span is in one trace under one invoke_agent span; return that span."""
    (root,) = [s for s in found if s.name == "invoke_agent"]
    assert {s.context.trace_id for s in found} == {root.context.trace_id}
    assert all(s.parent.span_id == root.context.span_id for s in found if s is not root)
    return root


def no_secret(found):
    for s in found:
        text = json.dumps({**dict(s.attributes), "events": [dict(e.attributes) for e in s.events]},
                          default=str)  # fmt: skip
        assert KEY not in text and "hunter2" not in text


def exchange(streamed, asynchronous, c, prompt, **kw):
    """Return the RunResult of one exchange, in the way the test asks for."""
    if asynchronous:

        async def go():
            if not streamed:
                return await arun(c, prompt, **kw)
            return [e async for e in astream(c, prompt, **kw)][-1]["result"]

        return asyncio.run(go())
    return run(c, prompt, **kw) if not streamed else list(stream(c, prompt, **kw))[-1]["result"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_an_exchange_is_one_trace_of_genai_spans(spans, streamed, asynchronous, tmp_path):
    script = [tool_calls_reply(CALL, raw_usage=OPENAI_USAGE), text_reply("5")]
    with fake_provider(script) as fp:
        c = client(fp, store=sqlite_store(tmp_path / "c.db"), message_log=in_memory_log())
        r = exchange(streamed, asynchronous, c, "2+3?", toolkit=[add], id="conv-1")
    assert r["text"] == "5"
    found = spans()
    root = check_one_trace(found)
    names = by_name(found)
    assert len(names["chat m"]) == 2 and len(names["execute_tool add"]) == 1
    assert {"search_memory", "upsert_memory", "create_memory"} <= set(names)
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == "conv-1"
    assert root.attributes["gen_ai.usage.input_tokens"] == 110  # summed over the turns
    assert root.attributes["toolnexus.run.status"] == "done"

    first, second = names["chat m"]
    a = first.attributes
    assert first.kind == trace.SpanKind.CLIENT
    assert (a["gen_ai.operation.name"], a["gen_ai.provider.name"]) == ("chat", "openai")
    assert (a["gen_ai.request.model"], a["gen_ai.response.model"]) == ("m", "fake-model")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (100, 40)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 64
    assert a["gen_ai.usage.reasoning.output_tokens"] == 30
    assert "gen_ai.usage.cache_creation.input_tokens" not in a  # not reported
    assert a["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == int(
        fp.url.rsplit(":", 1)[1].split("/")[0]
    )
    assert a.get("gen_ai.request.stream", False) is streamed
    if streamed:  # the answer's text came in chunks
        assert second.attributes["gen_ai.response.time_to_first_chunk"] >= 0

    (tool,) = names["execute_tool add"]
    assert tool.attributes["gen_ai.tool.name"] == "add"
    assert tool.attributes["gen_ai.tool.call.id"] == r["tool_calls"][0]["id"]
    assert first.end_time <= tool.start_time <= tool.end_time <= second.start_time

    loads = [
        s for s in names["search_memory"] if s.attributes["toolnexus.memory.kind"] == "transcript"
    ]
    assert loads[0].attributes["gen_ai.memory.record.count"] == 0  # a new conversation
    assert loads[0].attributes["gen_ai.memory.store.id"] == c.store["desc"]
    (save,) = names["upsert_memory"]
    assert save.attributes["gen_ai.memory.record.count"] == len(r["messages"])
    (logged,) = names["create_memory"]
    assert logged.attributes["gen_ai.memory.record.count"] == 2  # the prompt and the answer
    waits = [e for e in root.events if e.name == "toolnexus.lock.acquired"]
    assert waits and all(e.attributes["toolnexus.lock.wait_seconds"] >= 0 for e in waits)
    for s in found:  # no content unless the user opts in
        assert not {k for k in s.attributes if k.endswith(("messages", "arguments", "result"))}
    no_secret(found)


def test_anthropic_cache_details_and_provider(spans):
    with fake_provider([text_reply("hi", raw_usage=ANTHROPIC_USAGE)]) as fp:
        list(stream(client(fp, "anthropic"), "hi"))
    chat = by_name(spans())["chat m"][0].attributes
    assert chat["gen_ai.provider.name"] == "anthropic"
    assert chat["gen_ai.usage.input_tokens"] == 51  # every input token, cached ones included
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 40
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 6
    assert chat["gen_ai.response.finish_reasons"] == ("end_turn",)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_failed_turn_has_its_error_type(spans, streamed, asynchronous):
    with fake_provider([{"status": 500, "body": "down"}]) as fp:
        with pytest.raises(Exception, match="500"):
            exchange(streamed, asynchronous, client(fp, retries=0), "hi")
    found = spans()
    root = check_one_trace(found)
    (chat,) = by_name(found)["chat m"]
    assert chat.attributes["error.type"] == "500"
    assert chat.status.status_code == trace.StatusCode.ERROR
    assert root.attributes["error.type"] == "500"
    no_secret(found)


def test_a_retried_turn_is_one_chat_span_per_attempt(spans):
    with fake_provider([{"status": 503, "body": "busy"}, text_reply("ok")]) as fp:
        run(client(fp, retries=1, retry_base_ms=1), "hi")
    chats = by_name(spans())["chat m"]
    assert [c.attributes.get("error.type") for c in chats] == ["503", None]


def test_a_failing_tool_has_its_error_type(spans):
    script = [tool_calls_reply({"name": "broken", "arguments": {"city": "x"}}), text_reply("sorry")]
    with fake_provider(script) as fp:
        run(client(fp), "weather?", toolkit=[broken])
    (tool,) = by_name(spans())["execute_tool broken"]
    assert tool.attributes["error.type"] == "ValueError"
    assert tool.status.status_code == trace.StatusCode.ERROR


def test_inline_tools_follow_each_other(spans):
    calls = [{"name": "add", "arguments": {"a": i, "b": 1}} for i in range(3)]
    with fake_provider([tool_calls_reply(*calls), text_reply("done")]) as fp:
        run(client(fp, tool_executor="inline"), "sums", toolkit=[add])
    tools = by_name(spans())["execute_tool add"]
    assert len(tools) == 3
    assert all(a.end_time <= b.start_time for a, b in zip(tools, tools[1:], strict=False))


def test_content_only_when_opted_in(spans, monkeypatch):
    monkeypatch.setenv(otel.CONTENT_ENV, "true")
    with fake_provider([tool_calls_reply(CALL), text_reply("five")]) as fp:
        run(client(fp, system_prompt="Be brief."), "2+3?", toolkit=[add])
    names = by_name(spans())
    first = names["chat m"][0].attributes
    sent = json.loads(first["gen_ai.input.messages"])
    assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": "2+3?"}]}
    out = json.loads(names["chat m"][1].attributes["gen_ai.output.messages"])
    assert out[0]["parts"][0] == {"type": "text", "content": "five"}
    assert out[0]["finish_reason"] == "stop"
    tool = names["execute_tool add"][0].attributes
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert json.loads(tool["gen_ai.tool.call.result"]) == "5"
    no_secret(spans())


def test_the_lookup_tools_search_is_a_memory_span_of_the_exchange(spans, monkeypatch):
    monkeypatch.setenv(otel.CONTENT_ENV, "true")
    log = in_memory_log()
    lookup = {"name": "chat_history", "arguments": {"contains": "paris"}}
    script = [text_reply("noted"), tool_calls_reply(lookup), text_reply("you said Paris")]
    with fake_provider(script) as fp:
        c = client(fp, store=in_memory_store(), message_log=log)
        run(c, "I live in Paris", id="u1")
        run(c, "where do I live?", id="u1")
    found = spans()
    second = [s for s in found if s.name == "invoke_agent"][1]
    (search,) = [s for s in found if s.name == "search_memory"
                 and s.attributes["toolnexus.memory.kind"] == "message_log"]  # fmt: skip
    assert search.context.trace_id == second.context.trace_id
    assert search.attributes["gen_ai.memory.query.text"] == "paris"
    assert search.attributes["gen_ai.memory.record.count"] >= 1
    assert search.attributes["gen_ai.conversation.id"] == "u1"


def test_get_chat_history_is_traced_under_the_current_span(spans):
    with fake_provider([text_reply("ok")]) as fp:
        c = client(fp, message_log=in_memory_log())
        run(c, "hi", id="u1")
    tracer = otel._state["tracer"]
    with tracer.start_as_current_span("app") as app:
        assert len(get_chat_history(c, conversation_id="u1")) == 2
    (search,) = [s for s in spans() if s.name == "search_memory"
                 and s.attributes["toolnexus.memory.kind"] == "message_log"]  # fmt: skip
    assert search.parent.span_id == app.get_span_context().span_id
    assert "gen_ai.memory.query.text" not in search.attributes


def test_a_url_with_credentials_shows_only_its_host(spans):
    with fake_provider([text_reply("ok")]) as fp:
        url = fp.url.replace("http://", "http://user:hunter2@")
        run(create_client(base_url=url, model="m", api_key=KEY), "hi")
    chat = by_name(spans())["chat m"][0]
    assert chat.attributes["server.address"] == "127.0.0.1"
    no_secret(spans())


def test_an_abandoned_stream_ends_its_spans(spans):
    with fake_provider([text_reply("a long answer " * 20, chunk=8)]) as fp:
        events = stream(client(fp), "hi")
        next(e for e in events if e["type"] == "text")
        events.close()
    found = spans()
    root = check_one_trace(found)
    assert root.attributes["error.type"] == "stream_closed"


def test_an_abandoned_astream_ends_its_spans(spans):
    async def abandoned(c) -> None:
        events = astream(c, "hi")
        async for e in events:
            if e["type"] == "text":
                break
        await events.aclose()

    with fake_provider([text_reply("a long answer " * 20, chunk=8)]) as fp:
        asyncio.run(abandoned(client(fp)))
    found = spans()
    root = check_one_trace(found)
    assert root.attributes["error.type"] == "stream_closed"
    (chat,) = by_name(found)["chat m"]
    assert chat.end_time is not None


def test_a_cancelled_arun_ends_its_spans(spans):
    """A task cancelled while its model request is under way ends the chat span and the
    exchange's span with the cancellation (nothing is left open)."""

    async def cancelled(c) -> None:
        task = asyncio.ensure_future(arun(c, "hi"))
        await asyncio.sleep(0.3)  # the request is sent; its answer is 5 s away
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with fake_provider([{"content": "late", "delay": 5}]) as fp:
        asyncio.run(cancelled(client(fp)))
    found = spans()
    root = check_one_trace(found)
    (chat,) = by_name(found)["chat m"]
    assert chat.end_time is not None and chat.status.status_code == trace.StatusCode.ERROR
    assert root.end_time is not None and root.status.status_code == trace.StatusCode.ERROR


def test_no_provider_no_spans(monkeypatch):
    monkeypatch.setitem(otel._state, "tracer", trace.NoOpTracer())
    with fake_provider([text_reply("ok")]) as fp:
        c = client(fp)
        assert otel.exchange_trace(c, None, False) is None
        assert run(c, "hi")["text"] == "ok"


def test_a_provider_set_after_the_first_runs_records_the_next_exchange():
    """Until a provider is set no span is made at all; one set later (once per process,
    so in a process of its own) records the very next exchange."""
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from toolnexus import create_in_process_client, otel, run\n"
        "c = create_in_process_client(model='m', generate=lambda r: {'content': 'x'})\n"
        "before = [otel.exchange_trace(c, None, False), run(c, 'hi')['text']]\n"
        "exporter, provider = InMemorySpanExporter(), TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "run(c, 'hi again')\n"
        "print(before, sorted({s.name for s in exporter.get_finished_spans()}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[None, 'x'] ['chat m', 'invoke_agent']"


def test_import_toolnexus_imports_no_opentelemetry():
    code = "import sys, toolnexus; print([m for m in sys.modules if m.startswith('opentelemetry')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_opentelemetry_a_run_makes_no_spans():
    blocked = ("import sys; sys.modules['opentelemetry'] = None; import toolnexus;"
               "from toolnexus import create_in_process_client, otel, run;"
               "c = create_in_process_client(model='m', generate=lambda r: {'content': 'x'});"
               "r = run(c, 'hi');"
               "print(otel.available(), r['text'])")  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "x"]


def test_an_exchange_nests_under_the_current_span(spans):
    with fake_provider([text_reply("ok")]) as fp:
        c = client(fp)
        with otel._state["tracer"].start_as_current_span("request") as app:
            run(c, "hi")
    (root,) = [s for s in spans() if s.name == "invoke_agent"]
    assert root.parent.span_id == app.get_span_context().span_id


def test_redis_fused_load_and_save_are_memory_spans(spans, redis_url, unique):
    import redis

    from toolnexus.store import redis_store

    store = redis_store(redis_url, prefix=f"tnx-test:{unique}:")
    try:
        with fake_provider([text_reply("one"), text_reply("two")]) as fp:
            c = client(fp, store=store)
            run(c, "a", id="r1")
            run(c, "b", id="r1")
    finally:
        r = redis.Redis.from_url(redis_url)
        keys = list(r.scan_iter(match=f"tnx-test:{unique}:*"))
        if keys:
            r.delete(*keys)
        r.close()
    found = spans()
    loads = by_name(found)["search_memory"]
    assert [s.attributes["gen_ai.memory.record.count"] for s in loads] == [0, 2]
    assert all(s.attributes.get("toolnexus.lock.taken") for s in loads)  # lock_load: one call
    assert [
        s.attributes["gen_ai.memory.record.count"] for s in by_name(found)["upsert_memory"]
    ] == [
        2,
        4,
    ]
    roots = [s for s in found if s.name == "invoke_agent"]
    for root in roots:
        (acquired,) = [e for e in root.events if e.name == "toolnexus.lock.acquired"]
        assert acquired.attributes["toolnexus.lock.with_load"] is True


def test_a_postgres_bundle_save_with_its_log_is_one_memory_span_and_shows_no_password(
    spans, postgres_dsn, unique
):
    import psycopg

    from toolnexus.store import postgres_backend

    dsn = postgres_dsn.replace("postgresql://postgres@", "postgresql://postgres:hunter2@")
    b = postgres_backend(dsn, table=f"{unique}_m", log_table=f"{unique}_l", max_size=3)
    try:
        with fake_provider([text_reply("ok")]) as fp:
            c = client(fp, store=b["store"], message_log=b["log"], lock=b["lock"])
            run(c, "hi", id="p1")
    finally:
        b["close"]()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {unique}_m, {unique}_m_heads, {unique}_l")
    found = spans()
    names = by_name(found)
    (save,) = names["upsert_memory"]  # the transcript and its log rows in one statement
    assert "create_memory" not in names
    assert ":***@127.0.0.1" in save.attributes["gen_ai.memory.store.id"]  # redacted
    no_secret(found)


def test_a_tools_own_spans_are_children_of_its_execute_tool_span(spans):
    @define_tool
    def lookup(q: str) -> str:
        """Look something up."""
        with trace.get_tracer("app").start_as_current_span("inside the tool"):
            return q.upper()

    @define_tool
    async def alookup(q: str) -> str:
        """Look something up, async."""
        with trace.get_tracer("app").start_as_current_span("inside the async tool"):
            await asyncio.sleep(0)
            return q

    monkeypatch_tracer = otel._state["tracer"]
    calls = [
        {"name": "lookup", "arguments": {"q": "a"}},
        {"name": "alookup", "arguments": {"q": "b"}},
    ]
    with fake_provider([tool_calls_reply(*calls), text_reply("ok")] * 2) as fp:
        c = client(fp)
        with pytest.MonkeyPatch.context() as mp:  # the tool's own tracer: the test's provider
            mp.setattr(trace, "get_tracer", lambda *a, **k: monkeypatch_tracer)
            run(c, "go", toolkit=[lookup, alookup])
            asyncio.run(arun(c, "go", toolkit=[lookup, alookup]))
    found = spans()
    for inside, tool_name in (("inside the tool", "lookup"), ("inside the async tool", "alookup")):
        tools = {s.context.span_id: s for s in found if s.name == f"execute_tool {tool_name}"}
        inner = [s for s in found if s.name == inside]
        assert len(inner) == 2 and len(tools) == 2
        for s in inner:
            parent = tools[s.parent.span_id]
            assert s.context.trace_id == parent.context.trace_id
            assert parent.start_time <= s.start_time <= s.end_time <= parent.end_time


def test_an_unknown_tool_still_has_its_span(spans):
    with fake_provider(
        [tool_calls_reply({"name": "nope", "arguments": {}}), text_reply("ok")]
    ) as fp:
        run(client(fp), "go", toolkit=[add])
    (tool,) = by_name(spans())["execute_tool _unknown"]  # a name the model made up: not a span name
    assert tool.attributes["error.type"] == "tool_error"
    assert tool.attributes["gen_ai.tool.name"] == "_unknown"


def test_forget_is_a_delete_memory_span(spans):
    from toolnexus import forget

    with fake_provider([text_reply("ok")]) as fp:
        c = client(fp, store=in_memory_store(), message_log=in_memory_log())
        run(c, "hi", id="gone")
    forget(c, "gone")
    (span,) = by_name(spans())["delete_memory"]
    assert span.attributes["gen_ai.conversation.id"] == "gone"
    assert span.attributes["toolnexus.memory.log_entries"] == 2
    with pytest.raises(TypeError):
        forget(client(fp, store={"get": lambda i: None, "save": lambda i, m: None}), "x")
    failed = by_name(spans())["delete_memory"][1]
    assert failed.attributes["error.type"] == "TypeError"
