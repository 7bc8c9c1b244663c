"""The async driver: a table of awaiting effect handlers for `core.flow`, streaming or not.

Tools, hooks, stores, locks and logs may be plain or `async def`: coroutine functions are
awaited on the event loop; plain store, lock and log calls run in the runtime's io pool
(an "io" effect's ops in one hand-off), plain tools in its tool helper threads (its tool
pool beside async ones), so nothing slow blocks the loop. An "io" effect is never split
by a cancellation: the driver lets it finish, hands its outcomes to the flow (which then
knows whether it holds the lock), and delivers the cancellation at the next effect.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Mapping, Sequence
from types import AsyncGeneratorType, FunctionType
from typing import Any

from ..core.errors import ProviderError, RunTimeoutError
from ..core.frozen import FrozenMap, thaw
from ..core.toolkit import execute as execute_tool
from ..core.wire.generated import parse_generated
from .guard import Guard
from .sync import (
    Context,
    StreamClosed,
    _run_tool,
    finish_tools,
    plain_handlers,
    run_ops,
    whole_delta,
)
from .transport import LARGE_ASYNC_BODY, TURN, asend, asend_stream, send, send_stream

__all__ = ["adrive", "ahandlers"]


def _is_async(fn: Any) -> bool:
    if type(fn) is FunctionType and "_is_coroutine_marker" not in fn.__dict__:
        # A plain `def` or `async def` (what a tool's execute is): its code says which, and
        # its __call__ is a method-wrapper. inspect's walk is ten calls a tool.
        return bool(fn.__code__.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    )


async def _settle(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


async def threaded(pool: Any, items: Iterator) -> AsyncGenerator:
    """Yield a blocking iterator's items, each `next` run in `pool` (off the loop); closed
    in the pool too when the consumer stops early (after a read still under way ends)."""
    done, pending = object(), None
    try:
        while True:
            pending = pool.submit(next, items, done)
            item = await asyncio.wrap_future(pending)
            if item is done:
                return
            yield item
    finally:
        if pending is not None and not pending.done():  # abandoned mid-read: close after it
            pending.add_done_callback(lambda _: pool.submit(items.close))
        else:
            await asyncio.get_running_loop().run_in_executor(pool, items.close)


def _in_helpers(helpers: Any, tk: Any, calls: Sequence[Mapping]) -> asyncio.Future:
    """Return a future of a turn's [(result, seconds)]: each plain call offered to a helper
    thread at once (never run on the loop); the loop is woken once, when the last call
    ends (or at the first that raises)."""
    # One future for the turn instead of an executor future, its asyncio twin and a
    # gather per call: a third of the instructions the hand-off cost, and one wake-up.
    loop = asyncio.get_running_loop()
    turn = loop.create_future()
    ran: list = [None] * len(calls)
    left = list(range(len(calls)))  # each call pops one: the call that pops 0 ends last
    for i, call in enumerate(calls):
        helpers.offer(_run_in_helper, loop, turn, ran, left, i, tk, call)
    return turn


def _run_in_helper(loop: Any, turn: asyncio.Future, ran: list, left: list, i: int, tk: Any,
                   call: Mapping) -> None:  # fmt: skip
    # A turn abandoned before its call started (deadline, cancel) does not start it, as a
    # cancelled executor future would not run. A closed loop raises here: nobody waits.
    if turn.cancelled():
        return
    try:
        ran[i] = _run_tool(tk, call)
    except BaseException as e:  # the run's to handle, as it was an executor future's
        loop.call_soon_threadsafe(_fail, turn, e)
        return
    if left.pop() == 0:  # list.pop is atomic: exactly one call sees the last index
        loop.call_soon_threadsafe(_finish, turn, ran)


class _Finishing(asyncio.Future):
    """A future a cancel does not interrupt: a task cancelled while awaiting it is
    cancelled when it is done (what asyncio.shield gives, without its second future)."""

    def cancel(self, msg: Any = None) -> bool:
        return False


def _in_thread(pool: Any, fn: Callable, *args: Any) -> _Finishing:
    """Return a future of fn(*args) run in `pool` that a cancel does not interrupt; the loop
    is woken once, when it ends (no executor future and asyncio twin chained)."""
    loop = asyncio.get_running_loop()
    done = _Finishing(loop=loop)
    pool.submit(_run_in_thread, loop, done, fn, args)
    return done


def _run_in_thread(loop: Any, done: asyncio.Future, fn: Callable, args: tuple) -> None:
    try:
        value = fn(*args)
    except BaseException as e:  # the run's to handle
        loop.call_soon_threadsafe(_fail, done, e)
        return
    loop.call_soon_threadsafe(_finish, done, value)


def _finish(future: asyncio.Future, value: Any) -> None:
    if not future.done():  # a turn cancelled meanwhile: the result is dropped
        future.set_result(value)


def _fail(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():  # another call of the turn failed first, or it was cancelled
        future.set_exception(error)


def _given_http(ctx: Context, size: int) -> Any:
    """Return the transport.Http a request of `size` bytes goes through, or None for the
    runtime's own async client of the running loop (`await ctx.runtime.ahttp(...)`)."""
    given = ctx.given
    if given is not None:
        return given.asynchronous or given.sync
    if size >= LARGE_ASYNC_BODY:  # sent from an io thread (see LARGE_ASYNC_BODY)
        return ctx.runtime.http(ctx.proxy)
    return None


