"""The exchange over real I/O: hooks of any kind under every driver, deadlines on the sync
driver, what is saved and logged on each exit, streams that hold no conversation."""

import asyncio
import json
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolnexus import (
    ProviderError,
    RunCancelledError,
    RunTimeoutError,
    aask,
    arun,
    ask,
    astream,
    create_client,
    create_in_process_client,
    define_tool,
    run,
    stream,
    toolkit,
)
from toolnexus.history import in_memory_log
from toolnexus.store import in_memory_store, local_lock
from toolnexus.testing import fake_provider, openai_response, text_reply, tool_calls_reply


def echo_model(req):
    return {"content": "re: " + req["messages"][-1]["content"]}


# ---- hooks and on_error may be async under every driver --------------------------------


def test_async_hooks_and_on_error_work_under_run_and_arun():
    """Fails on the old main: an `async def before_llm` under arun raised
    `TypeError: argument of type 'coroutine' is not iterable`."""
    seen = []

    async def before_llm(ctx):
        seen.append(("before_llm", ctx["turn"]))
        return {"messages": [*ctx["messages"][:-1], {"role": "user", "content": "rewritten"}]}

    async def on_error(info):
        seen.append(("on_error", info["attempt"]))
        return "retry"

    script = [{"status": 400, "body": "no"}, text_reply("fine")]
    with fake_provider(script * 2) as fp:
        opts = {"base_url": fp.url, "model": "m", "retry_base_ms": 1}
        c = create_client(hooks={"before_llm": before_llm}, on_error=on_error, **opts)
        assert run(c, "hi")["text"] == "fine"
        assert asyncio.run(arun(c, "hi"))["text"] == "fine"
    assert seen == [("before_llm", 1), ("on_error", 1)] * 2
    assert [r["body"]["messages"][-1]["content"] for r in fp.requests] == ["rewritten"] * 4


def test_an_async_hook_under_run_inside_a_running_event_loop():
    """A notebook runs its cells inside an event loop: a sync run there still awaits hooks."""

    async def after_tool(ctx):
        return {"result": ctx["result"]["output"].upper()}

    @define_tool
    def shout(s: str) -> str:
        """Return s."""
        return s

    async def main():
        script = [tool_calls_reply(("shout", {"s": "hey"})), text_reply("ok")]
        with fake_provider(script) as fp:
            c = create_client(base_url=fp.url, model="m", hooks={"after_tool": after_tool})
            return run(c, "go", toolkit=toolkit(shout))

    assert asyncio.run(main())["tool_calls"][0]["output"] == "HEY"


# ---- deadlines and cancels hold on the sync driver --------------------------------------


def test_the_sync_deadline_holds_while_a_tool_runs_and_nothing_is_saved():
    """Fails on the old main: a 0.3 s deadline returned only when the tool ended."""
    release = threading.Event()

    @define_tool
    def stuck() -> str:
        """Never return on its own."""
        release.wait(60)
        return "late"

    store = in_memory_store()
    with fake_provider([tool_calls_reply(("stuck", {})), text_reply("x")]) as fp:
        c = create_client(base_url=fp.url, model="m", timeout_ms=300, store=store)
        t0 = time.monotonic()
        with pytest.raises(RunTimeoutError):
            run(c, "go", toolkit=toolkit(stuck), id="u")
        elapsed = time.monotonic() - t0
    release.set()
    assert elapsed < 10 and store["get"]("u") is None  # the tool's thread was abandoned


def test_a_sync_cancel_holds_while_a_stream_stalls():
    """Fails on the old main: a cancel set while the provider stalled mid-stream waited
    for the stall to end."""
    cancel = threading.Event()
    with fake_provider([text_reply("one two three", stream_stall=60)]) as fp:
        c = create_client(base_url=fp.url, model="m")
        threading.Timer(0.3, cancel.set).start()  # set while the provider stalls
        t0 = time.monotonic()
        with pytest.raises(RunCancelledError):
            list(stream(c, "go", cancel=cancel))  # one event arrives, then the stall
        assert time.monotonic() - t0 < 10


def test_a_stalled_answer_ends_at_the_read_timeout():
    with fake_provider([{"stall": 60}]) as fp:
        c = create_client(base_url=fp.url, model="m", read_timeout_ms=300, retries=0)
        assert create_client(base_url=fp.url, model="m").read_timeout_ms == 120_000
        t0 = time.monotonic()
        with pytest.raises(ProviderError):
            run(c, "hi")
        assert time.monotonic() - t0 < 10


