"""Clients as values, and the sync driver: the only place the loop does I/O.

The loop itself is `loop.run_flow`, a generator of effects; `_perform` below does
them (HTTP, tools, sleeps, the host's answers) and `_finish` is the one exit point
(store save, message log, run metric).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from operator import itemgetter
from typing import Any

from pyrsistent import PMap, PRecord, field, freeze, pmap, thaw

from .core import flow as loop
from .core.errors import ProviderError
from .drivers.guard import Guard
from .store.locks import local_lock
from .store.memory import in_memory_store
from .core.toolkit import execute as execute_tool
from .core.toolkit import toolkit
from .core.transcript import freeze_transcript, repair
from .drivers.transport import TURN, Endpoint, default_transport, send, send_stream
from .core.wire import DIALECTS
from .core.wire import openai as openai_wire

__all__ = [
    "create_client",
    "create_in_process_client",
    "run",
    "ask",
    "stream",
    "conversation",
    "conversation_store",
    "metrics",
    "get_chat_history",
    "clear_chat_history",
    "Client",
]

_KEY_ENV = {"openai": ("OPENAI_API_KEY", "OPENROUTER_API_KEY"), "anthropic": ("ANTHROPIC_API_KEY",)}
_OPTIONS = {
    "base_url", "style", "model", "api_key", "headers", "system_prompt", "max_turns",
    "store", "lock", "hooks", "retries", "retry_base_ms", "timeout_ms", "on_error",
    "on_metric", "wait_for", "request_params", "body_transform", "transport",
    "message_log", "strict_log", "lookup_tool",
}  # fmt: skip
_HOOKS = {"before_llm", "after_llm", "before_tool", "after_tool"}
_RESERVED_PARAMS = {"messages", "tools", "stream"}


class Secret:
    """A string that never shows itself in a repr, str or log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value

    def reveal(self) -> str | None:
        """Return the secret value (for a request header, nowhere else)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)" if self._value else "Secret(None)"

    __str__ = __repr__

    def __reduce__(self):  # never pickled into a cache or a store by accident
        raise TypeError("a Secret cannot be pickled")


class Client(PRecord):
    """An immutable client value; its repr hides the key and the headers."""

    style = field()
    base_url = field()
    model = field()
    api_key = field()
    system_prompt = field()
    max_turns = field()
    store = field()
    lock = field()
    options = field()  # the remaining options, as given (hooks, retries, on_metric, ...)
    endpoint = field()  # Endpoint for HTTP clients, None in process
    generate = field()  # the host function of an in-process client
    transport = field()  # the sync transport: an httpx one, or our httpcore pool (default)
    atransports = field()  # {event loop: async transport}, filled by the async driver
    pool = field()  # the thread pool for a turn's tool calls
    quick_tools = field()  # {tool name: whether its last call ran quick}: see is_quick
    lock_pool = field()  # threads the async driver blocks on conversation locks
    flows = field()  # {events: the run_flow configuration}, built on first use
    sink = field()  # the metrics sink behind metrics(client)

    def __repr__(self) -> str:
        store = self.store.get("desc", "store") if isinstance(self.store, Mapping) else "store"
        return (
            f"Client(style={self.style!r}, base_url={self.base_url!r}, model={self.model!r}, "
            f"max_turns={self.max_turns}, store={store})"
        )

    __str__ = __repr__


# Field reads as properties: a PRecord attribute read otherwise first fails the normal
# lookup (an AttributeError raised and caught inside) and costs 5x more; the drivers
# read fields many times a run.
for _name in Client._precord_fields:
    setattr(Client, _name, property(itemgetter(_name), doc=f"The client's {_name}."))
del _name


def _check(options: Mapping) -> None:
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"unknown client option(s): {sorted(unknown)}; known: {sorted(_OPTIONS)}")
    style = options.get("style", "openai")
    if style not in DIALECTS:
        raise ValueError(f"unknown style {style!r}: expected one of {sorted(DIALECTS)}")
    for name, least in (("max_turns", 1), ("retries", 0)):
        v = options.get(name, least)
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {v!r}")
    for name in ("retry_base_ms", "timeout_ms"):
        v = options.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < 0):
            raise ValueError(f"{name} must be a non-negative number, got {v!r}")
    store = options.get("store")
    if store is not None and not (callable(store.get("get")) and callable(store.get("save"))):
        raise ValueError("store must be a mapping with callable 'get' and 'save'")
    hooks = options.get("hooks") or {}
    if set(hooks) - _HOOKS or not all(callable(h) for h in hooks.values()):
        raise ValueError(f"hooks must map some of {sorted(_HOOKS)} to functions")
    for name in ("on_error", "on_metric", "wait_for", "body_transform", "lock"):
        if options.get(name) is not None and not callable(options[name]):
            raise ValueError(f"{name} must be a function")


def _params(options: Mapping) -> PMap:
    params = dict(options.get("request_params") or {})
    refused = sorted(_RESERVED_PARAMS & set(params))
    if refused:
        warnings.warn(f"request_params {refused} are ignored: the loop owns them", stacklevel=3)
    return freeze({k: v for k, v in params.items() if k not in _RESERVED_PARAMS})


def _base(options: Mapping, style: str, **parts: Any) -> Client:
    from concurrent.futures import ThreadPoolExecutor

    try:  # TEMP until metrics.py lands
        from .prometheus import metrics_sink
    except ImportError:

        def metrics_sink():
            return {"on_metric": lambda e: None, "render": lambda: ""}

    rest = {k: v for k, v in options.items() if k not in Client._precord_fields}
    rest["request_params"] = _params(options)
    return Client(
        style=style,
        base_url=options.get("base_url"),
        model=options["model"],
        api_key=Secret(options.get("api_key")),
        system_prompt=options.get("system_prompt") or "",
        max_turns=options.get("max_turns", 10),
        store=options.get("store") or in_memory_store(),
        # A store may pair itself with a cross-process lock ("lock"): taken by default.
        lock=options.get("lock") or _store_lock(options.get("store")) or local_lock(),
        options=pmap(rest),
        atransports={},
        quick_tools={},
        flows={},
        # Long-lived on the client, so no run pays for creating threads or connections.
        pool=ThreadPoolExecutor(max_workers=16, thread_name_prefix="toolnexus-tool"),
        # Threads start on demand: only the async driver waiting on locks uses them.
        lock_pool=ThreadPoolExecutor(max_workers=256, thread_name_prefix="toolnexus-lock"),
        sink=metrics_sink(),
        **{"endpoint": None, "generate": None, "transport": None, **parts},
    )


def create_client(**options: Any) -> Client:
    """Return a client value for an OpenAI-style or Anthropic-style endpoint.

    Bad options raise ValueError at once. The key comes from `api_key` or the
    environment and reaches request headers only.
    """
    _check(options)
    base_url = options.get("base_url")
    if not base_url:
        raise ValueError("base_url is required (e.g. 'https://api.openai.com/v1')")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    if not options.get("model"):
        raise ValueError("model is required")
    style = options.get("style", "openai")
    key = options.get("api_key") or next(
        (os.environ[v] for v in _KEY_ENV[style] if os.environ.get(v)), None
    )
    codec = DIALECTS[style]
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        **codec.headers(key),
        **dict(options.get("headers") or {}),
    }
    endpoint = Endpoint(codec.url(options["base_url"]), headers, codec, key)
    # One pooled transport per client: connections are reused across turns and runs.
    transport = options.get("transport")
    if transport is None:
        transport = default_transport()
    elif not (hasattr(transport, "handle_request") or hasattr(transport, "handle_async_request")):
        raise ValueError(
            "transport must be an httpx transport (e.g. httpx.HTTPTransport()) or an "
            f"httpcore connection pool, got {type(transport).__name__}"
        )
    return _base({**options, "api_key": key}, style, endpoint=endpoint, transport=transport)


def create_in_process_client(*, model: str, generate: Callable[[dict], Any], **options: Any):
    """Return a client whose model is a host function `generate(request) -> reply`.

    The request is {"model", "messages", "tools"} with openai-shaped messages; the reply
    is {"content": str} or {"tool_calls": [{"id"?, "name", "arguments"}]}, plus an
    optional "usage". `generate` may be `async def` (awaited by the async driver). No
    URL, no key.
    """
    if not callable(generate):
        raise ValueError("generate must be a function(request) -> reply")
    if not model:
        raise ValueError("model is required")
    if options.get("style", "openai") != "openai":
        raise ValueError("an in-process client speaks the openai message shape only")
    _check(options)
    return _base({**options, "model": model}, "openai", generate=generate)


def conversation_store(client: Client) -> dict:
    """Return the exact store the client uses (yours, or the default it built)."""
    return client.store


def metrics(client: Client) -> str:
    """Return the client's metrics in the Prometheus text format."""
    return client.sink["render"]()


