"""Hooks, retries, deadlines, cancellation, suspension, request shaping and metrics,
each over the loopback fake provider (real HTTP) or the in-process client."""

import asyncio
import threading
import time

import httpx
import pytest

from toolnexus import (
    ProviderError,
    RunCancelledError,
    RunTimeoutError,
    arun,
    ask,
    conversation_store,
    create_client,
    create_in_process_client,
    define_tool,
    metrics,
    run,
    stream,
    tool_result,
    toolkit,
)
from toolnexus.core.transcript import safe_cuts
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.hooks import compactor
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

STYLES = sorted(_REGISTRY)  # every row of the dialect registry


def _said(content: dict):
    """Return a Gemini content's text when it is only text, else its parts."""
    parts = content["parts"]
    plain = all(set(p) == {"text"} for p in parts)
    return "".join(p["text"] for p in parts) if plain else parts


def _sent(body: dict) -> list:
    """Return a request's messages (chat, messages), input items (Responses) or contents
    (Gemini: as messages of role and content, "model" being the assistant)."""
    if "contents" in body:
        return [{"role": {"model": "assistant"}.get(c["role"], c["role"]), "content": _said(c)}
                for c in body["contents"]]  # fmt: skip
    return body["messages"] if "messages" in body else body["input"]


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@define_tool
def secret() -> str:
    """Return a secret."""
    return "the password is hunter2"


TK = toolkit(add, secret)


def client(fp, style="openai", **kw):
    return create_client(base_url=fp.url, style=style, model="m", **kw)


# ---- hooks ---------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_before_llm_replaces_messages_for_the_rest_of_the_run(style):
    seen = []

    def before_llm(ctx):
        seen.append((ctx["turn"], len(ctx["messages"]), ctx["model"], ctx["tools"] is TK))
        if ctx["turn"] == 1:
            return {"messages": list(ctx["messages"][-1:])}  # drop the old history
        return None

    history = [{"role": "user", "content": "old"}, {"role": "assistant", "content": "older"}]
    script = [tool_calls_reply(("add", {"a": 1, "b": 1})), text_reply("2")]
    with fake_provider(script) as fp:
        c = client(fp, style, hooks={"before_llm": before_llm})
        r = run(c, "new", toolkit=TK, history=history)
    assert seen == [(1, 3, "m", True), (2, 3, "m", True)]
    assert len(_sent(fp.requests[0]["body"])) == 1
    assert len(r["messages"]) == 4  # the replaced transcript is what is returned


def test_after_llm_observes_each_response():
    seen = []
    with fake_provider([text_reply("hi")]) as fp:
        run(client(fp, hooks={"after_llm": lambda ctx: seen.append(ctx["response"]["text"])}), "x")
    assert seen == ["hi"]


@pytest.mark.parametrize("style", STYLES)
def test_before_tool_short_circuits_and_rewrites_args(style):
    ran = []

    @define_tool
    def dangerous(x: int) -> str:
        """Do something dangerous."""
        ran.append(x)
        return f"did {x}"

    def before_tool(ctx):
        if ctx["name"] == "dangerous" and ctx["args"]["x"] > 10:
            return {"result": tool_result("vetoed by policy", True)}
        if ctx["name"] == "dangerous":
            return {"args": {"x": ctx["args"]["x"] * 2}}
        return None

    script = [
        tool_calls_reply(("dangerous", {"x": 99}), ("dangerous", {"x": 3})),
        text_reply("ok"),
    ]
    with fake_provider(script) as fp:
        r = run(client(fp, style, hooks={"before_tool": before_tool}), "go",
                toolkit=toolkit(dangerous))  # fmt: skip
    assert ran == [6]
    assert [(t["output"], t["is_error"]) for t in r["tool_calls"]] == [
        ("vetoed by policy", True),
        ("did 6", False),
    ]


def test_after_tool_transforms_results_before_the_model_sees_them():
    def redact(ctx):
        return {
            "result": ctx["result"].set("output", ctx["result"]["output"].replace("hunter2", "***"))
        }

    with fake_provider([tool_calls_reply(("secret", {})), text_reply("ok")]) as fp:
        r = run(client(fp, hooks={"after_tool": redact}), "go", toolkit=TK)
    assert r["tool_calls"][0]["output"] == "the password is ***"
    assert "hunter2" not in str(fp.requests[1]["body"])


