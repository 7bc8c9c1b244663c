"""stream / ask(on_text) / astream over real SSE from the loopback provider."""

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolnexus import (
    ProviderError,
    RunCancelledError,
    RunTimeoutError,
    aask,
    ask,
    astream,
    conversation_store,
    create_client,
    define_tool,
    run,
    stream,
    toolkit,
)
from toolnexus.core.wire import DIALECTS
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.fake_gemini import is_stream_path

STYLES = sorted(DIALECTS)  # every row of the registry


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@define_tool
def echo(s: str) -> str:
    """Echo a string."""
    return s


TK = toolkit(add, echo)
SCRIPT = [
    tool_calls_reply(("add", {"a": 2, "b": 2}), ("echo", {"s": 'hé "quoted" 🙂'}), chunk=7),
    text_reply("The answer is 4, and I echoed it.", chunk=5),
]


def events_of(style, script, **kw):
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m")
        return list(stream(c, "go", toolkit=TK, **kw)), fp, c


def unplaced(result):
    """Return a RunResult without the server's address (two fake providers' results differ
    only there: served_by names the base URL)."""
    return result.set("served_by", result["served_by"].discard("base_url"))


@pytest.mark.parametrize("style", STYLES)
def test_stream_yields_events_in_order_and_done_equals_run(style):
    events, fp, _ = events_of(style, SCRIPT)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done"
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("text")
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [(c["name"], dict(c["args"])) for c in calls] == [
        ("add", {"a": 2, "b": 2}),
        ("echo", {"s": 'hé "quoted" 🙂'}),
    ]
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["output"] for r in results] == ["4", 'hé "quoted" 🙂']
    text = "".join(e["delta"] for e in events if e["type"] == "text")
    assert text == "The answer is 4, and I echoed it."
    assert len([e for e in events if e["type"] == "text"]) > 1  # really streamed
    assert [e["type"] for e in events].count("usage") == 2
    # Asked for a stream: in the body, or by the URL (Gemini's :streamGenerateContent).
    assert all(r["body"].get("stream") is True or is_stream_path(r["path"]) for r in fp.requests)
    if style == "openai":
        assert fp.requests[0]["body"]["stream_options"] == {"include_usage": True}
    with fake_provider(SCRIPT) as fp2:
        expected = run(create_client(base_url=fp2.url, style=style, model="m"), "go", toolkit=TK)
    assert unplaced(events[-1]["result"]) == unplaced(expected)


@pytest.mark.parametrize("style", STYLES)
def test_stream_saves_on_done_and_nothing_when_stopped_early(style):
    with fake_provider([text_reply("hello there", chunk=3)] * 3) as fp:
        c = create_client(base_url=fp.url, style=style, model="m")
        events = list(stream(c, "hi", conversation_id="s"))
        assert conversation_store(c)["get"]("s") == events[-1]["result"]["messages"]
        it = stream(c, "again", conversation_id="s")
        next(it)  # a first event, then the consumer walks away
        it.close()
        assert conversation_store(c)["get"]("s") == events[-1]["result"]["messages"]
        # The lock was released: the same id runs again at once, from the saved state.
        last = list(stream(c, "third", conversation_id="s"))[-1]["result"]
        assert len(last["messages"]) == 4


@pytest.mark.parametrize("style", STYLES)
def test_stream_error_event_raises_provider_error_and_saves_nothing(style):
    error = {"type": "overloaded_error", "message": "Overloaded"}
    script = [text_reply("partial answer here", stream_error=error)]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", retries=0)
        with pytest.raises(ProviderError, match="Overloaded"):
            list(stream(c, "hi", conversation_id="e"))
        assert conversation_store(c)["get"]("e") is None


@pytest.mark.parametrize("style", STYLES)
def test_ask_on_text_streams_and_returns_the_result(style):
    seen = []
    with fake_provider([text_reply("streamed words", chunk=4)]) as fp:
        c = create_client(base_url=fp.url, style=style, model="m")
        r = ask(c, "hi", id="x", on_text=seen.append)
    assert "".join(seen) == "streamed words" == r["text"] and len(seen) > 1
    assert conversation_store(c)["get"]("x") == r["messages"]


