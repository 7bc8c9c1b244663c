"""The tool and store spans of an exchange (see toolnexus/otel.py, which wraps the effect
table with these): execute_tool per call, and the memory operations and lock events of
the "io" effect's ops, and the attribute helpers both use.

Nothing here imports opentelemetry: a function that needs its context imports it when
an exchange is traced."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .core.toolkit import UNKNOWN_TOOL
from .core.wire.common import to_json

# A Trace (see otel.py) is what every function here is handed as `t`.
Trace = Any

__all__ = ["io", "sync_tools", "async_tools", "json_text", "error_type"]


def json_text(value: Any) -> str:
    """Return a span attribute's JSON text (any value: what JSON cannot hold, as a string)."""
    try:
        return to_json(value).decode()
    except (TypeError, ValueError):
        return json.dumps(str(value))


def error_type(e: BaseException) -> str:
    """Return a span's error.type: the provider's status, else the exception's class."""
    if isinstance(e, GeneratorExit):
        return "stream_closed"  # the consumer stopped reading
    status = getattr(e, "status", None)
    return str(status) if status is not None else type(e).__name__


# ---- tool spans ----------------------------------------------------------------------------


def _tool_attrs(name: str, call: Mapping | None) -> dict:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
             "gen_ai.tool.type": "function"}  # fmt: skip
    if call is not None:
        attrs["gen_ai.tool.call.id"] = call["id"]
    return attrs


def _tool_end(t: Trace, span: Any, result: Any, end: int | None = None) -> None:
    if isinstance(result, Mapping) and result.get("is_error"):
        output, meta = result.get("output"), result.get("metadata") or {}
        raised = "traceback" in meta and isinstance(output, str)
        span.set_attribute(
            "error.type", (output.split(":", 1)[0] if raised else "") or "tool_error"
        )
        span.set_status(t.trace.Status(t.trace.StatusCode.ERROR, "tool_error"))
    elif t.content and isinstance(result, Mapping):  # masked before the span sees it
        span.set_attribute("gen_ai.tool.call.result", json_text(t.clean(result.get("output"))))
    span.end(end_time=end)


def _traced_execute(t: Trace, fn: Callable, name: str, calls: Sequence, seen: set) -> Callable:
    """Wrap a tool's execute: its span runs as long as the tool, and is the current span
    while it runs (spans the tool makes itself are its children)."""
    from opentelemetry import context as otel_context

    def begin(args: Any) -> tuple[Any, Any]:
        call = next((c for c in calls if c["args"] is args), None)  # each call's own args
        if call is not None:
            seen.add(call["id"])
        span = t.start(f"execute_tool {name}", _tool_attrs(name, call), "INTERNAL")
        if t.content:
            span.set_attribute("gen_ai.tool.call.arguments", json_text(t.clean(args)))
        return span, otel_context.attach(t.trace.set_span_in_context(span, t.context))

    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    ):

        async def run_async(args: Any) -> Any:
            span, token = begin(args)
            try:
                result = await fn(args)
            except BaseException as e:
                t.fail(span, e)
                raise
            finally:
                otel_context.detach(token)
            _tool_end(t, span, result)
            return result

        return run_async

    def run(args: Any) -> Any:
        span, token = begin(args)
        try:
            result = fn(args)
        except BaseException as e:
            t.fail(span, e)
            raise
        finally:
            otel_context.detach(token)
        _tool_end(t, span, result)
        return result

    return run


def _traced_toolkit(t: Trace, tk: Any, calls: Sequence[Mapping], seen: set) -> Any:
    """Return `tk` whose tools called in this turn make their spans."""
    if not tk or "index" not in tk:
        return tk
    index = tk["index"]
    for name in {c["name"] for c in calls}:
        tool = index.get(name)
        if tool is not None and callable(tool.get("execute")):
            wrapped = _traced_execute(t, tool["execute"], name, calls, seen)
            index = index.set(name, tool.set("execute", wrapped))
    return tk.set("index", index)


def _untraced(t: Trace, calls: Sequence[Mapping], ran: Sequence, seen: set, started: int) -> None:
    """A span for each call no tool ran (an unknown tool's error result), named for no
    tool: a model invents names at will, and span names are indexed by name."""
    for call, (result, seconds) in zip(calls, ran, strict=False):
        if call["id"] not in seen:
            span = t.start(f"execute_tool {UNKNOWN_TOOL}", _tool_attrs(UNKNOWN_TOOL, call),
                           "INTERNAL", at=started)  # fmt: skip
            _tool_end(t, span, result, started + int(seconds * 1e9))


