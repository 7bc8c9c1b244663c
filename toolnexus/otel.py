"""OpenTelemetry GenAI spans of an exchange, through `opentelemetry-api` only.

On by default when the API is installed (`pip install 'toolnexus[otel]'`): with no tracer
provider set, its tracer is a no-op and an exchange costs one non-recording span. Nothing
here imports opentelemetry until the first exchange, and never when it is not installed.

The flow stays pure: an exchange's effect table (see drivers/) is wrapped, so each span
is made where its effect is performed, with its real start and end:

  invoke_agent            one per exchange, the parent (a run is one trace)
    chat {model}          one per model turn (each attempt of a retried turn)
    execute_tool {name}   one per tool call (the current span while the tool runs)
    search_memory         the store's load (and the message log's search)
    upsert_memory         the store's save
    create_memory         the message log's record of the exchange
  and span events on the parent for the conversation lock (acquired, with its wait) and
  for each failover of a fallback chain (toolnexus.failover, with the error's kind).

Content (messages, tool arguments and results, the log's query) only with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. See docs/observability.md.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import otel_ops
from .core.scope import scope_of
from .core.wire import DIALECTS, HOSTS
from .otel_ops import error_type, json_text

__all__ = ["CONTENT_ENV", "Trace", "available", "exchange_trace", "forget_span", "provider_name",
           "traced", "traced_log"]  # fmt: skip

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_state: dict[str, Any] = {}


def available() -> bool:
    """Whether opentelemetry-api is installed (looked up once, imported only when used)."""
    if "available" not in _state:
        try:
            _state["available"] = importlib.util.find_spec("opentelemetry") is not None
        except (ImportError, ValueError, AttributeError):  # blocked in sys.modules
            _state["available"] = False
    return _state["available"]


def _api() -> Any:
    """Return the opentelemetry.trace module and the tracer (made once)."""
    if "trace" not in _state:
        from opentelemetry import trace

        from ._version import __version__

        _state["trace"] = trace
        _state["tracer"] = trace.get_tracer("toolnexus", __version__)
    return _state["trace"], _state["tracer"]


def _capture_content() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("true", "1", "yes")


# Each dialect's provider and its well-known hosts, read off the registry (a host's
# provider is a best guess, as the conventions ask: anything else is named by the wire
# format it speaks).
PROVIDERS = {name: d.provider for name, d in DIALECTS.items()}


def provider_name(style: str, host: str | None) -> str:
    """Return gen_ai.provider.name for a client of `style` talking to `host`.

    >>> provider_name("openai", "api.deepseek.com"), provider_name("openai", "127.0.0.1")
    ('deepseek', 'openai')
    >>> provider_name("openai", "my-resource.openai.azure.com")
    'azure.ai.openai'
    """
    host = (host or "").lower()
    if host.endswith(".openai.azure.com"):
        return "azure.ai.openai"
    return HOSTS.get(host) or PROVIDERS.get(style, style)


def _provider(client: Any) -> str:
    return client.plan["provider"]  # provider_name of its style and host (plan.py)


class Trace:
    """The spans of one exchange: its parent span, and the client facts children carry."""

    def __init__(self, client: Any, cid: str | None, streaming: bool, parent: Any) -> None:
        self.trace, self.tracer = _api()
        self.parent, self.cid, self.streaming = parent, cid, streaming
        self.context = self.trace.set_span_in_context(parent)
        self.content = _capture_content()
        self.model = client.model
        self.inline = client.tool_executor == "inline"
        self.in_process = client.endpoint is None
        store = client.store
        self.store_desc = str(store.get("desc", "store")) if isinstance(store, Mapping) else "store"
        log = client.message_log
        self.log_desc = str(log.get("desc", "message_log")) if isinstance(log, Mapping) else ""
        self.base = {"gen_ai.provider.name": _provider(client)}
        if cid is not None:
            self.base["gen_ai.conversation.id"] = cid
        self.server = _server(client.endpoint)
        # What a span may show of a tool's arguments or result, or of an exception, has
        # the client's secrets masked first (the drivers scrub results only after).
        ep = client.endpoint
        self.clean = ep.clean if ep is not None else (lambda value: value)
        self.cfg = client.plan[streaming]
        # The client's runtime keeps the running exchange of each conversation key (the
        # store's tenant scope): the search_memory span of its lookup tool goes under it.
        self.running = client.runtime.traces
        self.key = scope_of(store).key(cid) if cid is not None else None
        if self.key is not None:
            self.running[self.key] = self

    def _close(self) -> None:
        if self.key is not None and self.running.get(self.key) is self:
            del self.running[self.key]

    def start(self, name: str, attrs: Mapping, kind: str = "CLIENT", at: int | None = None) -> Any:
        """Start a child span of the exchange with `attrs` (at `at` ns, else now)."""
        kind_ = getattr(self.trace.SpanKind, kind)
        return self.tracer.start_span(name, context=self.context, kind=kind_,
                                      attributes={**self.base, **attrs}, start_time=at)  # fmt: skip

    def fail(self, span: Any, e: BaseException, end: int | None = None) -> None:
        """End `span` as failed with `e` (error.type, status ERROR, the exception event)."""
        span.set_attribute("error.type", error_type(e))
        span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, type(e).__name__))
        if isinstance(e, Exception):
            span.record_exception(e, attributes=_exception_attrs(e, self.content, self.clean))
        span.end(end_time=end)

    def event(self, name: str, attrs: Mapping) -> None:
        """Add an event to the exchange's span."""
        self.parent.add_event(name, attributes=dict(attrs))

    def finish(self, result: Mapping) -> None:
        """End the exchange's span with what the run returned."""
        usage = result.get("usage") or {}
        _usage_attrs(self.parent, usage)
        self.parent.set_attribute("gen_ai.response.model", result.get("model") or self.model)
        if result.get("stop_reason"):
            self.parent.set_attribute("gen_ai.response.finish_reasons", [result["stop_reason"]])
        self.parent.set_attribute("toolnexus.run.status", result.get("status") or "")
        self.parent.set_attribute("toolnexus.run.turns", int(result.get("turns") or 0))
        if self.content:
            self.parent.set_attribute("gen_ai.output.messages", json_text(_output(result, None)))
        self._close()
        self.parent.end()

    def abort(self, e: BaseException) -> None:
        """End the exchange's span as failed."""
        self._close()
        self.fail(self.parent, e)