def _async_tool(tk: Any, call: Mapping) -> bool:
    t = tk["index"].get(call["name"]) if tk else None
    return t is not None and _is_async(t["execute"])


class _Async:
    """The awaiting handlers of one run (see `ahandlers`)."""

    def __init__(self, ctx: Context, guard: Guard):
        self.ctx, self.guard = ctx, guard
        self.cancelled: BaseException | None = None  # delivered at the next effect
        # Without a deadline or cancel token nothing is abandoned: work is awaited as it is.
        self.watched = guard.deadline is not None or guard.cancel is not None

    async def guarded(self, awaitable: Any) -> Any:
        """Await `awaitable`, abandoning (cancelling) it on deadline or cancel."""
        guard = self.guard
        guard.check()
        if guard.deadline is None and guard.cancel is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        waiters = {task}
        cancel_wait = asyncio.ensure_future(guard.cancel.wait()) if guard.cancel else None
        if cancel_wait is not None:
            waiters.add(cancel_wait)
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=guard.remaining(), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if cancel_wait is not None:
                cancel_wait.cancel()
        if task in done:
            return task.result()
        task.cancel()
        # Let the abandoned work finish cancelling before going on: a stream's read still
        # running when the stream is closed makes the close fail ("already running").
        await asyncio.wait({task})
        guard.check()
        raise RunTimeoutError("the run's deadline (timeout_ms) passed")

    async def answer(self, request: Mapping) -> Any:
        """Return a whole turn (the "llm" handler of a run that does not stream): a
        coroutine, no async generator to make, step and close for its one item."""
        ctx = self.ctx
        if ctx.endpoint is None:
            return parse_generated(await self.guarded(self._generate(request)), request["turn"])
        timeout = min(self.guard.remaining(ctx.read_timeout) or ctx.read_timeout, ctx.read_timeout)
        content = request["content"]
        http = _given_http(ctx, len(content)) or await ctx.runtime.ahttp(ctx.proxy)
        if http.asynchronous:
            work = asend(http, ctx.endpoint, content, timeout)
        else:  # the host gave a sync client only: it serves this run from an io thread
            pool = ctx.runtime.io_pool()
            work = asyncio.get_running_loop().run_in_executor(
                pool, send, http, ctx.endpoint, content, timeout
            )
        try:
            return await (self.guarded(work) if self.watched else work)
        except ProviderError:
            # A request that failed because the deadline passed (its read timeout is the
            # time left) is the run's timeout, as in the sync driver.
            self.guard.after_failure()
            raise

    async def io(self, ops: Sequence) -> tuple:
        if not any(_is_async(op.fn) for op in ops):  # the usual case: one hand-off
            work = _in_thread(self.ctx.runtime.io_pool(), run_ops, ops)
            try:
                return await work
            except asyncio.CancelledError as e:  # raised once the hand-off has ended
                self.cancelled = e  # the flow must see what it did (a lock may be taken)
                return work.result()
        work = asyncio.ensure_future(self._mixed(ops))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError as e:
            # Finish the hand-off (a lock may be taken in it): the flow must see what it did.
            self.cancelled = e
            while True:
                try:
                    return await asyncio.shield(work)
                except asyncio.CancelledError:
                    continue

    async def _mixed(self, ops: Sequence) -> tuple:
        out, failed = [], False
        for op in ops:
            if failed and not op.always:
                out.append(("skipped",))
                continue
            try:
                if _is_async(op.fn):
                    value = await op.fn(*op.args)
                else:
                    pool = self.ctx.runtime.io_pool()
                    loop = asyncio.get_running_loop()
                    value = await _settle(await loop.run_in_executor(pool, op.fn, *op.args))
                out.append(("ok", value))
            except Exception as e:
                failed = True
                out.append(("error", e))
        return tuple(out)

    async def hook(self, fn: Callable, arg: Any) -> Any:
        return await _settle(fn(arg))

    async def llm(self, request: Mapping) -> Any:
        """Yield a streamed turn's items, the {TURN} item last (the "llm" handler of a
        stream)."""
        ctx = self.ctx
        if ctx.endpoint is None:
            turn = parse_generated(await self.guarded(self._generate(request)), request["turn"])
            if turn["text"]:
                yield FrozenMap({"type": "text", "delta": turn["text"]})
            yield FrozenMap({"type": TURN, "turn": turn})
            return
        timeout = min(self.guard.remaining(ctx.read_timeout) or ctx.read_timeout, ctx.read_timeout)
        content = request["content"]
        http = _given_http(ctx, len(content)) or await ctx.runtime.ahttp(ctx.proxy)
        if http.asynchronous:
            items = asend_stream(http, ctx.endpoint, content, timeout)
        else:
            blocking = send_stream(http, ctx.endpoint, content, timeout)
            items = threaded(ctx.runtime.io_pool(), blocking)
        streamed, held = False, ""
        try:
            while True:
                try:
                    item = await self.guarded(items.__anext__())
                except StopAsyncIteration:
                    url = ctx.endpoint.url
                    raise ProviderError("the stream ended without a turn", url=url) from None
                item, held = whole_delta(item, held)
                if item is None:
                    continue
                yield item
                if item["type"] == TURN:
                    return
                streamed = True
        except ProviderError as e:
            self.guard.after_failure()  # a timeout the deadline caused is an abort
            e.streamed = streamed  # text reached the consumer: the flow will not retry
            raise
        finally:
            await items.aclose()

    async def _generate(self, request: Mapping) -> Any:
        body = request["body"]
        req = {"model": body["model"], "messages": thaw(body["messages"]),
               "tools": body.get("tools", [])}  # fmt: skip
        fn = self.ctx.generate
        if _is_async(fn):
            return await fn(req)
        return await _settle(await asyncio.to_thread(fn, req))

    async def tools(self, tk: Any, calls: Sequence[Mapping]) -> list:
        if self.ctx.inline_tools or any(_async_tool(tk, c) for c in calls):
            ran = await self.guarded(self._tools(tk, calls))
        else:  # the usual turn: plain tools only, all offered to the tool helper threads
            self.guard.check()  # before any call is offered: a run already over offers none
            turn = _in_helpers(self.ctx.runtime.tool_helpers(), tk, calls)
            ran = await (self.guarded(turn) if self.watched else turn)
        return finish_tools(self.ctx, calls, ran)

    async def _tools(self, tk: Any, calls: Sequence[Mapping]) -> list:
        if self.ctx.inline_tools:
            return [await self._async_tool(tk, c) if _async_tool(tk, c) else _run_tool(tk, c)
                    for c in calls]  # fmt: skip
        # async tools on the loop, each plain one handed to the tool pool, all at once.
        loop, pool = asyncio.get_running_loop(), self.ctx.runtime.tool_pool()
        jobs = [self._async_tool(tk, c) if _async_tool(tk, c)
                else loop.run_in_executor(pool, _run_tool, tk, c) for c in calls]  # fmt: skip
        return list(await asyncio.gather(*jobs))

    async def _async_tool(self, tk: Any, call: Mapping) -> tuple[FrozenMap, float]:
        t0 = time.perf_counter()
        result = await execute_tool(tk, call["name"], call["args"])
        return result, time.perf_counter() - t0

    async def sleep(self, seconds: float) -> None:
        await self.guarded(asyncio.sleep(seconds))


