"""The public verbs: run, stream, ask, conversation and their async twins.

Each builds the flow's configuration from the client's fields, then hands
`core.flow.exchange_flow` to a driver (sync, streaming, async), its intents (take,
commit, release) performed by the store calls `exchange.choose` picked: the exchange
itself is written once, in the flow.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import otel
from .client import Client
from .core.flow import exchange_flow
from .core.frozen import FrozenMap
from .core.output import output_spec
from .core.scope import scope_of
from .core.toolkit import toolkit as make_toolkit
from .core.transcript import freeze_transcript
from .core.wire.parts import check_prompt
from .drivers import sync
from .drivers.guard import Guard
from .exchange import performed
from .fallback import Fallback, Legs, chained
from .fallback import table as chain_table

# What `toolkit=` takes: toolkit(...), a list of tools (made one), or None.
ToolkitArg = FrozenMap | Sequence[Mapping[str, Any]] | None

if TYPE_CHECKING:  # the result types are for type checkers: cast() takes their names
    from .types import RunResult, StreamEvent

__all__ = ["run", "stream", "ask", "conversation", "arun", "astream", "aask", "forget",
           "forget_in"]  # fmt: skip


# ---- the run's setup, from the client's plan (see plan.py) ---------------------------


def _context(client: Client) -> sync.Context:
    # Made once with the client (plan.py). A chain's metric effects are performed by its
    # primary's handlers, whatever leg answers (fallback.table): legs only send requests.
    return client.plan["context"]


def as_toolkit(tk: Any) -> Any:
    """Return `tk` as a toolkit: a toolkit, None, or a list of tool maps (made one)."""
    if tk is None or (
        (type(tk) is FrozenMap or isinstance(tk, Mapping)) and "index" in tk and "tools" in tk
    ):
        return tk
    if isinstance(tk, Sequence) and not isinstance(tk, str | bytes):  # as ToolkitArg says
        return make_toolkit(*tk)
    raise TypeError(f"toolkit must be toolkit(...) or a list of tools, got {type(tk).__name__}")


def _toolkit(client: Client, tk: Any, conversation_id: str | None) -> Any:
    tk = as_toolkit(tk)
    if conversation_id is None or client.message_log is None or not client.lookup_tool:
        return tk  # nothing to add (no id to scope it to, no log, or turned off)
    from .history.wiring import lookup_toolkits

    log = client.message_log
    key = scope_of(client.store).key
    traced = lambda: otel.traced_log(log, client.runtime, key)  # noqa: E731
    scoper = lambda: lookup_toolkits(tk, traced())  # noqa: E731 - its search traced
    return client.runtime.lookup_toolkit(tk, log, key(conversation_id), scoper, conversation_id)


def _check_run(prompt: Any, conversation_id: Any) -> None:
    check_prompt(prompt)  # a string or a list of content parts
    if not prompt or (isinstance(prompt, str) and not prompt.strip()):
        raise ValueError("prompt is empty: there is nothing to send")  # providers reject it
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise ValueError(f"conversation_id must be a non-empty string, got {conversation_id!r}")


def _id(conversation_id: str | None, id: str | None) -> str | None:
    if id is not None and conversation_id is not None and id != conversation_id:
        raise ValueError("give id= or conversation_id= (the same thing), not both")
    return conversation_id if conversation_id is not None else id


def _cfg(client: Client, streaming: bool, output: Any) -> Mapping:
    """Return the flow configuration of one exchange of `client` (`output`: its spec)."""
    plan = client.plan  # (a client's field is a PRecord lookup: read once)
    cfg = plan[streaming]
    learned = plan["context"].runtime.omitted(cfg["omission_key"])  # what was refused before
    if learned - cfg["omitted"]:
        cfg = {**cfg, "omitted": cfg["omitted"] | learned}
    if output is not None:
        cfg = {**cfg, "output": output}
    return cfg


def _setup(client, prompt, toolkit, history, conversation_id, streaming, output_schema=None):
    """Return (flow, context) of one exchange (the contexts of a chain's clients: Legs)."""
    _check_run(prompt, conversation_id)
    output = output_spec(output_schema) if output_schema is not None else None  # checked first
    if isinstance(client, Fallback):
        cfg, ctx = chained(client, lambda c: _cfg(c, streaming, output), _context)
    else:
        cfg, ctx = _cfg(client, streaming, output), _context(client)
    tk = _toolkit(client, toolkit, conversation_id)
    flow = exchange_flow(cfg, prompt, tk, history, conversation_id)
    if conversation_id is None:  # no id, no intent (take, commit, release): no layer for them
        return flow, ctx
    return performed(flow, cfg["exchange"]), ctx


def _table(make: Callable, ctx: Any, guard: Guard, streaming: bool) -> Mapping:
    """Return the effect table of an exchange: `make`'s (the driver's), or a chain's."""
    if isinstance(ctx, Legs):
        return chain_table(make, ctx, guard, streaming)
    return make(ctx, guard, streaming)


# ---- the sync driver ------------------------------------------------------------------


def _exhaust(events: Iterator) -> Any:
    while True:
        try:
            next(events)
        except StopIteration as stop:
            return stop.value


def run(
    client: Client | Fallback,
    prompt: str | Sequence[Mapping],
    *,
    toolkit: ToolkitArg = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    id: str | None = None,
    cancel: threading.Event | None = None,
    output_schema: Any = None,
) -> RunResult:
    """Run the tool-calling loop for `prompt`; return the RunResult map.

    With `conversation_id` (or `id`), the store's transcript is loaded first (unless
    `history` is given, which wins) and the final transcript saved after every normal
    exit (done, max_turns, pending), under the conversation's lock. A raised error
    (provider failure, hook, timeout, cancel) saves nothing. Without an id the store is
    never touched. With `output_schema` (a JSON Schema dict, a dataclass or a TypedDict
    class) the answer is asked for as JSON in that shape and `result["output"]` holds it
    parsed; an answer that does not fit raises OutputError naming the field (nothing saved).
    """
    cid = _id(conversation_id, id)
    flow, ctx = _setup(client, prompt, toolkit, history, cid, False, output_schema)
    guard = Guard(client.timeout_ms, cancel)
    t = otel.exchange_trace(client, cid, False)
    table = otel.traced(_table(sync.handlers, ctx, guard, False), t, False)
    if t is None:
        return cast("RunResult", _exhaust(sync.drive(flow, table)))
    try:
        result = _exhaust(sync.drive(flow, table))
    except BaseException as e:
        t.abort(e)
        raise
    t.finish(result)
    return cast("RunResult", result)


def stream(
    client: Client | Fallback,
    prompt: str | Sequence[Mapping],
    *,
    toolkit: ToolkitArg = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    id: str | None = None,
    cancel: threading.Event | None = None,
    output_schema: Any = None,
) -> Iterator[StreamEvent]:
    """Yield the run's events as they happen, ending with {"type": "done", "result"}.

    Events: text {delta}, tool_call {id, name, args}, tool_result {id, name, output,
    is_error}, usage {usage}, pending {request}, done {result} (what `run` returns).
    A stream holds no lock while its consumer reads: the transcript is loaded at the
    start and the exchange saved just before `done`, after whatever another exchange
    saved meanwhile (both are kept). If the consumer stops early or an error ends the
    stream, nothing is saved.
    """
    cid = _id(conversation_id, id)
    flow, ctx = _setup(client, prompt, toolkit, history, cid, True, output_schema)
    guard = Guard(client.timeout_ms, cancel)
    t = otel.exchange_trace(client, cid, True)
    try:
        table = otel.traced(_table(sync.handlers, ctx, guard, True), t, False)
        result = yield from sync.drive(flow, table)
    except BaseException as e:
        if t is not None:
            t.abort(e)
        raise
    if t is not None:
        t.finish(result) if result is not None else t.abort(GeneratorExit())
    yield _done(result)


def _done(result: FrozenMap) -> StreamEvent:
    return cast("StreamEvent", FrozenMap({"type": "done", "result": result}))


def ask(
    client: Client | Fallback,
    prompt: str,
    *,
    toolkit: ToolkitArg = None,
    id: str | None = None,
    on_text: Callable[[str], Any] | None = None,
    output_schema: Any = None,
) -> RunResult:
    """Return `run(client, prompt, toolkit=toolkit, id=id, output_schema=output_schema)`.

    With `on_text`, the answer is streamed and each text delta passed to it.
    """
    if on_text is None:
        return run(client, prompt, toolkit=toolkit, id=id, output_schema=output_schema)
    for event in stream(client, prompt, toolkit=toolkit, id=id, output_schema=output_schema):
        if event["type"] == "text":
            on_text(event["delta"])
        elif event["type"] == "done":
            return event["result"]
    raise RuntimeError("stream ended without a done event")  # pragma: no cover


def conversation(client: Client | Fallback, *, toolkit: ToolkitArg = None) -> dict:
    """Return {"send", "messages", "reset"} closures keeping history in process (no store)."""
    messages = [freeze_transcript(None)]

    def send(prompt: str, output_schema: Any = None) -> RunResult:
        r = run(client, prompt, toolkit=toolkit, history=messages[0], output_schema=output_schema)
        if r["refusal"] is None or client.keep_refused:  # a refused exchange is no context
            messages[0] = r["messages"]
        return r

    def reset() -> None:
        messages[0] = freeze_transcript(None)

    return {"send": send, "messages": lambda: messages[0], "reset": reset}


# ---- the async driver -----------------------------------------------------------------


def _aevents(client, prompt, toolkit, history, cid, cancel, streaming,
             output_schema=None) -> tuple[AsyncIterator, otel.Trace | None]:  # fmt: skip
    """Return the async driver's events of one exchange and its trace (None: not traced);
    the caller finishes or aborts the trace (no async generator layer in between)."""
    from .drivers import aio

    flow, ctx = _setup(client, prompt, toolkit, history, cid, streaming, output_schema)
    guard = Guard(client.timeout_ms, cancel)
    t = otel.exchange_trace(client, cid, streaming)
    table = otel.traced(_table(aio.ahandlers, ctx, guard, streaming), t, True)
    return aio.adrive(flow, table), t


async def arun(
    client: Client | Fallback,
    prompt: str | Sequence[Mapping],
    *,
    toolkit: ToolkitArg = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    id: str | None = None,
    cancel: Any = None,
    output_schema: Any = None,
) -> RunResult:
    """The async twin of `run` (same semantics; `cancel` is an asyncio.Event)."""
    cid = _id(conversation_id, id)
    events, t = _aevents(client, prompt, toolkit, history, cid, cancel, False, output_schema)
    try:
        async for event in events:
            if event["type"] == "__result__":
                if t is not None:
                    t.finish(event["result"])
                return cast("RunResult", event["result"])
    except BaseException as e:
        if t is not None:
            t.abort(e)
        raise
    finally:
        await events.aclose()
    raise RuntimeError("run ended without a result")  # pragma: no cover


async def astream(
    client: Client | Fallback,
    prompt: str | Sequence[Mapping],
    *,
    toolkit: ToolkitArg = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
    id: str | None = None,
    cancel: Any = None,
    output_schema: Any = None,
) -> AsyncIterator[StreamEvent]:
    """The async twin of `stream`: an async generator of the same events."""
    cid = _id(conversation_id, id)
    events, t = _aevents(client, prompt, toolkit, history, cid, cancel, True, output_schema)
    try:
        async for event in events:
            if event["type"] != "__result__":
                yield cast("StreamEvent", event)
                continue
            if t is not None:  # finished when the flow is: the consumer's reading is not in it
                t, done = None, t
                done.finish(event["result"])
            yield _done(event["result"])
    except BaseException as e:
        if t is not None:
            t.abort(e)
        raise
    finally:
        await events.aclose()


async def aask(
    client: Client | Fallback,
    prompt: str,
    *,
    toolkit: ToolkitArg = None,
    id: str | None = None,
    on_text: Callable[[str], Any] | None = None,
    output_schema: Any = None,
) -> RunResult:
    """The async twin of `ask` (`on_text` may be plain or async)."""
    if on_text is None:
        return await arun(client, prompt, toolkit=toolkit, id=id, output_schema=output_schema)
    async for event in astream(client, prompt, toolkit=toolkit, id=id,
                               output_schema=output_schema):  # fmt: skip
        if event["type"] == "text":
            out = on_text(event["delta"])
            if hasattr(out, "__await__"):
                await out
        elif event["type"] == "done":
            return event["result"]
    raise RuntimeError("stream ended without a done event")  # pragma: no cover


# ---- forgetting a conversation ----------------------------------------------------------


def forget_in(store: Mapping, log: Mapping | None, conversation_id: str,
              lock: Callable | None = None) -> dict:  # fmt: skip
    """Remove a conversation from `store` (its "delete") and its entries from `log` (seen in
    the store's tenant scope, see `namespaced`), under `lock(conversation_id)` when given;
    return {"conversation_id", "log_entries"} (how many log entries went). Other
    conversations, and other tenants' entries, are not touched."""
    _check_id(conversation_id)
    delete = store.get("delete") if isinstance(store, Mapping) else None
    if not callable(delete):
        desc = store.get("desc", "this store") if isinstance(store, Mapping) else "this store"
        raise TypeError(
            f'{desc} has no "delete": it cannot forget a conversation (give the store a '
            "delete(id) function, or use one of toolnexus.store's, which all have one)"
        )
    if log is not None:
        from .history.wiring import require_log
        from .store.scoped import align_log

        # In the store's tenant scope: a namespaced store's forget clears its own entries.
        log = align_log(store, require_log(log))  # checked before anything is removed
    with lock(conversation_id) if lock is not None else _nothing():
        delete(conversation_id)
        removed = log["clear"](conversation_id=conversation_id) if log is not None else 0
    return {"conversation_id": conversation_id, "log_entries": removed}


def forget(client: Client | Fallback, conversation_id: str) -> dict:
    """Remove a conversation's transcript, its message-log entries and what the client's
    runtime derived from it (its memo, its lookup tool); return {"conversation_id",
    "log_entries"}. Taken under the conversation's lock, so no exchange saves it meanwhile.
    """
    _check_id(conversation_id)  # before any span or lock
    lock = client.plan[False]["exchange"].lock  # the one every exchange takes
    try:
        with otel.forget_span(client.store, conversation_id) as went:
            done = forget_in(client.store, client.message_log, conversation_id, lock)
            went(done["log_entries"])
        return done
    finally:  # a cache only: dropped even when the store could not delete
        client.runtime.forget(scope_of(client.store).key(conversation_id))


def _check_id(conversation_id: Any) -> None:
    if not isinstance(conversation_id, str) or not conversation_id:
        raise ValueError(f"conversation_id must be a non-empty string, got {conversation_id!r}")


def _nothing() -> Any:
    from contextlib import nullcontext

    return nullcontext()
