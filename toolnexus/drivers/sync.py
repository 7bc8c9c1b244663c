"""The sync driver: a table of blocking effect handlers for `core.flow`, streaming or not.

No exchange logic lives here (that is the flow's); only how each effect is performed on
the calling thread, within the run's deadline and cancel token. A deadline or cancel
ends the run within about POLL_S of it, also while a tool runs or a stream stalls: the
run stops waiting and the worker thread doing that I/O is abandoned (it finishes, or
fails, on its own; its result is dropped).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import GeneratorType
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import ProviderError, RunCancelledError
from ..core.frozen import FrozenMap, thaw
from ..core.secrets import scrub_value
from ..core.toolkit import execute as execute_tool
from ..core.wire.generated import parse_generated
from ..core.wire.sse import hold_half
from .guard import Guard
from .transport import TURN, send, send_stream

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = [
    "Context", "drive", "handlers", "plain_handlers", "StreamClosed", "resolve", "POLL_S", "rng",
]  # fmt: skip

POLL_S = 0.02  # how often a blocked wait looks at the deadline and the cancel token
logger = logging.getLogger("toolnexus")
rng = random.random  # the backoff's jitter source, handed to the pure core


class StreamClosed(RunCancelledError):
    """The consumer closed the stream before its end: nothing is saved."""


class Context(NamedTuple):
    """What a run's handlers need from its client: built once per client (plan.py)."""

    endpoint: Any  # transport.Endpoint, or None for an in-process model
    given: Any  # transport.Given: the host's httpx clients, or None for the runtime's own
    proxy: Any  # the proxy of the runtime's own clients (None: the environment's)
    generate: Callable | None  # the in-process model
    runtime: Any  # the client's Runtime
    emit: Callable[[Mapping], None]  # a metric event -> the sink and on_metric
    read_timeout: float  # seconds between bytes of an answer
    inline_tools: bool  # tool_executor="inline": a turn's calls run one after another here
    key: Callable[[str], str] = str  # the store's tenant scope: a conversation id's key

    def http(self) -> Any:
        """Return the sync transport.Http of this run (the host's, else the runtime's)."""
        if self.given is None:
            return self.runtime.http(self.proxy)
        if self.given.sync is None:
            raise TypeError(
                "this client's HTTP client or transport is async-only: use arun, aask or "
                "astream, or pass http_client=(httpx.Client(...), httpx.AsyncClient(...))"
            )
        return self.given.sync


def resolve(value: Any) -> Any:
    """Return `value`, or the result of running it when it is awaitable (an async hook)."""
    if not hasattr(value, "__await__"):
        return value
    import asyncio

    async def wait() -> Any:
        return await value

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    # A loop runs in this thread (a notebook): run the coroutine on a loop of its own.
    box: list = []
    t = threading.Thread(target=lambda: box.append(_outcome(lambda: asyncio.run(wait()))))
    t.start()
    t.join()
    return _value(box[0])


def _outcome(fn: Callable[[], Any]) -> tuple:
    try:
        return ("ok", fn())
    except BaseException as e:  # handed back to the flow, which decides
        return ("error", e)


def _value(outcome: tuple) -> Any:
    if outcome[0] == "error":
        raise outcome[1]
    return outcome[1]


def run_ops(ops: Sequence) -> tuple:
    """Run an "io" effect's ops in order; after an error only `always` ops run."""
    out, failed = [], False
    for op in ops:
        if failed and not op.always:
            out.append(("skipped",))
            continue
        outcome = _outcome(lambda op=op: resolve(op.fn(*op.args)))
        failed = failed or outcome[0] == "error"
        out.append(outcome)
    return tuple(out)


def _run_tool(tk: Any, call: Mapping) -> tuple[FrozenMap, float]:
    t0 = time.perf_counter()
    result = resolve(execute_tool(tk, call["name"], call["args"]))
    return result, time.perf_counter() - t0


def whole_delta(item: Mapping, held: str) -> tuple[Mapping | None, str]:
    """Return a stream item to hand on (None: nothing yet) and the half character held
    back: a text delta never ends in the first half of an emoji split across deltas."""
    if item.get("type") != "text":
        return item, held
    delta = item.get("delta")
    if not isinstance(delta, str) or (not held and delta.isascii()):
        return item, held  # no half character in it, none held: the usual delta
    text, held = hold_half(held, delta)
    if text == delta:
        return item, held
    return (FrozenMap({**item, "delta": text}) if text else None), held