def test_a_hook_that_raises_ends_the_run_and_saves_nothing():
    def gate(ctx):
        raise PermissionError("route closed")

    with fake_provider([text_reply("never")]) as fp:
        c = client(fp, hooks={"before_llm": gate})
        with pytest.raises(PermissionError, match="route closed"):
            ask(c, "hi", id="g")
    assert fp.requests == [] and conversation_store(c)["get"]("g") is None


@pytest.mark.parametrize("style", STYLES)
def test_compactor_keeps_system_summary_and_a_safe_tail(style):
    history = []
    for i in range(12):
        history += [{"role": "user", "content": f"question {i} " + "x" * 200},
                    {"role": "assistant", "content": f"answer {i} " + "y" * 200}]  # fmt: skip
    with fake_provider([tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("3")]) as fp:
        c = client(fp, style, hooks={"before_llm": compactor(400)})
        r = run(c, "and now?", toolkit=TK, history=history)
    sent = _sent(fp.requests[0]["body"])
    assert len(sent) < len(history)
    first = (
        sent[0]["content"] if isinstance(sent[0]["content"], str) else sent[0]["content"][0]["text"]
    )
    assert first.startswith("[Summary of the earlier conversation]") and "question 0" in first
    assert 0 in safe_cuts(sent)  # the tail never starts with an orphaned tool result
    assert [m["role"] for m in sent[-1:]] == ["user"]
    assert r["messages"][0] == _sent(fp.requests[1]["body"])[0]


def test_compactor_changes_nothing_under_the_budget():
    hook = compactor(10_000)
    msgs = [{"role": "user", "content": "short"}]
    assert hook({"messages": msgs, "tools": None, "model": "m", "turn": 1}) is None


# ---- resilience ------------------------------------------------------------------


def test_retries_429_and_5xx_honouring_retry_after_zero():
    script = [
        {"status": 429, "body": "slow down", "headers": {"retry-after": "0"}},
        {"status": 503, "body": "busy", "headers": {"Retry-After": "0"}},
        text_reply("finally"),
    ]
    with fake_provider(script) as fp:
        t = time.monotonic()
        r = run(client(fp, retry_base_ms=5000), "hi")  # Retry-After 0: no backoff wait
    assert r["text"] == "finally" and len(fp.requests) == 3 and time.monotonic() - t < 2


def test_retries_are_bounded_and_non_retryable_fails_at_once():
    with fake_provider([{"status": 500, "body": "e"}] * 5) as fp:
        with pytest.raises(ProviderError) as e:
            run(client(fp, retries=2, retry_base_ms=1), "hi")
    assert e.value.status == 500 and len(fp.requests) == 3
    with fake_provider([{"status": 400, "body": "bad"}, text_reply("x")]) as fp:
        with pytest.raises(ProviderError):
            run(client(fp, retry_base_ms=1), "hi")
    assert len(fp.requests) == 1


def test_on_error_overrides_within_retries():
    infos = []

    def on_error(info):
        infos.append((info["attempt"], info.get("status"), info["retryable"]))
        return "retry"

    with fake_provider([{"status": 400, "body": "x"}] * 4) as fp:
        with pytest.raises(ProviderError):
            run(client(fp, retries=1, retry_base_ms=1, on_error=on_error), "hi")
    assert len(fp.requests) == 2 and infos == [(1, 400, False), (2, 400, False)]
    with fake_provider([{"status": 503, "body": "x"}, text_reply("x")]) as fp:
        with pytest.raises(ProviderError):
            run(client(fp, retry_base_ms=1, on_error=lambda info: "fail"), "hi")
    assert len(fp.requests) == 1


def test_network_errors_are_retried():
    with fake_provider([{"drop": True}, text_reply("back")]) as fp:
        assert run(client(fp, retry_base_ms=1), "hi")["text"] == "back"


@pytest.mark.parametrize("streaming", [False, True])
def test_deadline_aborts_the_request_in_flight_and_is_never_retried(streaming):
    with fake_provider([{"stall": 3, "content": "late"}, text_reply("x")]) as fp:
        c = client(fp, timeout_ms=300, retries=2, retry_base_ms=1)
        t = time.monotonic()
        with pytest.raises(RunTimeoutError):
            if streaming:
                list(stream(c, "hi", conversation_id="d"))
            else:
                ask(c, "hi", id="d")
        assert time.monotonic() - t < 2.5
    assert len(fp.requests) == 1 and conversation_store(c)["get"]("d") is None