@pytest.mark.parametrize("style", STYLES)
def test_astream_and_aask_match_the_sync_driver(style):
    async def go(url):
        c = create_client(base_url=url, style=style, model="m")
        events = [e async for e in astream(c, "go", toolkit=TK)]
        return events

    with fake_provider(SCRIPT) as fp:
        events = asyncio.run(go(fp.url))
    sync_events, _, _ = events_of(style, SCRIPT)
    strip = lambda es: [e for e in es if e["type"] not in ("text", "done")]  # noqa: E731
    assert strip(events) == strip(sync_events)
    assert unplaced(events[-1]["result"]) == unplaced(sync_events[-1]["result"])

    seen = []

    async def on_text(d):
        seen.append(d)

    with fake_provider([text_reply("async words", chunk=3)]) as fp:
        c = create_client(base_url=fp.url, style=style, model="m")
        r = asyncio.run(aask(c, "hi", id="a", on_text=on_text))
    assert "".join(seen) == r["text"] == "async words"


names = st.sampled_from(["add", "echo"])
replies = st.lists(
    st.one_of(
        st.builds(lambda t, n: text_reply(t, chunk=n), st.text(min_size=1, max_size=40),
                  st.integers(1, 50)),
        st.builds(lambda s, n: tool_calls_reply(("echo", {"s": s}), ("add", {"a": 1, "b": 2}),
                                                chunk=n),
                  st.text(max_size=20), st.integers(1, 50)),
    ),
    min_size=1, max_size=3,
).map(lambda rs: [*rs, text_reply("end")])  # fmt: skip


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replies, st.sampled_from(STYLES))
def test_stream_done_equals_run_for_any_scripted_exchange(script, style):
    events, _, _ = events_of(style, script)
    with fake_provider(script) as fp:
        expected = run(create_client(base_url=fp.url, style=style, model="m"), "go", toolkit=TK)
    assert unplaced(events[-1]["result"]) == unplaced(expected)
    text = "".join(e["delta"] for e in events if e["type"] == "text")
    assert text.endswith(expected["text"])
    assert json.dumps(len(events))  # events are plain to serialise counts


@pytest.mark.parametrize("style", STYLES)
def test_a_stream_cut_after_text_is_not_retried_so_text_never_repeats(style):
    script = [text_reply("first part then cut", chunk=4, stream_drop=True), text_reply("again")]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", retry_base_ms=1)
        seen = []
        with pytest.raises(ProviderError):
            for e in stream(c, "hi"):
                seen.append(e)
    assert len(fp.requests) == 1 and seen and all(e["type"] == "text" for e in seen)


@pytest.mark.parametrize("style", STYLES)
def test_a_failure_before_any_text_is_retried(style):
    script = [{"status": 503, "body": "busy", "headers": {"retry-after": "0"}}, text_reply("ok")]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m")
        events = list(stream(c, "hi"))
    assert events[-1]["result"]["text"] == "ok" and len(fp.requests) == 2


@pytest.mark.parametrize("cancel", [False, True], ids=["deadline", "cancel"])
def test_an_async_stream_stopped_while_its_answer_stalls_ends_cleanly(cancel):
    """Fails on the old main: astream past its deadline (or cancelled) while the answer
    stalled raised `RuntimeError: aclose(): asynchronous generator is already running`,
    because the abandoned read was still running when the stream was closed."""
    with fake_provider(lambda body, dialect: {"stall": 10}) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k", retries=0,
                          timeout_ms=None if cancel else 300)  # fmt: skip

        async def consume():
            stop = asyncio.Event()
            if cancel:
                asyncio.get_running_loop().call_later(0.3, stop.set)
            async for _ in astream(c, "hi", cancel=stop):
                pass

        with pytest.raises(RunCancelledError if cancel else RunTimeoutError):
            asyncio.run(consume())
        c.close()
