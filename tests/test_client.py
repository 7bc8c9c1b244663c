"""The client and the loop over real HTTP (the loopback fake provider), every dialect."""

import json
import threading

import pytest
from dialect_kit import STYLES, path_of, results, said, sent

from toolnexus import (
    ProviderError,
    ask,
    conversation,
    conversation_store,
    create_client,
    create_in_process_client,
    define_tool,
    run,
    toolkit,
)
from toolnexus.core.wire import DIALECTS, view
from toolnexus.store import file_store, in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

KEY = "sk-test-very-secret-key"


@define_tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


TK = toolkit(get_weather, add)
WEATHER = [
    tool_calls_reply(("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 2})),
    text_reply("Sunny, and 4."),
]


def counting(store):
    calls = {"get": 0, "save": 0}

    def get(id):
        calls["get"] += 1
        return store["get"](id)

    def save(id, t):
        calls["save"] += 1
        store["save"](id, t)

    return {"get": get, "save": save}, calls


def tool_messages(body):
    """The tool results a request carries, as (call id, content) pairs."""
    return results(sent(body))


@pytest.mark.parametrize("style", STYLES)
def test_weather_scenario(style):
    with fake_provider(WEATHER) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", api_key=KEY)
        r = run(c, "What's the weather in Paris and what is 2+2?", toolkit=TK)
    assert r["text"] == "Sunny, and 4."
    assert r["status"] == "done" and r["limit"] is None and r["turns"] == 2
    assert r["tool_call_count"] == 2
    assert [(t["name"], dict(t["args"]), t["output"]) for t in r["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "sunny in Paris"),
        ("add", {"a": 2, "b": 2}, "4"),
    ]
    assert dict(r["usage"]) == {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    first, second = fp.requests
    assert first["path"] == path_of(style, fp.url)
    wanted = DIALECTS[style].headers(KEY)
    assert any(KEY in v for v in wanted.values())  # the key goes in a header
    assert {k: first["headers"][k] for k in wanted} == wanted
    assert json.dumps(first["body"]["tools"]).count('"get_weather"') == 1
    ids = [c["id"] for c in r["tool_calls"]]
    assert tool_messages(second["body"]) == list(zip(ids, ["sunny in Paris", "4"], strict=True))
    assert KEY not in repr(r) and KEY not in repr(c)


def test_anthropic_s_request_has_its_version_max_tokens_and_no_empty_system():
    with fake_provider(WEATHER) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m", api_key=KEY)
        run(c, "What's the weather in Paris and what is 2+2?", toolkit=TK)
    first = fp.requests[0]
    assert first["path"] == "/v1/messages"
    assert first["headers"]["anthropic-version"] == "2023-06-01"
    assert first["body"]["max_tokens"] == 4096 and "system" not in first["body"]
    assert first["body"]["tools"][0]["input_schema"]["required"] == ["city"]


@pytest.mark.parametrize("style", STYLES)
def test_tool_calls_of_one_turn_run_concurrently_and_return_in_order(style):
    barrier = threading.Barrier(3, timeout=5)  # every call must be running at once to pass

    @define_tool
    def slow(n: int) -> str:
        """Wait for the others."""
        barrier.wait()
        return f"done {n}"

    script = [tool_calls_reply(*[("slow", {"n": i}) for i in range(3)]), text_reply("ok")]
    with fake_provider(script) as fp:
        r = run(create_client(base_url=fp.url, style=style, model="m"), "go", toolkit=toolkit(slow))
    assert [t["output"] for t in r["tool_calls"]] == ["done 0", "done 1", "done 2"]
    assert [o for _, o in tool_messages(fp.requests[1]["body"])] == [
        "done 0", "done 1", "done 2",
    ]  # fmt: skip


def test_calls_that_wait_on_each_other_overlap_on_every_run():
    """Fails on the old main: its RUSAGE "quick tool" guess ran such calls one after the
    other once they had looked quick, so the barrier broke (about 1 run in 3)."""
    barrier = threading.Barrier(2, timeout=5)

    @define_tool
    def meet(n: int) -> str:
        """Return at once when the other call is here too."""
        barrier.wait()
        return str(n)

    turn = [tool_calls_reply(("meet", {"n": 1}), ("meet", {"n": 2})), text_reply("ok")]
    with fake_provider(turn * 30) as fp:
        c = create_client(base_url=fp.url, model="m")
        for _ in range(30):  # the old guess needed a few quick runs to kick in
            assert [t["output"] for t in run(c, "go", toolkit=toolkit(meet))["tool_calls"]] == [
                "1", "2",
            ]  # fmt: skip


def test_tool_executor_inline_runs_a_turns_calls_in_order_on_the_callers_thread():
    seen = []

    @define_tool
    def note(n: int) -> str:
        """Note the thread."""
        seen.append((n, threading.get_ident()))
        return str(n)

    turn = [tool_calls_reply(*[("note", {"n": i}) for i in range(4)]), text_reply("ok")]
    with fake_provider(turn) as fp:
        c = create_client(base_url=fp.url, model="m", tool_executor="inline")
        run(c, "go", toolkit=toolkit(note))
    assert seen == [(i, threading.get_ident()) for i in range(4)]
    with pytest.raises(ValueError, match="tool_executor"):
        create_client(base_url=fp.url, model="m", tool_executor="guess")


def test_plain_tools_never_run_on_the_event_loop_in_arun():
    """A plain tool runs off the loop: blocking it would stall every task."""
    import asyncio

    from toolnexus import arun

    threads = []

    @define_tool
    def quick(n: int) -> str:
        """Return at once."""
        threads.append(threading.get_ident())
        return str(n)

    turn = [tool_calls_reply(("quick", {"n": 1}), ("quick", {"n": 2})), text_reply("ok")]

    async def runs(c) -> int:
        for _ in range(4):
            r = await arun(c, "go", toolkit=toolkit(quick))
            assert [t["output"] for t in r["tool_calls"]] == ["1", "2"]
        return threading.get_ident()

    with fake_provider(turn * 4) as fp:
        c = create_client(base_url=fp.url, model="m")
        loop_thread = asyncio.run(runs(c))
    assert len(threads) == 8 and loop_thread not in threads


def test_arun_feeds_plain_tools_back_in_call_order_when_they_end_out_of_order():
    """A turn's plain calls run at once in threads (each waits for the next one to end:
    they end last to first); the results keep the calls' order."""
    import asyncio

    from toolnexus import arun

    ended = [threading.Event() for _ in range(3)]

    @define_tool
    def late(n: int) -> str:
        """Return once the next call has ended."""
        waited = n == 2 or ended[n + 1].wait(5)
        ended[n].set()
        return f"r{n}" if waited else "not at once"

    turn = [tool_calls_reply(*[("late", {"n": n}) for n in range(3)]), text_reply("ok")]
    with fake_provider(turn) as fp:
        c = create_client(base_url=fp.url, model="m")
        r = asyncio.run(arun(c, "go", toolkit=toolkit(late)))
    assert [t["output"] for t in r["tool_calls"]] == ["r0", "r1", "r2"]
    assert [m["content"] for m in fp.requests[1]["body"]["messages"][-3:]] == ["r0", "r1", "r2"]


def _waiting_tool() -> tuple:
    """Return (a tool that waits until released, the calls it started, those that ended,
    the release)."""
    started, ended, release = [], [], threading.Event()

    @define_tool
    def slow(n: int) -> str:
        """Wait until the test lets it end."""
        started.append(n)
        release.wait(10)
        ended.append(n)
        return str(n)

    return slow, started, ended, release


def _tool_threads() -> set:
    return {t for t in threading.enumerate() if t.name == "toolnexus-tool"}


def _every_offered_call_settled(c, before: set) -> None:
    """Close the client and join its tool threads: each stops at a stop signal queued
    after every call it was offered, so each queued call has by then run or been passed
    over (no wait that a slow machine could outlast)."""
    c.close()
    for thread in _tool_threads() - before:
        thread.join(10)
        assert not thread.is_alive()


def test_arun_deadline_abandons_a_turn_and_its_calls_not_yet_started():
    """On the run's deadline arun raises at once; of a turn's plain calls, those that no
    thread had started yet (more calls than the runtime's tool threads) never start."""
    import asyncio

    from toolnexus import RunTimeoutError, arun
    from toolnexus.runtime import TOOL_THREADS

    slow, started, ended, release = _waiting_tool()
    before = _tool_threads()

    calls = [("slow", {"n": n}) for n in range(TOOL_THREADS + 4)]
    with fake_provider([tool_calls_reply(*calls), text_reply("never")]) as fp:
        c = create_client(base_url=fp.url, model="m", timeout_ms=1500)
        with pytest.raises(RunTimeoutError):  # raised while every started call still waits
            asyncio.run(arun(c, "go", toolkit=toolkit(slow)))
        assert not ended and not release.is_set()  # the run did not wait for its tools
        release.set()  # the started calls end; the queued ones are then taken, not run
        _every_offered_call_settled(c, before)
    assert len(started) == TOOL_THREADS and sorted(ended) == sorted(started)
    assert len(fp.requests) == 1


def test_arun_task_cancelled_during_a_turn_ends_at_once_and_its_calls_not_yet_started():
    """Without a deadline or cancel token (nothing watches the turn), a cancelled task is
    cancelled at once, not after its tools; the calls no thread had started never start."""
    import asyncio
    import time

    from toolnexus import arun
    from toolnexus.runtime import TOOL_THREADS

    slow, started, ended, release = _waiting_tool()
    before = _tool_threads()

    async def cancelled_once_the_threads_are_busy(c) -> None:
        task = asyncio.ensure_future(arun(c, "go", toolkit=toolkit(slow)))
        until = time.monotonic() + 10
        while len(started) < TOOL_THREADS and time.monotonic() < until:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not ended and not release.is_set()  # cancelled while every call still waits

    calls = [("slow", {"n": n}) for n in range(TOOL_THREADS + 4)]
    with fake_provider([tool_calls_reply(*calls), text_reply("never")]) as fp:
        c = create_client(base_url=fp.url, model="m")
        asyncio.run(cancelled_once_the_threads_are_busy(c))
        release.set()  # the started calls end; the queued ones are then taken, not run
        _every_offered_call_settled(c, before)
    assert len(started) == TOOL_THREADS and sorted(ended) == sorted(started)
    assert len(fp.requests) == 1


def test_arun_a_plain_tool_that_raises_past_exception_ends_the_run_with_it():
    """A tool's Exception is an error result for the model; a BaseException raised in
    its thread is the run's own, raised by arun as the sync driver raises it."""
    import asyncio

    from toolnexus import arun

    class Halt(BaseException):
        pass

    @define_tool
    def halts(n: int) -> str:
        """Stop everything."""
        if n:
            raise Halt("stop")
        return "fine"

    turn = [tool_calls_reply(("halts", {"n": 0}), ("halts", {"n": 1})), text_reply("never")]
    with fake_provider(turn) as fp:
        c = create_client(base_url=fp.url, model="m")
        with pytest.raises(Halt, match="stop"):
            asyncio.run(arun(c, "go", toolkit=toolkit(halts)))
    assert len(fp.requests) == 1


def test_set_gives_a_client_that_behaves_by_its_own_fields():
    """Fails on the old main: `c1.set(model="m2")` shared c1's cached flow and sent m1."""
    with fake_provider([text_reply("a"), text_reply("b"), text_reply("c")]) as fp:
        c1 = create_client(base_url=fp.url, model="m1", api_key=KEY)
        run(c1, "warm the client up")
        c2 = c1.set(model="m2", max_turns=3)
        run(c2, "hi")
        run(c1, "again")
    assert [r["body"]["model"] for r in fp.requests] == ["m1", "m2", "m1"]
    assert (c2.model, c2.max_turns, c1.model, c1.max_turns) == ("m2", 3, "m1", 10)
    assert c2.runtime is c1.runtime  # shared on purpose: connections and threads
    assert c2.api_key.reveal() == KEY and KEY not in repr(c2)
    with pytest.raises(ValueError, match="max_turns"):
        c1.set(max_turns=0)  # checked like a new client


def test_a_client_is_closed_with_its_runtime_and_works_as_a_context_manager():
    from toolnexus import close

    with fake_provider([text_reply("a")]) as fp:
        with create_client(base_url=fp.url, model="m") as c:
            assert run(c, "hi")["text"] == "a"
        assert c.runtime.closed
        with pytest.raises(RuntimeError, match="closed"):
            run(c, "again")
        close(c)  # idempotent


def test_the_default_transport_reports_status_headers_and_network_failures():
    with fake_provider([]) as fp:  # no script: the fake answers 500
        url = fp.url
        c = create_client(base_url=url, model="m", api_key=KEY, retries=0)
        with pytest.raises(ProviderError) as e:
            run(c, "hi")
    assert e.value.status == 500 and KEY not in str(e.value)
    assert all(k == k.lower() for k in e.value.headers) and "content-type" in e.value.headers
    gone = create_client(base_url=url, model="m", api_key=KEY, retries=0)
    with pytest.raises(ProviderError, match="failed: Connect") as e:
        run(gone, "hi")  # the server is gone: a network failure, not a hang or a crash
    assert e.value.status is None


@pytest.mark.parametrize("style", STYLES)
def test_calls_chain_over_turns_and_max_turns_stops_incomplete(style):
    script = [tool_calls_reply(("add", {"a": i, "b": 1})) for i in range(5)]
    store, calls = counting(in_memory_store())
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", max_turns=3, store=store)
        r = ask(c, "count", toolkit=TK, id="x")
    assert r["status"] == "incomplete" and r["limit"] == "max_turns"
    assert r["turns"] == 3 and r["tool_call_count"] == 3 and len(fp.requests) == 3
    assert calls == {"get": 1, "save": 1}
    assert store["get"]("x") == r["messages"]


def _text_arguments(style: str) -> bool:
    """Whether a dialect carries a call's arguments as JSON text (so a model can send text
    that is not JSON), read off the neutral view of a call written in it."""
    call = ("assistant", [], [("c1", "add", '{"a": 1}', {})], [], {})
    written, _ = view.write([("user", "x"), call], style)
    return isinstance(view.items(written)[-1][2][0][2], str)


@pytest.mark.parametrize("style", STYLES)
def test_bad_arguments_and_unknown_tools_are_fed_back(style):
    bad = {"id": "c1", "name": "add", "arguments": "{not json"}
    arr = {"id": "c2", "name": "add", "arguments": "[1, 2]"}
    unknown = {"id": "c3", "name": "nope", "arguments": {}}
    calls = [bad, arr, unknown] if _text_arguments(style) else [arr, unknown]
    with fake_provider([tool_calls_reply(*calls), text_reply("sorry")]) as fp:
        r = run(create_client(base_url=fp.url, style=style, model="m"), "x", toolkit=TK)
    assert r["text"] == "sorry"
    outs = [o for _, o in tool_messages(fp.requests[1]["body"])]
    assert "Unknown tool 'nope'" in outs[-1] and "get_weather, add" in outs[-1]
    assert "must be a JSON object" in outs[-2]
    if _text_arguments(style):
        assert "not valid JSON" in outs[0]
    assert all(t["is_error"] for t in r["tool_calls"])


@pytest.mark.parametrize("style", STYLES)
def test_provider_error_carries_status_and_excerpt_never_the_key(style):
    body = json.dumps({"error": f"invalid key {KEY}", "pad": "x" * 5000})
    with fake_provider([{"status": 401, "body": body}]) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", api_key=KEY)
        store, calls = counting(conversation_store(c))
        with pytest.raises(ProviderError) as e:
            run(c, "hi", conversation_id="e")
    assert e.value.status == 401
    assert KEY not in str(e.value) and KEY not in e.value.body and "***" in e.value.body
    assert len(str(e.value)) < 1000
    assert conversation_store(c)["get"]("e") is None  # an error saves nothing


def test_unreachable_endpoint_is_a_provider_error():
    with fake_provider([]) as fp:
        url = fp.url
    with pytest.raises(ProviderError, match="POST"):
        run(create_client(base_url=url, model="m", api_key=KEY), "hi")


@pytest.mark.parametrize(
    "opts, error, match",
    [
        ({"base_url": "http://x", "model": "m", "style": "cohere"}, ValueError, "unknown style"),
        ({"model": "m"}, TypeError, "base_url"),
        ({"base_url": "http://x"}, TypeError, "model"),
        ({"base_url": "http://x", "model": ""}, ValueError, "model is required"),
        ({"base_url": "http://x", "model": "m", "max_turns": 0}, ValueError, "max_turns"),
        ({"base_url": "http://x", "model": "m", "max_tunrs": 3}, TypeError, "max_tunrs"),
        ({"base_url": "http://x", "model": "m", "store": {"get": 1}}, TypeError, "store"),
        ({"base_url": "http://x", "model": "m", "store": "chat.db"}, TypeError, "sqlite_store"),
        ({"base_url": "api.openai.com/v1", "model": "m"}, ValueError, "http:// or https://"),
    ],
)
def test_bad_options_fail_at_once(opts, error, match):
    with pytest.raises(error, match=match):
        create_client(**opts)


def test_key_from_environment_and_never_in_repr(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with fake_provider([text_reply("hi")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m")
        r = run(c, "hi")
    assert fp.requests[0]["headers"]["x-api-key"] == KEY
    assert KEY not in repr(c) and KEY not in str(c) and KEY not in repr(r)


# ---- memory by id: the seeds' scenarios ------------------------------------


def test_default_store_is_fresh_per_client_and_unknown_id_is_none():
    gen = lambda req: {"content": "hi"}  # noqa: E731
    a = create_in_process_client(model="m", generate=gen)
    b = create_in_process_client(model="m", generate=gen)
    assert conversation_store(a)["get"]("nobody") is None
    ask(a, "hello", id="u")
    assert conversation_store(a)["get"]("u") is not None
    assert conversation_store(b)["get"]("u") is None


@pytest.mark.parametrize("style", STYLES)
def test_custom_store_through_ask_counts_gets_and_saves(style):
    store, calls = counting(in_memory_store())
    with fake_provider([text_reply("one"), text_reply("two")]) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", store=store)
        ask(c, "first", id="u")
        r = ask(c, "second", id="u")
    assert calls == {"get": 2, "save": 2}
    assert said(sent(fp.requests[1]["body"])) == ["first", "one", "second"]
    assert [m["role"] for m in r["messages"]] == ["user", "assistant", "user", "assistant"]


def test_without_an_id_the_store_is_never_touched():
    store, calls = counting(in_memory_store())
    c = create_in_process_client(model="m", generate=lambda r: {"content": "x"}, store=store)
    run(c, "a")
    run(c, "b", history=[{"role": "user", "content": "z"}, {"role": "assistant", "content": "y"}])
    assert calls == {"get": 0, "save": 0}


def test_explicit_history_wins_over_the_store():
    seen = []
    c = create_in_process_client(model="m", generate=lambda r: seen.append(r) or {"content": "x"})
    conversation_store(c)["save"]("u", [{"role": "user", "content": "stored"}])
    run(c, "now", history=[{"role": "user", "content": "given"}], conversation_id="u")
    assert [m["content"] for m in seen[0]["messages"]] == ["given", "now"]


@pytest.mark.parametrize("style", STYLES)
def test_per_id_file_store_and_restart(style, tmp_path):
    with fake_provider([text_reply("A1"), text_reply("B1"), text_reply("A2")]) as fp:
        c1 = create_client(base_url=fp.url, style=style, model="m", store=file_store(tmp_path))
        ask(c1, "alice 1", id="alice")
        ask(c1, "bob 1", id="bob/../x")
        # A "restart": a new client over the same directory continues alice only.
        c2 = create_client(base_url=fp.url, style=style, model="m", store=file_store(tmp_path))
        r = ask(c2, "alice 2", id="alice")
    assert said(sent(fp.requests[2]["body"])) == ["alice 1", "A1", "alice 2"]
    assert conversation_store(c2)["get"]("alice") == r["messages"]
    assert [p.name for p in tmp_path.iterdir()].__len__() == 2
    assert all(p.parent == tmp_path for p in tmp_path.iterdir())


def test_two_clients_sharing_one_store_continue_one_conversation():
    shared = in_memory_store()
    gen = lambda req: {"content": f"seen {len(req['messages'])}"}  # noqa: E731
    a = create_in_process_client(model="m", generate=gen, store=shared)
    b = create_in_process_client(model="m", generate=gen, store=shared)
    ask(a, "one", id="t")
    r = ask(b, "two", id="t")
    assert r["text"] == "seen 3"


@pytest.mark.parametrize("style", STYLES)
def test_seeded_transcript_grows_from_exactly_what_was_saved(style):
    seed = [
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "Hi Ada"},
    ]
    with fake_provider([text_reply("Ada")]) as fp:
        c = create_client(base_url=fp.url, style=style, model="m")
        conversation_store(c)["save"]("s", seed)
        r = ask(c, "what is my name?", id="s")
    assert said(sent(fp.requests[0]["body"]))[:2] == ["my name is Ada", "Hi Ada"]
    assert list(r["messages"][:2]) == seed
    assert conversation_store(c)["get"]("s") == r["messages"]


def test_conversation_keeps_history_in_process_and_never_touches_the_store():
    store, calls = counting(in_memory_store())
    c = create_in_process_client(
        model="m", generate=lambda r: {"content": str(len(r["messages"]))}, store=store
    )
    chat = conversation(c)
    assert chat["send"]("a")["text"] == "1"
    assert chat["send"]("b")["text"] == "3"
    assert len(chat["messages"]()) == 4
    chat["reset"]()
    assert chat["send"]("c")["text"] == "1"
    assert calls == {"get": 0, "save": 0}


def test_in_process_client_runs_the_same_loop_with_tools():
    def gen(req):
        if req["messages"][-1]["role"] == "tool":
            return {"content": "answer " + req["messages"][-1]["content"]}
        return {
            "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
            "usage": {"prompt_tokens": 3},
        }

    r = run(create_in_process_client(model="m", generate=gen), "1+2?", toolkit=TK)
    assert r["text"] == "answer 3" and r["usage"]["prompt_tokens"] == 3
    assert r["tool_calls"][0]["id"] == "call_1_0"


def test_run_rejects_bad_input():
    c = create_in_process_client(model="m", generate=lambda r: {"content": "x"})
    with pytest.raises(TypeError):
        run(c, None)
    with pytest.raises(ValueError):
        run(c, "x", conversation_id="")


def test_a_list_of_tools_is_a_toolkit_and_anything_else_a_clear_error():
    def gen(req):
        if req["messages"][-1]["role"] == "tool":
            return {"content": req["messages"][-1]["content"]}
        return {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}

    c = create_in_process_client(model="m", generate=gen)
    assert run(c, "1+1", toolkit=[add])["text"] == "2"
    with pytest.raises(TypeError, match="toolkit must be"):
        run(c, "1+1", toolkit=add)
