"""The async driver: arun, aask, astream over httpx's async transport, same pure core.

Effects of `loop.run_flow` are performed with awaits: tools and store functions may
be plain or `async def` (plain ones run in a worker thread, so a slow one never
blocks the event loop); a turn's tool calls run concurrently.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple

import httpx
from pyrsistent import PMap, pmap

from ..core import flow as loop
from ..client import (
    Client,
    check_run,
    execute_calls,
    flow_config,
    in_process_request,
    logged_save,
    metric_emitter,
    record_log,
    run_metric,
    run_toolkit,
    save_exchange,
    start_state,
)
from ..core.errors import ProviderError, RunTimeoutError
from .guard import Guard
from ..core.toolkit import execute as execute_tool
from .transport import TURN, asend, asend_stream, default_async_transport
from ..core.wire import openai as openai_wire

__all__ = ["arun", "aask", "astream"]


async def _call(fn: Callable, *args: Any) -> Any:
    """Await `fn(*args)`: coroutine functions directly, plain ones in a worker thread."""
    if asyncio.iscoroutinefunction(fn):
        return await fn(*args)
    out = await asyncio.to_thread(fn, *args)
    return await out if hasattr(out, "__await__") else out


class _Guard(Guard):
    """The run's deadline and cancel token (an asyncio.Event), with an abandoning await."""

    async def run(self, awaitable: Any) -> Any:
        """Await `awaitable`, abandoning (cancelling) it on deadline or cancel."""
        self.check()
        if self.deadline is None and self.cancel is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        waiters = {task}
        cancel_wait = asyncio.ensure_future(self.cancel.wait()) if self.cancel else None
        if cancel_wait is not None:
            waiters.add(cancel_wait)
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=self.remaining(), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if cancel_wait is not None:
                cancel_wait.cancel()
        if task in done:
            return task.result()
        task.cancel()
        self.check()
        raise RunTimeoutError("the run's deadline (timeout_ms) passed")


def _enter_then(lock: Any, then: Callable[[], Any] | None) -> Any:
    """Take the lock, then run `then` (the load) in the same thread; release if it fails."""
    lock.__enter__()
    if then is None:
        return None
    try:
        return then()
    except BaseException:
        lock.__exit__(None, None, None)
        raise