def test_cancel_token_aborts_a_run():
    cancel = threading.Event()
    with fake_provider([{"stall": 3, "content": "late"}]) as fp:
        c = client(fp)
        threading.Timer(0.2, cancel.set).start()
        t = time.monotonic()
        with pytest.raises(RunCancelledError):
            run(c, "hi", cancel=cancel, conversation_id="c")
        assert time.monotonic() - t < 2
    assert conversation_store(c)["get"]("c") is None


def test_async_cancel_and_deadline():
    async def go(url):
        c = create_client(base_url=url, model="m", timeout_ms=300)
        with pytest.raises(RunTimeoutError):
            await arun(c, "hi")
        cancel = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, cancel.set)
        c2 = create_client(base_url=url, model="m")
        with pytest.raises(RunCancelledError):
            await arun(c2, "hi", cancel=cancel)

    with fake_provider([{"stall": 2, "content": "x"}] * 2) as fp:
        t = time.monotonic()
        asyncio.run(go(fp.url))
        assert time.monotonic() - t < 3


# ---- suspension ------------------------------------------------------------------


def approval_tool(log):
    @define_tool
    def transfer(amount: int, _resume: dict | None = None) -> dict:
        """Transfer money (needs approval)."""
        log.append(_resume)
        if _resume is None:
            request = {"id": f"approve-{amount}", "kind": "approval", "prompt": f"Send {amount}?"}
            return {"output": "waiting for approval", "is_error": False,
                    "metadata": {"pending": request}}  # fmt: skip
        return f"sent {amount} ({_resume['data']})"

    return transfer


@pytest.mark.parametrize("style", STYLES)
def test_wait_for_resumes_the_same_call_with_the_answer(style):
    log, asked = [], []

    def wait_for(request):
        asked.append(request["id"])
        return {"id": request["id"], "ok": True, "data": "approved by ann"}

    script = [tool_calls_reply(("transfer", {"amount": 5})), text_reply("done")]
    with fake_provider(script) as fp:
        c = client(fp, style, wait_for=wait_for)
        events = list(stream(c, "pay", toolkit=toolkit(approval_tool(log))))
    kinds = [e["type"] for e in events]
    assert asked == ["approve-5"] and kinds.index("pending") < kinds.index("tool_result")
    r = events[-1]["result"]
    assert r["status"] == "done" and r["tool_calls"][0]["output"] == "sent 5 (approved by ann)"
    assert log[0] is None and log[1]["ok"] is True


def test_declined_answer_feeds_back_an_error():
    log = []
    c = create_in_process_client(
        model="m",
        generate=lambda r: {"content": "ok"} if r["messages"][-1]["role"] == "tool"
        else {"tool_calls": [{"name": "transfer", "arguments": {"amount": 1}}]},
        wait_for=lambda req: {"id": req["id"], "ok": False},
    )  # fmt: skip
    r = run(c, "pay", toolkit=toolkit(approval_tool(log)))
    assert r["tool_calls"][0]["is_error"] and "declined" in r["tool_calls"][0]["output"]


def test_without_wait_for_the_run_halts_pending_and_a_later_run_resumes():
    log = []
    script = [
        tool_calls_reply(("transfer", {"amount": 7}), ("transfer", {"amount": 8})),
        text_reply("I have asked for approval."),
    ]
    with fake_provider(script) as fp:
        c = client(fp)
        r = ask(c, "pay", toolkit=toolkit(approval_tool(log)), id="p")
        assert r["status"] == "pending" and r["pending"]["id"] == "approve-7"
        assert len(fp.requests) == 1
        stored = conversation_store(c)["get"]("p")
        assert stored == r["messages"] and stored[-1]["role"] == "tool"
        outs = [m["content"] for m in stored if m["role"] == "tool"]
        assert outs[0] == "waiting for approval" and "another request" in outs[1]
        r2 = ask(c, "yes, approved", toolkit=toolkit(approval_tool(log)), id="p")
    assert r2["status"] == "done"
    assert [m["content"] for m in _sent(fp.requests[1]["body"])][-1] == "yes, approved"


# ---- request shaping, transport, metrics ---------------------------------------