def get_chat_history(client: Client, **filters: Any) -> tuple:
    """Return the client's message log entries matching `filters` (see the log's query)."""
    from .history.wiring import require_log

    return require_log(client.options.get("message_log"))["query"](**filters)


def clear_chat_history(client: Client, before: Any = None) -> int:
    """Remove the client's message log entries up to `before` (all if None); return how many."""
    from .history.wiring import require_log

    return require_log(client.options.get("message_log"))["clear"](before=before)


# ---- shared by the sync and async drivers (no I/O here) ---------------------


def in_process_request(body: Mapping) -> dict:
    """Return the request an in-process `generate` receives (plain lists and dicts)."""
    return {
        "model": body["model"],
        "messages": thaw(body["messages"]),
        "tools": body.get("tools", []),
    }


def flow_config(client: Client, events: bool) -> dict:
    """Return the `loop.run_flow` configuration of a client (a plain dict: read per turn).

    Built once per client value and kind of run (its options never change), not per run.
    """
    made = client.flows.get(events)
    if made is None:
        made = client.flows[events] = _flow_config(client, events)
    return made


def _flow_config(client: Client, events: bool) -> dict:
    o = client.options
    from .skills import system_for

    transform = o.get("body_transform")
    system_prompt = client.system_prompt
    return {
        "model": client.model,
        "system": lambda tk: system_for(system_prompt, tk),
        "params": o["request_params"],
        "hooks": o.get("hooks") or {},
        "max_turns": client.max_turns,
        "retries": o.get("retries", 2),
        "retry_base_ms": o.get("retry_base_ms", 500),
        "on_error": o.get("on_error"),
        "wait_for": o.get("wait_for"),
        "transform": (lambda b: transform(b)) if transform else (lambda b: b),
        "events": events,
    }