def ahandlers(ctx: Context, guard: Guard, streaming: bool) -> dict[str, Callable]:
    """Return the effect table of one async run: plain functions, coroutines, or async
    generators (which stream)."""
    run = _Async(ctx, guard)
    plain = plain_handlers(ctx, guard)
    return {
        **plain,
        "io": run.io,
        "hook": run.hook,
        "llm": run.llm if streaming else run.answer,  # an async generator, or a coroutine
        "tools": run.tools,
        "sleep": run.sleep,
        "event": None,  # yielded by adrive itself
        "_run": run,
        "_plain": frozenset(plain),  # kinds whose handler is a plain function: called directly
    }


async def adrive(flow: Generator, table: Mapping[str, Any]) -> AsyncGenerator:
    """Perform the flow's effects with `table`; yield events, then {"type": "__result__"}.

    When the consumer closes the stream (or the task is cancelled), the reason is thrown
    into the flow and what it still asks for (release, log, metric) is performed.
    """
    run, plain = table["_run"], table["_plain"]
    value, error, closing = None, None, False
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            if not closing:
                yield FrozenMap({"type": "__result__", "result": stop.value})
            return
        except StreamClosed:
            if closing:
                return
            raise
        value, error = None, None
        kind = effect[0]
        try:
            if run.cancelled is not None:  # delivered after an io hand-off finished
                error, run.cancelled = run.cancelled, None
                continue
            if kind in plain:  # most effects (clock, metric): no coroutine to make and await
                value = table[kind](*effect[1:])
                continue
            if kind == "event":
                if not closing:
                    yield effect[1]
                continue
            out = table[kind](*effect[1:])
            if type(out) is not AsyncGeneratorType:  # a coroutine (a whole turn, tools, io)
                value = await out if hasattr(out, "__await__") else out
                continue
            try:  # a streamed turn: its items handed on (dropped when closing), the turn kept
                async for item in out:
                    if item["type"] == TURN:
                        value = item["turn"]
                    elif not closing:
                        yield item
            finally:
                await out.aclose()
        except GeneratorExit:
            closing, error = True, StreamClosed("the stream was closed before its end")
        except BaseException as e:  # thrown into the flow, which decides
            error = e