def test_an_async_request_that_times_out_with_the_deadline_is_the_runs_timeout():
    """Fails on the old main: the async driver raised the request's own ReadTimeout as a
    ProviderError when it finished just before the deadline's timer (a flaky CI test);
    the sync driver already called it the run's timeout. Here the request blocks the loop
    past the deadline, then fails: the request finishes first, deterministically."""
    import httpx

    async def past_the_deadline(request):
        time.sleep(0.5)  # blocks the event loop: the deadline (0.3 s) passes meanwhile
        raise httpx.ReadTimeout("timed out", request=request)

    c = create_client(base_url="http://model.test/v1", model="m", api_key="k", retries=0,
                      timeout_ms=300, transport=httpx.MockTransport(past_the_deadline))  # fmt: skip
    with pytest.raises(RunTimeoutError):
        asyncio.run(aask(c, "hi"))


# ---- what each exit saves and logs ------------------------------------------------------


def test_a_lock_that_fails_to_release_after_the_save_returns_the_result():
    """Fails on the old main: `ask` raised although the exchange was saved, so a caller's
    retry duplicated the turn."""

    class BrokenRelease:
        def __call__(self, cid):
            return self

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            raise ConnectionError("lock server gone")

    events, store = [], in_memory_store()
    c = create_in_process_client(model="m", generate=echo_model, store=store,
                                 lock=BrokenRelease(), on_metric=events.append)  # fmt: skip
    with pytest.warns(RuntimeWarning, match="lock server gone"):
        assert ask(c, "hi", id="u")["text"] == "re: hi"
    assert len(store["get"]("u")) == 2
    assert [e for e in events if e["event"] == "lock_error"] == [
        {"event": "lock_error", "error": "ConnectionError"}
    ]


def test_the_log_records_every_message_also_of_a_failed_run():
    """Fails on the old main: the prompt of a failed run and assistant text that came with
    tool calls were never logged."""

    @define_tool
    def weather(city: str) -> str:
        """Return the weather."""
        return "sunny"

    log = in_memory_log()
    script = [
        tool_calls_reply(("weather", {"city": "Paris"}), content="Let me check the weather."),
        text_reply("Sunny in Paris."),
        {"status": 400, "body": "bad request"},
    ]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, model="m", message_log=log, retries=0)
        run(c, "Weather in Paris?", toolkit=toolkit(weather), id="u")
        with pytest.raises(ProviderError):
            run(c, "And tomorrow?", id="u")
    said = [(e["direction"], e["text"]) for e in log["query"](conversation_id="u")]
    assert sorted(said) == sorted([
        ("user", "Weather in Paris?"), ("ai", "Let me check the weather."),
        ("ai", "Sunny in Paris."), ("user", "And tomorrow?"),
    ])  # fmt: skip


def test_an_empty_prompt_is_refused_before_any_request():
    with fake_provider([text_reply("x")]) as fp:
        c = create_client(base_url=fp.url, model="m")
        for prompt in ("", "   \n"):
            with pytest.raises(ValueError, match="empty"):
                run(c, prompt)
    assert fp.requests == []


# ---- streams hold no conversation ---------------------------------------------------------


def test_a_peeked_stream_never_blocks_another_exchange_and_both_are_kept():
    """Fails on the old main: after `next(stream(...))` an ask on the same id waited 60 s
    for the lock and raised LockTimeoutError."""
    store = in_memory_store()
    c = create_in_process_client(model="m", generate=echo_model, store=store,
                                 lock=local_lock(timeout=2))  # fmt: skip
    peek = stream(c, "first", id="u")
    assert next(peek)["type"] == "text"
    assert ask(c, "second", id="u")["text"] == "re: second"  # not blocked by the peek
    done = [e for e in peek if e["type"] == "done"]
    assert done[0]["result"]["text"] == "re: first"
    assert [m["content"] for m in store["get"]("u")] == [
        "second", "re: second", "first", "re: first",
    ]  # fmt: skip


def test_a_dropped_stream_saves_nothing_and_releases_everything():
    store = in_memory_store()
    c = create_in_process_client(model="m", generate=echo_model, store=store,
                                 lock=local_lock(timeout=2))  # fmt: skip
    events = stream(c, "hi", id="u")
    next(events)
    events.close()
    assert store["get"]("u") is None
    assert ask(c, "after", id="u")["text"] == "re: after"

    async def main():
        agen = astream(c, "async hi", id="v")
        await agen.__anext__()
        await agen.aclose()
        return await arun(c, "async after", id="v")

    assert asyncio.run(main())["text"] == "re: async after"
    assert [m["content"] for m in store["get"]("v")] == ["async after", "re: async after"]


# ---- a stream answered with a whole JSON body ---------------------------------------------


class _JSONOnly(BaseHTTPRequestHandler):
    """A proxy that ignores `stream: true` and answers with one JSON body."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        body = json.dumps(openai_response(text_reply("whole answer"))).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_stream_answered_with_json_still_delivers_the_text():
    """Fails on the old main: on_text got nothing and an empty answer was saved."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JSONOnly)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    try:
        c = create_client(base_url=f"http://127.0.0.1:{server.server_port}/v1", model="m")
        got = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = ask(c, "hi", on_text=got.append)
    finally:
        server.shutdown()
    assert got == ["whole answer"] and r["text"] == "whole answer"