def test_request_params_body_transform_and_refused_keys():
    with fake_provider([text_reply("x")]) as fp:
        with pytest.raises(ValueError, match=r"may not set \['model', 'messages'\]"):
            client(fp, request_params={"temperature": 0.1, "messages": [], "model": "other"})
        c0 = client(fp, request_params={"temperature": 0.1},
                    body_transform=lambda b: {**b, "seed": 7, "model": "other"})  # fmt: skip
        run(c0, "hi")
    body = fp.requests[0]["body"]
    assert body["temperature"] == 0.1 and body["seed"] == 7 and body["model"] == "other"
    assert body["messages"][-1]["content"] == "hi"


def test_transport_option_takes_an_httpx_mock_transport():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer k"
        return httpx.Response(200, json={"choices": [{"message": {"content": "mocked"}}]})

    c = create_client(base_url="http://nowhere.invalid/v1", model="m", api_key="k",
                      transport=httpx.MockTransport(handler))  # fmt: skip
    assert run(c, "hi")["text"] == "mocked"
    assert asyncio.run(arun(c, "hi"))["text"] == "mocked"


def test_metrics_render_prometheus_and_on_metric_sees_every_event():
    events = []
    script = [tool_calls_reply(("add", {"a": 1, "b": 1})), text_reply("2")]
    with fake_provider(script) as fp:
        c = client(fp, api_key="sk-never-in-metrics", on_metric=events.append)
        ask(c, "go", toolkit=TK, id="user-secret-id")
    assert [e["event"] for e in events] == ["llm", "tool", "llm", "run"]
    text = metrics(c)
    assert 'toolnexus_llm_requests_total{model="m",status="ok"} 2' in text
    assert 'toolnexus_tool_calls_total{tool="add",source="function",is_error="false"} 1' in text
    assert 'toolnexus_llm_tokens_total{type="prompt"} 20' in text
    assert 'toolnexus_run_errors_total{model="m"} 0' in text
    assert "user-secret-id" not in text and "sk-never" not in text
    assert all("user-secret-id" not in str(e) and "sk-never" not in str(e) for e in events)


# ---- async twins ---------------------------------------------------------------


def test_async_tools_and_stores_plain_or_async_run_concurrently():
    started = []

    @define_tool
    async def slow_async(n: int) -> str:
        """Sleep asynchronously."""
        started.append(n)
        await asyncio.sleep(0.3)
        return f"a{n}"

    @define_tool
    def slow_sync(n: int) -> str:
        """Sleep in a thread."""
        time.sleep(0.3)
        return f"s{n}"

    saved = {}

    async def aget(id):
        return saved.get(id)

    async def asave(id, t):
        saved[id] = t

    def gen(req):
        if req["messages"][-1]["role"] == "tool":
            return {"content": "done"}
        return {"tool_calls": [{"name": "slow_async", "arguments": {"n": 1}},
                               {"name": "slow_sync", "arguments": {"n": 2}},
                               {"name": "slow_async", "arguments": {"n": 3}}]}  # fmt: skip

    c = create_in_process_client(model="m", generate=gen, store={"get": aget, "save": asave})
    tk = toolkit(slow_async, slow_sync)
    t = time.monotonic()
    r = asyncio.run(arun(c, "go", toolkit=tk, conversation_id="z"))
    assert time.monotonic() - t < 0.8  # three 0.3 s calls at once, not one after another
    assert [x["output"] for x in r["tool_calls"]] == ["a1", "s2", "a3"]
    assert saved["z"] == r["messages"]
    # The sync driver runs the same async tool too.
    assert run(c, "go", toolkit=tk)["tool_calls"][0]["output"] == "a1"


def test_an_async_only_transport_is_a_clear_error_in_the_sync_driver():
    async def handler(request):
        return httpx.Response(200, json={"choices": [{"message": {"content": "async only"}}]})

    class AsyncOnly(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request):
            return await handler(request)

    c = create_client(base_url="http://127.0.0.1:9/v1", model="m", transport=AsyncOnly())
    assert asyncio.run(arun(c, "hi"))["text"] == "async only"
    with pytest.raises(TypeError, match="async-only"):
        run(c, "hi")
    with pytest.raises(ValueError, match="httpx transport"):
        create_client(base_url="http://x/v1", model="m", transport=object())