def as_toolkit(tk: Any) -> Any:
    """Return `tk` as a toolkit: a toolkit, None, or a list of tool maps (made one)."""
    if tk is None or (isinstance(tk, Mapping) and "index" in tk and "tools" in tk):
        return tk
    if isinstance(tk, list | tuple):
        return toolkit(*tk)
    raise TypeError(f"toolkit must be toolkit(...) or a list of tools, got {type(tk).__name__}")


def run_toolkit(client: Client, tk: Any, conversation_id: str | None) -> Any:
    """Return the toolkit of a run: `tk`, plus the scoped history lookup tool when due."""
    tk = as_toolkit(tk)
    log = client.options.get("message_log")
    if log is None:
        return tk
    from .history.wiring import with_lookup_tool

    return with_lookup_tool(tk, log, conversation_id, client.options.get("lookup_tool", True))


def start_state(client: Client, prompt: str, loaded: Any) -> Mapping:
    """Return the loop's first state over a loaded transcript (repaired: see transcript.repair)."""
    return loop.start(client.style, repair(freeze_transcript(loaded)), prompt)


def check_run(prompt: Any, conversation_id: Any) -> None:
    """Raise a clear error for a prompt or conversation id a run cannot take."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise ValueError(f"conversation_id must be a non-empty string, got {conversation_id!r}")


def emit_metric(client: Client, event: Mapping) -> None:
    """Record a metric event in the client's sink and pass it to `on_metric`."""
    metric_emitter(client)(event)


def metric_emitter(client: Client) -> Callable[[Mapping], None]:
    """Return fn(event) recording into the client's sink and `on_metric` (one lookup a run)."""
    record, user = client.sink["on_metric"], client.options.get("on_metric")
    if user is None:
        return record

    def emit(event: Mapping) -> None:
        record(event)
        user(event)

    return emit