async def _acquire(client: Client, lock: Any, then: Callable[[], Any] | None = None) -> Any:
    """Take a blocking conversation lock off the event loop, never leaking it; return `then()`.

    Waiters block threads of the client's own lock pool, not the loop's default pool,
    so the holder can always get a thread to save and release. `then` (a plain store
    load) runs in the same thread once the lock is held: one hand-off, not two. If this
    task is cancelled while a thread is still waiting, the lock is released once taken.
    """
    taking = asyncio.get_running_loop().run_in_executor(client.lock_pool, _enter_then, lock, then)
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:

        def release_if_taken(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is None:
                client.lock_pool.submit(lock.__exit__, None, None, None)

        taking.add_done_callback(release_if_taken)
        raise


class _Released(NamedTuple):
    """What the save-and-release hand-off did after the release."""

    at: float  # perf_counter when the lock was released (the run's end, for its metric)
    logged: bool  # whether the message log was written (or tried) in the hand-off
    error: BaseException | None  # what `after` raised: re-raised after the run's metric


def _then_exit(lock: Any, then: Callable[[], Any], after: Callable[[], Any] | None) -> Any:
    """Run `then` (the save), release the lock, then `after` (the log), in one thread.

    A `then` that returns an awaitable keeps the lock: the caller awaits it, then releases.
    """
    try:
        out = then()
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    if hasattr(out, "__await__"):  # a plain function that returned a coroutine
        return out  # still locked: the caller awaits it, then releases
    lock.__exit__(None, None, None)
    at = time.perf_counter()
    if out is True:  # save_exchange wrote the log with the save
        return _Released(at, True, None)
    if after is None:
        return _Released(at, False, None)
    try:
        after()
    except Exception as e:  # a strict log's failure: raised once the run is accounted for
        return _Released(at, True, e)
    return _Released(at, True, None)


async def _save_and_release(
    client: Client, lock: Any, save: Callable[[], Any], after: Callable[[], Any] | None = None
) -> _Released:
    """Save, release the lock, then run `after`: one hand-off that a cancellation cannot split."""
    run = asyncio.get_running_loop().run_in_executor
    out = await asyncio.shield(run(client.lock_pool, _then_exit, lock, save, after))
    if isinstance(out, _Released):
        return out
    try:
        await out
    finally:
        await _release(client, lock)
    return _Released(time.perf_counter(), False, None)


async def _release(client: Client, lock: Any) -> None:
    """Release a conversation lock; a cancellation cannot interrupt it halfway."""
    releasing = asyncio.get_running_loop().run_in_executor(
        client.lock_pool, lock.__exit__, None, None, None
    )
    await asyncio.shield(releasing)


def _atransport(client: Client) -> httpx.AsyncBaseTransport:
    """Return the client's async transport for the running event loop (pooled per loop)."""
    given = client.transport  # a transport serving both drivers (e.g. MockTransport)
    if hasattr(given, "handle_async_request"):
        return given
    loop_ = asyncio.get_running_loop()
    transport = client.atransports.get(loop_)
    if transport is None:
        # Connections belong to one event loop, so each loop gets its own pool.
        for old in [k for k in client.atransports if k.is_closed()]:
            del client.atransports[old]
        transport = client.atransports[loop_] = default_async_transport()
    return transport


async def _llm(client: Client, body: Mapping, turn_no: int, guard: _Guard, streaming: bool):
    """Yield text events (when streaming), then {TURN} with the decoded turn."""
    if client.endpoint is None:
        out = await guard.run(_call(client.generate, in_process_request(body)))
        turn = openai_wire.parse_generated(out, turn_no)
        if streaming and turn["text"]:
            yield pmap({"type": "text", "delta": turn["text"]})
        yield pmap({"type": TURN, "turn": turn})
        return
    transport = _atransport(client)
    if not streaming:
        turn = await guard.run(asend(transport, client.endpoint, body, guard.remaining(600.0)))
        yield pmap({"type": TURN, "turn": turn})
        return
    items = asend_stream(transport, client.endpoint, body, guard.remaining(600.0))
    try:
        while True:
            try:
                item = await guard.run(items.__anext__())
            except StopAsyncIteration:
                url = client.endpoint.url
                raise ProviderError("the stream ended without a turn", url=url) from None
            yield item
            if item["type"] == TURN:
                return
    finally:
        await items.aclose()


def _is_async(tk: Any, call: Mapping) -> bool:
    t = tk["index"].get(call["name"]) if tk else None
    return t is not None and asyncio.iscoroutinefunction(t["execute"])


async def _run_async_tool(tk: Any, call: Mapping) -> tuple[PMap, float]:
    t0 = time.perf_counter()
    r = await execute_tool(tk, call["name"], call["args"])
    return r, time.perf_counter() - t0


async def _run_calls(client: Client, tk: Any, calls: Sequence[Mapping]) -> list:
    """Run a turn's calls concurrently; return [(result, seconds)] in call order.

    `async def` tools run on the event loop; plain ones go to a worker thread together
    (one hop for the lot, where they run concurrently as in the sync driver), so a
    slow plain tool never blocks the loop. Not even a tool known to be quick runs on
    the loop: one that blocked after all would stall every task of the loop, not just
    this run (the sync driver takes that chance; see client.is_quick).
    """
    asynchronous = [_is_async(tk, c) for c in calls]
    plain = [c for c, a in zip(calls, asynchronous, strict=True) if not a]
    jobs = [_run_async_tool(tk, c) for c, a in zip(calls, asynchronous, strict=True) if a]
    if plain:
        jobs.append(asyncio.to_thread(execute_calls, client, tk, plain))
    done = await asyncio.gather(*jobs) if len(jobs) > 1 else [await jobs[0]]
    plain_results = iter(done.pop() if plain else ())
    async_results = iter(done)
    return [next(async_results) if a else next(plain_results) for a in asynchronous]


async def _perform(client: Client, flow: Any, guard: _Guard, streaming: bool):
    """Do the effects `flow` asks for; yield stream events, then {"final": state}."""
    value, error = None, None
    emit = metric_emitter(client)
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            yield pmap({"type": "__final__", "state": stop.value})
            return
        value, error = None, None
        kind = effect[0]
        if kind == "clock":
            value = time.perf_counter()
        elif kind == "llm":
            streamed = False
            try:
                async for item in _llm(client, effect[1], effect[2], guard, streaming):
                    if item["type"] == TURN:
                        value = item["turn"]
                    else:
                        streamed = True
                        yield item
            except ProviderError as e:
                if streamed:  # text already reached the consumer: a retry would repeat it
                    raise
                error = e  # thrown into the flow, which decides to retry or fail
        elif kind == "tools":
            value = await guard.run(_run_calls(client, effect[1], effect[2]))
        elif kind == "event":
            yield effect[1]
        elif kind == "metric":
            emit(effect[1])
        elif kind == "sleep":
            await guard.run(asyncio.sleep(effect[1]))
        elif kind == "wait_for":
            value = await guard.run(_call(client.options["wait_for"], effect[1]))
        else:  # pragma: no cover - a new effect without a performer is our bug
            raise RuntimeError(f"unknown effect {kind!r}")


async def _exchange(
    client: Client,
    prompt: str,
    toolkit: Any,
    history: Sequence | None,
    conversation_id: str | None,
    cancel: Any,
    streaming: bool,
) -> AsyncIterator[PMap]:
    """One exchange: lock, load, run the flow, finish; yields events, then done."""
    check_run(prompt, conversation_id)
    asked_at, t0 = datetime.now(UTC), time.perf_counter()
    guard = _Guard(client.options.get("timeout_ms"), cancel)
    lock = client.lock(conversation_id) if conversation_id is not None else None
    get = client.store["get"] if history is None and conversation_id is not None else None
    # Plain store functions run in the lock's own hand-offs: take+load, save+release.
    load_locked = lock is not None and get is not None and not asyncio.iscoroutinefunction(get)
    state, locked, released = None, False, None
    has_log = client.options.get("message_log") is not None
    try:
        if lock is not None:
            load = partial(get, conversation_id) if load_locked else None
            got = await _acquire(client, lock, load)
            locked = True
        try:
            loaded = history
            if get is not None:
                loaded = got if load_locked else await _call(get, conversation_id)
                if hasattr(loaded, "__await__"):
                    loaded = await loaded
            state = start_state(client, prompt, loaded)
            tk = run_toolkit(client, toolkit, conversation_id)
            flow = loop.run_flow(flow_config(client, streaming), state, tk)
            async for item in _perform(client, flow, guard, streaming):
                if item["type"] == "__final__":
                    state = item["state"]
                else:
                    yield item
            # The one exit point: an exchange is saved whole, or (on error) not at all.
            if conversation_id is not None:
                save = client.store["save"]
                if lock is not None and not asyncio.iscoroutinefunction(save):
                    locked = False  # released by the hand-off, even if the save fails
                    # The log is written in the same hand-off, after the release (as the
                    # sync driver writes it): one thread hop fewer per exchange.
                    result = loop.result(state, client.model)
                    log = partial(record_log, client, conversation_id, prompt, result, asked_at)
                    messages = state["messages"]
                    if logged_save(client) is not None:  # the log may go in the save itself
                        args = (client, conversation_id, messages, prompt, result, asked_at)
                        saving = partial(save_exchange, *args)
                    else:
                        saving = partial(save, conversation_id, messages)
                    after = log if has_log else None
                    released = await _save_and_release(client, lock, saving, after)
                else:
                    await _call(save, conversation_id, state["messages"])
        finally:
            if locked:
                await _release(client, lock)
        if released is None:
            result = loop.result(state, client.model)
    except BaseException as e:
        run_metric(client, None, time.perf_counter() - t0, e)
        raise
    end = released.at if released is not None else time.perf_counter()
    run_metric(client, state, end - t0)
    if released is not None and released.error is not None:
        raise released.error
    if has_log and (released is None or not released.logged):  # no hand-off without a log
        await asyncio.to_thread(record_log, client, conversation_id, prompt, result, asked_at)
    yield pmap({"type": "done", "result": result})


async def arun(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    cancel: asyncio.Event | None = None,
) -> PMap:
    """The async twin of `run` (same semantics; `cancel` is an asyncio.Event)."""
    events = _exchange(client, prompt, toolkit, history, conversation_id, cancel, False)
    async for event in events:
        if event["type"] == "done":
            return event["result"]
    raise RuntimeError("run ended without a result")  # pragma: no cover


async def astream(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    cancel: asyncio.Event | None = None,
) -> AsyncIterator[PMap]:
    """The async twin of `stream`: an async generator of the same events."""
    events = _exchange(client, prompt, toolkit, history, conversation_id, cancel, True)
    try:
        async for event in events:
            yield event
    finally:
        await events.aclose()


async def aask(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    id: str | None = None,
    on_text: Callable[[str], Any] | None = None,
) -> PMap:
    """The async twin of `ask` (`on_text` may be plain or async)."""
    if on_text is None:
        return await arun(client, prompt, toolkit=toolkit, conversation_id=id)
    async for event in astream(client, prompt, toolkit=toolkit, conversation_id=id):
        if event["type"] == "text":
            out = on_text(event["delta"])
            if hasattr(out, "__await__"):
                await out
        elif event["type"] == "done":
            return event["result"]
    raise RuntimeError("stream ended without a done event")  # pragma: no cover