def finish_tools(ctx: Context, calls: Sequence[Mapping], ran: list) -> list:
    """Return the [(result, seconds)] of a turn's calls with the client's secrets scrubbed
    from each result (a tool's error may quote the API key: the model, the RunResult, the
    stored transcript and the log below all see only the scrubbed copy); log tracebacks."""
    ep = ctx.endpoint
    scrub = ep.scrub if ep is not None and ep.hides else None  # no key: nothing to mask
    out = []
    for call, (result, seconds) in zip(calls, ran, strict=True):
        if scrub is not None:
            result = scrub_value(result, scrub)
        # A FrozenMap (tool_result's) is told by its type: no ABC look per result.
        is_map = type(result) is FrozenMap or isinstance(result, Mapping)
        meta = result.get("metadata") if is_map else None
        is_map = type(meta) is FrozenMap or isinstance(meta, Mapping)
        tb = meta.get("traceback") if is_map else None
        if tb:
            logger.debug("tool %r raised:\n%s", call["name"], tb)
        out.append((result, seconds))
    return out


def overlap(helpers: Any, tk: Any, calls: Sequence[Mapping]) -> list[tuple[FrozenMap, float]]:
    """Run calls at once: the first on this thread while the others are offered to
    `helpers` (drivers.helpers); return [(result, seconds)] in call order.

    Every call overlaps the others; one no helper has taken by the time this thread is
    free is taken back and run here (nothing was waiting on it).
    """
    offers = [helpers.offer(_run_tool, tk, c) for c in calls[1:]]
    ran = [_run_tool(tk, calls[0])]
    for call, offer in zip(calls[1:], offers, strict=True):
        ran.append(_run_tool(tk, call) if offer.take() else offer.result())
    return ran


def _generated(ctx: Context, request: Mapping) -> FrozenMap:
    body = request["body"]
    out = ctx.generate({"model": body["model"], "messages": thaw(body["messages"]),
                        "tools": body.get("tools", [])})  # fmt: skip
    return parse_generated(resolve(out), request["turn"])


class _Sync:
    """The blocking handlers of one run (see `handlers`)."""

    def __init__(self, ctx: Context, guard: Guard, streaming: bool):
        self.ctx, self.guard, self.streaming = ctx, guard, streaming
        # Without a deadline or cancel nothing needs abandoning: work runs on this thread.
        self.watched = guard.deadline is not None or guard.cancel is not None

    def wait(self, future: Future) -> Any:
        """Return a future's result, abandoning it on deadline or cancel."""
        while True:
            self.guard.check()
            try:
                return future.result(timeout=min(POLL_S, self.guard.remaining(POLL_S)))
            except TimeoutError:
                continue

    def llm(self, request: Mapping) -> Any:
        self.guard.check()
        ctx = self.ctx
        if ctx.endpoint is None:
            turn = self._blocking(_generated, ctx, request)
            if self.streaming and turn["text"]:
                yield FrozenMap({"type": "text", "delta": turn["text"]})
            return turn
        http = ctx.http()
        timeout = self.guard.remaining(ctx.read_timeout) or ctx.read_timeout
        timeout = min(timeout, ctx.read_timeout)
        if not self.streaming:
            try:
                return self._blocking(send, http, ctx.endpoint, request["content"], timeout)
            except ProviderError:
                self.guard.after_failure()  # a timeout the deadline caused is an abort
                raise
        streamed, held = False, ""
        try:
            for item in self._items(http, request["content"], timeout):
                kind = item["type"]
                if kind == TURN:
                    return item["turn"]
                if kind == "text":  # the only kind a half character can end
                    item, held = whole_delta(item, held)
                if item is None:
                    continue
                streamed = True
                yield item
        except ProviderError as e:
            self.guard.after_failure()
            e.streamed = streamed  # text reached the consumer: the flow will not retry
            raise
        raise ProviderError("the stream ended without a turn", url=ctx.endpoint.url)

    def _blocking(self, fn: Callable, *args: Any) -> Any:
        if not self.watched:
            return fn(*args)
        return self.wait(self.ctx.runtime.tool_pool().submit(fn, *args))

    def _items(self, http: Any, content: bytes, timeout: float) -> Iterator[FrozenMap]:
        ctx = self.ctx
        items = send_stream(http, ctx.endpoint, content, timeout, self.guard.check)
        # Unwatched, the items are the stream's own: no generator layer in between.
        return self._watched(items) if self.watched else items

    def _watched(self, items: Iterator[FrozenMap]) -> Iterator[FrozenMap]:
        # A reader thread, so a stalled stream cannot hold the run past its deadline.
        import queue  # only a watched stream needs it

        box: queue.SimpleQueue = queue.SimpleQueue()
        done = object()

        def read() -> None:
            try:
                for item in items:
                    box.put(("ok", item))
                box.put(("ok", done))
            except BaseException as e:
                box.put(("error", e))

        threading.Thread(target=read, name="toolnexus-stream", daemon=True).start()
        while True:
            self.guard.check()
            try:
                outcome = box.get(timeout=min(POLL_S, self.guard.remaining(POLL_S)))
            except queue.Empty:
                continue
            item = _value(outcome)
            if item is done:
                return
            yield item

    def tools(self, tk: Any, calls: Sequence[Mapping]) -> list:
        return finish_tools(self.ctx, calls, self._tools(tk, calls))

    def _tools(self, tk: Any, calls: Sequence[Mapping]) -> list:
        self.guard.check()
        if self.ctx.inline_tools:
            return [_run_tool(tk, c) for c in calls]
        if self.watched:
            pool = self.ctx.runtime.tool_pool()
            futures = [pool.submit(_run_tool, tk, c) for c in calls]
            return [self.wait(f) for f in futures]
        if len(calls) == 1:
            return [_run_tool(tk, calls[0])]  # nothing to overlap with
        return overlap(self.ctx.runtime.tool_helpers(), tk, calls)

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while True:
            self.guard.check()
            left = min(end - time.monotonic(), self.guard.remaining(POLL_S))
            if left <= 0:
                return
            # An Event wait wakes at once on cancel; a plain sleep would not.
            (self.guard.cancel or threading.Event()).wait(min(left, POLL_S))

    def hook(self, fn: Callable, arg: Any) -> Any:
        return resolve(fn(arg))