def run_metric(client: Client, state: PMap | None, seconds: float, error: Any = None) -> None:
    """Emit the run's metric (never a conversation id or key)."""
    event = {
        "event": "run",
        "model": client.model,
        "duration_s": seconds,
        "error": error is not None,
    }
    if state is not None:
        event.update(status=state["status"], turns=state["turns"])
    emit_metric(client, event)


def save_exchange(
    client: Client, conversation_id: str, messages: Any, prompt: str, result: PMap, t0: Any
) -> bool:
    """Save the transcript; return True when its log entries were written with it.

    A store with "save_logged" (PostgreSQL) writes the exchange's message-log entries in
    the save's own statement when the log lives on its pool: one commit, and no window
    where the transcript holds an exchange that the log lacks. Otherwise a plain save,
    and the caller records the log afterwards, as without it.
    """
    save_logged = logged_save(client)
    if save_logged is not None:
        from .history.wiring import exchange_entries

        try:
            entries = exchange_entries(conversation_id, prompt, result["text"], t0)
        except Exception:  # an entry the log refuses: record_log reports it afterwards
            entries = None
        if entries is not None:
            log = client.options["message_log"]
            return bool(save_logged(conversation_id, messages, log, entries))
    client.store["save"](conversation_id, messages)
    return False


def logged_save(client: Client) -> Callable | None:
    """Return the store's "save_logged" when the client has a log and it applies, else None.

    Only while "save" is still the store's own: a decorator that wraps "save" (capped,
    namespaced, ...) and copies the rest of the map must not be bypassed.
    """
    if client.options.get("message_log") is None:
        return None
    save_logged = client.store.get("save_logged")
    if save_logged is None or getattr(save_logged, "save", None) is not client.store["save"]:
        return None
    return save_logged


def record_log(client: Client, conversation_id: str | None, prompt: str, result: PMap, t0: Any):
    """Record the exchange in the message log, when the client has one."""
    log = client.options.get("message_log")
    if log is None:
        return
    from .history.wiring import record_exchange

    record_exchange(
        log,
        conversation_id,
        prompt,
        result["text"],
        strict=bool(client.options.get("strict_log")),
        on_metric=lambda e: emit_metric(client, e),
        asked_at=t0,
    )


# ---- the sync driver ---------------------------------------------------------


class _Guard(Guard):
    """The run's deadline and cancel token, with the sync driver's blocking waits."""

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            self.check()
            left = min(end - time.monotonic(), self.remaining(600.0))
            if left <= 0:
                return
            # An Event wait wakes at once on cancel; a plain sleep would not.
            (self.cancel or threading.Event()).wait(min(left, 0.05))

    def wait(self, future: Any) -> Any:
        """Return a future's result, abandoning it on deadline or cancel."""
        while True:
            self.check()
            try:
                return future.result(timeout=min(0.02, self.remaining(600.0)))
            except TimeoutError:
                continue


try:
    from resource import RUSAGE_THREAD, getrusage

    def _switches() -> int:
        """Return how many times this thread has slept in the kernel (it blocked, waited)."""
        return getrusage(RUSAGE_THREAD).ru_nvcsw

except ImportError:  # no per-thread count outside Linux: no tool is ever taken for quick
    from itertools import count

    _switches = count().__next__


def _run_tool(tk: Any, call: Mapping) -> tuple[PMap, float, bool]:
    """Run one call; return (result, seconds, whether it ran without ever blocking)."""
    n0, t0 = _switches(), time.perf_counter()
    r = execute_tool(tk, call["name"], call["args"])
    if hasattr(r, "__await__"):  # an async tool, from the sync driver
        import asyncio

        r = asyncio.run(r)
    seconds = time.perf_counter() - t0
    return r, seconds, _switches() == n0


# A tool whose last call never blocked and took at most this long runs on the calling
# thread when every call of its turn is such: waking a pool thread, and handing the GIL
# back and forth, costs more than running it. A call that blocked even once (I/O, a
# sleep, a lock, the GIL, another call of its turn) is not "quick": calls that wait on
# each other always include one that blocked, so they keep overlapping on the pool.
QUICK_TOOL_S = 0.0005
_SEEN_MAX = 4096  # names remembered per client (a crude bound for generated tool names)