def _server(endpoint: Any) -> dict:
    """server.address and .port of the endpoint (never its userinfo)."""
    if endpoint is None:
        return {}
    url = endpoint.target
    out: dict[str, Any] = {"server.address": url.host}
    if url.port is not None:
        out["server.port"] = url.port
    else:
        out["server.port"] = 443 if url.scheme == "https" else 80
    return out


def _leg(request: Mapping) -> dict:
    """Return the provider and server of a request a fallback chain's other client sends
    (core.failover; the exchange's own are the primary's), else nothing."""
    client = request.get("client")
    if not request.get("leg") or not isinstance(client, Mapping) or not client.get("base_url"):
        return {}
    import httpx

    url = httpx.URL(client["base_url"])
    port = url.port if url.port is not None else 443 if url.scheme == "https" else 80
    return {"gen_ai.provider.name": provider_name(client["style"], url.host),
            "server.address": url.host, "server.port": port}  # fmt: skip


def _usage_attrs(span: Any, usage: Mapping) -> None:
    if not usage:
        return
    span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens", 0)))
    span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens", 0)))
    for ours, theirs in (
        ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
        ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
    ):
        if ours in usage:  # only what the provider reported
            span.set_attribute(theirs, int(usage[ours]))


def _exception_attrs(e: BaseException, content: bool, clean: Callable) -> dict:
    """Return the exception event's message and stacktrace: an exception's message may
    hold the model's text (a tool's error, a provider's answer), so without content
    capture they name its type only, and with it they are masked of secrets."""
    import traceback

    frames = "".join(traceback.format_tb(e.__traceback__))
    if not content:
        return {"exception.message": type(e).__name__,
                "exception.stacktrace": f"Traceback (most recent call last):\n{frames}"
                                        f"{type(e).__qualname__}"}  # fmt: skip
    full = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return {"exception.message": clean(str(e)), "exception.stacktrace": clean(full)}


# ---- content, in the conventions' message shape (opt-in only) ---------------------------


def _input(request: Mapping) -> list[dict]:
    """The request's conversation as GenAI messages, read in any dialect (core.genai)."""
    from .core.genai import to_genai

    messages = request.get("messages")
    return to_genai(messages if messages is not None else request["body"].get("messages") or ())


def _output(result: Mapping, finish: str | None) -> list[dict]:
    parts: list[dict] = [{"type": "text", "content": result.get("text") or ""}]
    for c in result.get("tool_calls") or ():
        if "arguments" in c or "args" in c:
            parts.append({"type": "tool_call", "id": c.get("id"), "name": c.get("name"),
                          "arguments": c.get("args", c.get("arguments"))})  # fmt: skip
    reason = finish or result.get("stop_reason") or result.get("finish")
    return [{"role": "assistant", "parts": parts, "finish_reason": reason or ""}]