def test_async_lock_waiters_never_starve_the_holder_nor_leak_the_lock():
    """Many concurrent aasks on one id: each waits its turn, all are saved, none is lost."""

    async def slow_model(req):
        await asyncio.sleep(0.01)
        return {"content": f"answer {len(req['messages'])}"}

    c = create_in_process_client(model="m", generate=slow_model)

    async def main():
        await asyncio.gather(*(arun(c, f"q{i}", conversation_id="one") for i in range(24)))
        # A cancelled waiter must not leave the lock taken.
        task = asyncio.ensure_future(arun(c, "cancel me", conversation_id="one"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await asyncio.wait_for(arun(c, "after", conversation_id="one"), timeout=5)

    r = asyncio.run(main())
    users = [m["content"] for m in r["messages"] if m["role"] == "user"]
    assert sorted(users[:24]) == sorted(f"q{i}" for i in range(24)) and users[-1] == "after"


def test_async_driver_loads_and_saves_in_the_locks_own_hand_offs():
    """Take+load in one worker thread and save+release in one: a failed save still releases."""
    seen: list = []

    class Lock:
        def __call__(self, id):
            return self

        def __enter__(self):
            seen.append(("enter", threading.get_ident()))

        def __exit__(self, *exc):
            seen.append(("exit", threading.get_ident()))

    inner = in_memory_store()

    def get(id):
        seen.append(("get", threading.get_ident()))
        return inner["get"](id)

    def save(id, t):
        seen.append(("save", threading.get_ident()))
        if "fail" in t[-2]["content"]:
            raise RuntimeError("disk full")
        inner["save"](id, t)

    c = create_in_process_client(
        model="m", generate=lambda req: {"content": "ok"}, store={"get": get, "save": save},
        lock=Lock(),
    )  # fmt: skip
    assert asyncio.run(arun(c, "hi", conversation_id="x"))["text"] == "ok"
    (enter, t1), (load, t2), (store, t3), (leave, t4) = seen
    assert (enter, load, store, leave) == ("enter", "get", "save", "exit")
    assert t1 == t2 and t3 == t4  # two hand-offs for the four calls
    seen.clear()
    with pytest.raises(RuntimeError, match="disk full"):
        asyncio.run(arun(c, "fail", conversation_id="x"))
    assert [k for k, _ in seen] == ["enter", "get", "save", "exit"]  # released all the same
    assert len(inner["get"]("x")) == 2  # the failed exchange saved nothing


def test_a_task_cancelled_during_its_lock_and_load_hand_off_is_cancelled_after_it():
    """The hand-off ends (the lock taken in it is released by the flow), then the task is
    cancelled; twice cancelled, the same; nothing is saved and the next run goes on."""
    held: list = []

    class Lock:
        def __call__(self, id):
            return self

        def __enter__(self):
            held.append("enter")

        def __exit__(self, *exc):
            held.append("exit")

    inner = in_memory_store()
    entered, cancelled = threading.Event(), threading.Event()

    def slow_get(id):
        entered.set()
        cancelled.wait(10)  # the task is cancelled meanwhile
        held.append("get")
        return inner["get"](id)

    c = create_in_process_client(model="m", generate=lambda req: {"content": "ok"},
                                 store={**inner, "get": slow_get}, lock=Lock())  # fmt: skip

    async def main(times: int):
        task = asyncio.ensure_future(arun(c, "hi", conversation_id="x"))
        while not entered.is_set():  # the hand-off is under way (its lock taken)
            await asyncio.sleep(0.005)
        for _ in range(times):
            task.cancel()
            await asyncio.sleep(0.01)
        cancelled.set()  # now the hand-off may end
        with pytest.raises(asyncio.CancelledError):
            await task
        return await arun(c, "after", conversation_id="x")

    for times in (1, 2):
        held.clear()
        entered.clear()
        cancelled.clear()
        assert asyncio.run(main(times))["text"] == "ok"
        assert held == ["enter", "get", "exit"] * 2
    assert [m["content"] for m in inner["get"]("x")] == ["after", "ok"] * 2


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_request_body_with_nan_or_infinity_is_refused_before_it_is_sent(bad):
    # NaN and Infinity are not JSON: json's encoder writes them bare, every provider
    # answers 400, and a stored conversation holding one is refused on every turn.
    with fake_provider([text_reply("x"), text_reply("y")]) as fp:
        c = client(fp, request_params={"temperature": bad})
        with pytest.raises(ValueError, match="not JSON.*NaN or Infinity"):
            run(c, "hi")
        history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b",
                                                      "x_score": bad}]  # fmt: skip
        with pytest.raises(ValueError, match="not JSON.*NaN or Infinity"):
            run(client(fp), "hi", history=history)
        assert fp.requests == []