def is_quick(client: Client, call: Mapping) -> bool:
    """Return whether a call's tool last ran quick (see QUICK_TOOL_S); unknown: not quick."""
    return client.quick_tools.get(call["name"], False)


def execute_calls(client: Client, tk: Any, calls: Sequence[Mapping]) -> list:
    """Run a turn's calls concurrently on threads; return [(result, seconds)] in call order.

    When every call is quick (see QUICK_TOOL_S) they run here, one after another. Else
    this thread runs the first while the pool starts the rest; calls the pool has not
    started by the time this thread is free are taken back and run here: slow calls
    still overlap, and fast ones skip a thread hand-off.
    """
    if all(is_quick(client, c) for c in calls):
        ran = [_run_tool(tk, c) for c in calls]
    else:
        rest = [client.pool.submit(_run_tool, tk, c) for c in calls[1:]]
        ran = [_run_tool(tk, calls[0])]
        for call, future in zip(calls[1:], rest, strict=True):
            ran.append(_run_tool(tk, call) if future.cancel() else future.result())
    quick: dict = {}  # a tool called twice is quick only if both calls were
    for call, (_, seconds, unblocked) in zip(calls, ran, strict=True):
        name = call["name"]
        quick[name] = quick.get(name, True) and unblocked and seconds <= QUICK_TOOL_S
    seen = client.quick_tools
    if len(seen) > _SEEN_MAX:
        seen.clear()
    seen.update(quick)
    return [(r, seconds) for r, seconds, _ in ran]


def _generate(client: Client, body: Mapping, turn_no: int) -> PMap:
    out = client.generate(in_process_request(body))
    if hasattr(out, "__await__"):
        import asyncio

        out = asyncio.run(out)
    return openai_wire.parse_generated(out, turn_no)


def _llm(client: Client, body: Mapping, turn_no: int, guard: _Guard, streaming: bool):
    """Perform one model call; yield text events when streaming; return the turn."""
    endpoint, transport = client.endpoint, client.transport
    if endpoint is None:
        turn = _generate(client, body, turn_no)
        if streaming and turn["text"]:
            yield pmap({"type": "text", "delta": turn["text"]})
        return turn
    if not hasattr(transport, "handle_request"):
        raise TypeError("this client's transport is async-only: use arun, aask or astream")
    if streaming:
        for item in send_stream(transport, endpoint, body, guard.remaining(600.0), guard.check):
            if item["type"] == TURN:
                return item["turn"]
            yield item
        raise ProviderError("the stream ended without a turn", url=endpoint.url)
    if guard.cancel is None:  # a deadline alone is the request's own timeout
        return send(transport, endpoint, body, guard.remaining(600.0))
    return guard.wait(client.pool.submit(send, transport, endpoint, body, 600.0))


def _perform(client: Client, flow: Any, guard: _Guard, streaming: bool) -> Iterator[PMap]:
    """Do the effects `flow` asks for; yield stream events; return the final state."""
    value, error = None, None
    emit = metric_emitter(client)
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        kind = effect[0]
        if kind == "clock":
            value = time.perf_counter()
        elif kind == "llm":
            guard.check()
            deltas = _llm(client, effect[1], effect[2], guard, streaming)
            streamed = False
            try:
                while True:
                    try:
                        item = next(deltas)
                    except StopIteration as stop:
                        value = stop.value
                        break
                    streamed = True
                    yield item
            except ProviderError as e:
                guard.after_failure()  # a timeout the deadline caused is an abort
                if streamed:  # text already reached the consumer: a retry would repeat it
                    raise
                error = e  # thrown into the flow, which decides to retry or fail
        elif kind == "tools":
            guard.check()
            value = execute_calls(client, effect[1], effect[2])
        elif kind == "event":
            yield effect[1]
        elif kind == "metric":
            emit(effect[1])
        elif kind == "sleep":
            guard.sleep(effect[1])
        elif kind == "wait_for":
            value = client.options["wait_for"](effect[1])
        else:  # pragma: no cover - a new effect without a performer is our bug
            raise RuntimeError(f"unknown effect {kind!r}")