# ---- chat spans ----------------------------------------------------------------------------


def _chat_start(t: Trace, request: Mapping) -> Any:
    body = request["body"]
    model = body.get("model") or t.model
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                             **t.server, **_leg(request)}  # fmt: skip
    if t.streaming:
        attrs["gen_ai.request.stream"] = True
    for ours, theirs in (("max_tokens", "gen_ai.request.max_tokens"),
                         ("max_completion_tokens", "gen_ai.request.max_tokens"),
                         ("temperature", "gen_ai.request.temperature"),
                         ("top_p", "gen_ai.request.top_p")):  # fmt: skip
        if isinstance(body.get(ours), int | float) and not isinstance(body.get(ours), bool):
            attrs[theirs] = body[ours]
    span = t.start(f"chat {model}", attrs, "INTERNAL" if t.in_process else "CLIENT")
    if t.content:
        span.set_attribute("gen_ai.input.messages", json_text(_input(request)))
        system = body.get("system")
        if system:
            text = system if isinstance(system, str) else json_text(system)
            span.set_attribute("gen_ai.system_instructions",
                               json_text([{"type": "text", "content": text}]))  # fmt: skip
    return span


def _chat_end(t: Trace, span: Any, turn: Mapping) -> None:
    if turn.get("model"):
        span.set_attribute("gen_ai.response.model", turn["model"])
    if turn.get("id"):
        span.set_attribute("gen_ai.response.id", turn["id"])
    if turn.get("finish"):
        span.set_attribute("gen_ai.response.finish_reasons", [turn["finish"]])
    _usage_attrs(span, turn.get("usage") or {})
    if t.content:
        out = {"text": turn.get("text"), "tool_calls": [
            {"id": c.get("id"), "name": c.get("name"), "args": c.get("args")}
            for c in turn.get("tool_calls") or ()]}  # fmt: skip
        span.set_attribute("gen_ai.output.messages", json_text(_output(out, turn.get("finish"))))
    span.end()


def _first_chunk(span: Any, t0: float) -> None:
    span.set_attribute("gen_ai.response.time_to_first_chunk", time.perf_counter() - t0)


def _sync_llm(t: Trace, inner: Callable) -> Callable:
    def llm(request: Mapping) -> Any:
        span, t0, first = _chat_start(t, request), time.perf_counter(), True
        items = inner(request)
        try:
            while True:
                try:
                    item = next(items)
                except StopIteration as stop:
                    turn = stop.value
                    break
                if first:
                    first = False
                    _first_chunk(span, t0)
                yield item
        except BaseException as e:
            items.close()
            t.fail(span, e)
            raise
        _chat_end(t, span, turn)
        return turn

    return llm


def _async_llm(t: Trace, inner: Callable) -> Callable:
    from types import AsyncGeneratorType

    def llm(request: Mapping) -> Any:
        out = inner(request)  # a coroutine of a whole turn, or a stream's async generator
        if type(out) is AsyncGeneratorType:
            return _async_items(t, request, out)
        return _async_turn(t, request, out)

    return llm


async def _async_turn(t: Trace, request: Mapping, work: Any) -> Any:
    span = _chat_start(t, request)
    try:
        turn = await work
    except BaseException as e:
        t.fail(span, e)
        raise
    _chat_end(t, span, turn)
    return turn


async def _async_items(t: Trace, request: Mapping, items: Any) -> Any:
    from .drivers.transport import TURN  # the driver's item carrying the decoded turn

    span, t0, first, turn = _chat_start(t, request), time.perf_counter(), True, None
    try:
        async for item in items:
            if item["type"] == TURN:
                turn = item["turn"]
            elif first:
                first = False
                _first_chunk(span, t0)
            yield item
    except BaseException as e:
        t.fail(span, e)
        raise
    finally:
        await items.aclose()
    if turn is not None:
        _chat_end(t, span, turn)
    elif span.is_recording():
        span.end()


# ---- the exchange --------------------------------------------------------------------------


def exchange_trace(client: Any, cid: str | None, streaming: bool) -> Trace | None:
    """Start the exchange's span; return its Trace, or None when nothing records it
    (opentelemetry-api not installed, no tracer provider set, or not sampled)."""
    if not available():
        return None
    trace, tracer = _api()
    unset = trace.ProxyTracerProvider  # what get_tracer_provider answers until one is set
    if type(tracer) is trace.ProxyTracer and type(trace.get_tracer_provider()) is unset:
        return None  # its span would record nothing: not made (half of this call's cost)
    provider = _provider(client)
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                             "gen_ai.provider.name": provider,
                             "gen_ai.request.model": client.model}  # fmt: skip
    if cid is not None:
        attrs["gen_ai.conversation.id"] = cid
    parent = tracer.start_span("invoke_agent", kind=trace.SpanKind.INTERNAL, attributes=attrs)
    if not parent.is_recording():
        parent.end()
        return None
    return Trace(client, cid, streaming, parent)