def sync_tools(t: Trace, inner: Callable) -> Callable:
    def tools(tk: Any, calls: Sequence[Mapping]) -> list:
        started, seen = time.time_ns(), set()
        ran = inner(_traced_toolkit(t, tk, calls, seen), calls)
        _untraced(t, calls, ran, seen, started)
        return ran

    return tools


def async_tools(t: Trace, inner: Callable) -> Callable:
    async def tools(tk: Any, calls: Sequence[Mapping]) -> list:
        started, seen = time.time_ns(), set()
        ran = await inner(_traced_toolkit(t, tk, calls, seen), calls)
        _untraced(t, calls, ran, seen, started)
        return ran

    return tools


# ---- store, log and lock (the "io" effect's ops) -----------------------------------------


# What an io op is (its `kind`, see core.flow.Op) -> what its span is.
_KINDS = {"lock": "lock", "load": "load", "lock+load": "load", "save": "save", "log": "log"}


_MEMORY = {"load": "search_memory", "save": "upsert_memory", "log": "create_memory"}


def _count(kind: str, lock_load: bool, args: tuple, value: Any) -> int | None:
    """How many records the op read or wrote (messages; log entries)."""
    if kind == "load":
        loaded = value[1] if lock_load else value  # lock_load returns (held, loaded)
        return len(loaded) if loaded is not None else 0
    if kind == "save":
        messages = next((a for a in args if isinstance(a, Sequence) and not isinstance(a, str)),
                        None)  # fmt: skip
        return len(messages) if messages is not None else None
    answers = args[-2] if len(args) >= 2 else ()
    return 1 + len(answers) if isinstance(answers, tuple | list) else None


def _memory_start(t: Trace, kind: str, lock_load: bool) -> Any:
    log = kind == "log"
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": _MEMORY[kind],
        "gen_ai.memory.store.id": t.log_desc if log else t.store_desc,
        "toolnexus.memory.kind": "message_log" if log else "transcript",
    }
    if lock_load:
        attrs["toolnexus.lock.taken"] = True
    return t.start(_MEMORY[kind], attrs)


def _done_op(t: Trace, kind: str, op: Any, span: Any, t0: float, value: Any) -> None:
    lock_load = op.kind == "lock+load"
    if kind == "lock" or lock_load:
        t.event("toolnexus.lock.acquired", {"toolnexus.lock.wait_seconds": time.perf_counter() - t0,
                                            "toolnexus.lock.with_load": lock_load})  # fmt: skip
    if span is not None:
        count = _count(kind, lock_load, op.args, value)
        if count is not None:
            span.set_attribute("gen_ai.memory.record.count", count)
        span.end()


def _failed_op(t: Trace, kind: str, span: Any, e: BaseException) -> None:
    if kind == "lock":
        t.event("toolnexus.lock.failed", {"error.type": error_type(e)})
    if span is not None:
        t.fail(span, e)


def _traced_op(t: Trace, op: Any) -> Any:
    kind = _KINDS.get(op.kind)
    if kind is None:
        return op
    fn, lock_load = op.fn, op.kind == "lock+load"

    def begin() -> tuple[Any, float]:
        return (None if kind == "lock" else _memory_start(t, kind, lock_load)), time.perf_counter()

    if inspect.iscoroutinefunction(fn):

        async def run_async(*args: Any) -> Any:
            span, t0 = begin()
            try:
                value = await fn(*args)
            except BaseException as e:
                _failed_op(t, kind, span, e)
                raise
            _done_op(t, kind, op, span, t0, value)
            return value

        return op._replace(fn=run_async)

    def run(*args: Any) -> Any:
        span, t0 = begin()
        try:
            value = fn(*args)
        except BaseException as e:
            _failed_op(t, kind, span, e)
            raise
        _done_op(t, kind, op, span, t0, value)
        return value

    return op._replace(fn=run)


def io(t: Trace, inner: Callable, asynchronous: bool) -> Callable:
    if asynchronous:

        async def aio(ops: Sequence) -> tuple:
            return await inner(tuple(_traced_op(t, op) for op in ops))

        return aio

    def io(ops: Sequence) -> tuple:
        return inner(tuple(_traced_op(t, op) for op in ops))

    return io