def _warn(text: str) -> None:
    warnings.warn(text, RuntimeWarning, stacklevel=2)


def plain_handlers(ctx: Context, guard: Guard) -> dict[str, Callable]:
    """Return the handlers both drivers perform the same way (no waiting involved)."""
    return {
        "clock": time.perf_counter,
        "now": lambda: datetime.now(UTC),
        "wallclock": time.time,
        "remaining": guard.remaining,
        "metric": ctx.emit,
        "warn": _warn,
        # The runtime's memos are keyed in the store's tenant scope (shared by set()).
        "recall": lambda cid: ctx.runtime.recall(ctx.key(cid)),
        "remember": lambda cid, memo: ctx.runtime.remember(ctx.key(cid), memo),
    }


def handlers(ctx: Context, guard: Guard, streaming: bool) -> dict[str, Callable]:
    """Return the effect table of one sync run (a handler may be a generator: it streams)."""
    run = _Sync(ctx, guard, streaming)
    return {
        **plain_handlers(ctx, guard),
        "io": run_ops,
        "hook": run.hook,
        "llm": run.llm,
        "tools": run.tools,
        "sleep": run.sleep,
        "event": None,  # yielded by drive itself: no generator per event
    }


def drive(flow: Generator, table: Mapping[str, Callable]) -> Generator:
    """Perform the flow's effects with `table`; yield stream events; return its result.

    When the consumer closes the stream, StreamClosed is thrown into the flow, and what
    it still asks for (release, log, metric) is performed without yielding.
    """
    value, error, closing = None, None, False
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value
        except StreamClosed:
            if closing:
                return None
            raise
        value, error = None, None
        kind = effect[0]
        try:
            if kind == "event":  # a stream event: handed to the consumer as it is
                if not closing:
                    yield effect[1]
                continue
            out = table[kind](*effect[1:])
            if type(out) is GeneratorType:  # a streaming handler (cheaper than an ABC check)
                if closing:
                    out.close()
                    out = None
                else:
                    out = yield from out
            value = out
        except GeneratorExit:
            closing, error = True, StreamClosed("the stream was closed before its end")
        except BaseException as e:  # thrown into the flow, which decides
            error = e