def traced(table: Mapping[str, Any], t: Trace | None, asynchronous: bool) -> Mapping[str, Any]:
    """Return the effect table with its llm, tools and io handlers making spans."""
    if t is None:
        return table
    llm = _async_llm if asynchronous else _sync_llm
    tools = otel_ops.async_tools if asynchronous else otel_ops.sync_tools
    return {**table, "llm": llm(t, table["llm"]), "tools": tools(t, table["tools"]),
            "io": otel_ops.io(t, table["io"], asynchronous),
            "metric": _metric(t, table["metric"])}  # fmt: skip


def _metric(t: Trace, inner: Callable) -> Callable:
    """Return the metric handler that also records a failover (a fallback chain's) as an
    event of the exchange's span: the models, the failure's kind, status and type."""

    def metric(event: Mapping) -> Any:
        if event.get("event") == "failover":
            t.event("toolnexus.failover", _failover_attrs(event))
        return inner(event)

    return metric


def _failover_attrs(event: Mapping) -> dict:
    attrs = {"gen_ai.request.model": str(event.get("to_model")),
             "toolnexus.failover.from_model": str(event.get("model")),
             "toolnexus.failover.kind": str(event.get("kind")),
             "toolnexus.failover.status": str(event.get("status")),
             "error.type": str(event.get("error")),
             "toolnexus.failover.turn": int(event.get("turn") or 0)}  # fmt: skip
    for side in ("from", "to"):
        client = event.get(side)
        if isinstance(client, Mapping):
            attrs[f"toolnexus.failover.{side}_style"] = str(client.get("style"))
    return attrs


def traced_log(log: Mapping, runtime: Any = None, key: Callable[[str], str] = str) -> Mapping:
    """Return `log` whose `query` makes a search_memory span: a child of the exchange of
    the conversation it is scoped to (the lookup tool's, run on a tool thread; found in
    `runtime`'s running exchanges under `key(id)`), else of the current span
    (get_chat_history)."""
    if not available() or not isinstance(log, Mapping) or not callable(log.get("query")):
        return log
    query = log["query"]
    running_of = runtime.traces if runtime is not None else {}

    def search(**filters: Any) -> Any:
        trace, tracer = _api()
        cid = filters.get("conversation_id")
        running = running_of.get(key(cid)) if isinstance(cid, str) else None
        context = running.context if running is not None else None
        attrs: dict[str, Any] = {"gen_ai.operation.name": "search_memory",
                                 "gen_ai.memory.store.id": str(log.get("desc", "message_log")),
                                 "toolnexus.memory.kind": "message_log"}  # fmt: skip
        if filters.get("conversation_id"):
            attrs["gen_ai.conversation.id"] = filters["conversation_id"]
        if _capture_content() and filters.get("contains"):
            attrs["gen_ai.memory.query.text"] = str(filters["contains"])
        with tracer.start_as_current_span("search_memory", context=context, attributes=attrs,
                                          kind=trace.SpanKind.CLIENT) as span:  # fmt: skip
            found = query(**filters)
            span.set_attribute("gen_ai.memory.record.count", len(found))
            return found

    return {**log, "query": search}


def forget_span(store: Mapping, conversation_id: str) -> Any:
    """Return a context manager: a delete_memory span (under the current span) around
    forgetting a conversation; it yields a function taking the count of what went."""
    from contextlib import contextmanager

    @contextmanager
    def span() -> Any:
        if not available():
            yield lambda n: None
            return
        trace, tracer = _api()
        desc = store.get("desc", "store") if isinstance(store, Mapping) else "store"
        attrs = {"gen_ai.operation.name": "delete_memory", "gen_ai.memory.store.id": str(desc),
                 "gen_ai.conversation.id": conversation_id,
                 "toolnexus.memory.kind": "transcript"}  # fmt: skip
        s = tracer.start_span("delete_memory", kind=trace.SpanKind.CLIENT, attributes=attrs)
        try:
            yield lambda n: s.set_attribute("toolnexus.memory.log_entries", n)
        except BaseException as e:
            s.set_attribute("error.type", error_type(e))
            s.set_status(trace.Status(trace.StatusCode.ERROR, type(e).__name__))
            s.end()
            raise
        s.end()

    return span()