def _exchange(
    client: Client,
    prompt: str,
    toolkit: Any,
    history: Sequence | None,
    conversation_id: str | None,
    cancel: Any,
    streaming: bool,
) -> Iterator[PMap]:
    """One exchange: lock, load, run the flow, and finish; yields stream events."""
    check_run(prompt, conversation_id)
    from datetime import UTC, datetime

    asked_at, t0 = datetime.now(UTC), time.perf_counter()
    guard = _Guard(client.options.get("timeout_ms"), cancel)
    state = None
    lock = client.lock(conversation_id) if conversation_id is not None else nullcontext()
    try:
        with lock:
            if history is not None:
                loaded = history
            else:
                loaded = (
                    client.store["get"](conversation_id) if conversation_id is not None else None
                )
            state = start_state(client, prompt, loaded)
            tk = run_toolkit(client, toolkit, conversation_id)
            flow = loop.run_flow(flow_config(client, streaming), state, tk)
            state = yield from _perform(client, flow, guard, streaming)
            result = loop.result(state, client.model)
            # The one exit point: an exchange is saved whole, or (on error) not at all.
            logged = conversation_id is not None and save_exchange(
                client, conversation_id, state["messages"], prompt, result, asked_at
            )
    except BaseException as e:
        run_metric(client, None, time.perf_counter() - t0, e)
        raise
    run_metric(client, state, time.perf_counter() - t0)
    if not logged:
        record_log(client, conversation_id, prompt, result, asked_at)
    return result


def _exhaust(events: Iterator) -> Any:
    while True:
        try:
            next(events)
        except StopIteration as stop:
            return stop.value


def run(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    cancel: threading.Event | None = None,
) -> PMap:
    """Run the tool-calling loop for `prompt`; return the RunResult map.

    With `conversation_id`, the store's transcript is loaded first (unless `history`
    is given, which wins) and the final transcript saved after every normal exit
    (done, max_turns, pending), under the client's per-conversation lock. A raised
    error (provider failure, hook, timeout, cancel) saves nothing: the stored
    transcript stays as it was. Without an id the store is never touched.
    """
    return _exhaust(_exchange(client, prompt, toolkit, history, conversation_id, cancel, False))


def stream(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[PMap]:
    """Yield the run's events as they happen, ending with {"type": "done", "result"}.

    Events: text {delta}, tool_call {id, name, args}, tool_result {id, name, output,
    is_error}, usage {usage}, pending {request}, done {result} (what `run` returns).
    With `conversation_id` the transcript is loaded before the first event and saved
    just before `done`. If the consumer stops early, or an error ends the stream,
    nothing is saved: the stored transcript stays as it was before the call (an
    exchange is saved whole or not at all), and the conversation lock is released.
    """
    result = yield from _exchange(client, prompt, toolkit, history, conversation_id, cancel, True)
    yield pmap({"type": "done", "result": result})


def ask(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    id: str | None = None,
    on_text: Callable[[str], Any] | None = None,
) -> PMap:
    """Return `run(client, prompt, toolkit=toolkit, conversation_id=id)`.

    With `on_text`, the answer is streamed and each text delta passed to it.
    """
    if on_text is None:
        return run(client, prompt, toolkit=toolkit, conversation_id=id)
    for event in stream(client, prompt, toolkit=toolkit, conversation_id=id):
        if event["type"] == "text":
            on_text(event["delta"])
        elif event["type"] == "done":
            return event["result"]
    raise RuntimeError("stream ended without a done event")  # pragma: no cover


def conversation(client: Client, *, toolkit: PMap | None = None) -> dict:
    """Return {"send", "messages", "reset"} closures keeping history in process (no store)."""
    messages = [freeze_transcript(None)]

    def send(prompt: str) -> PMap:
        r = run(client, prompt, toolkit=toolkit, history=messages[0])
        messages[0] = r["messages"]
        return r

    def reset() -> None:
        messages[0] = freeze_transcript(None)

    return {"send": send, "messages": lambda: messages[0], "reset": reset}


def _store_lock(store: Mapping | None) -> Callable | None:
    """Return the lock a store pairs itself with (its "lock" key), if it has one."""
    lock = store.get("lock") if store is not None else None
    return lock if callable(lock) else None
