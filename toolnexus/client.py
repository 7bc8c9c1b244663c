"""Clients as values: every field an option, plus the runtime the client owns.

`create_client(...)` checks its options and returns an immutable `Client`; `c.set(...)`
returns a client built from the merged options (checked again) that shares `c`'s
runtime. The runtime (connection and thread pools, per-conversation memo, metrics) is
the one mutable thing, owned and explicit: `close(client)`, `client.close()`, or
`with create_client(...) as c:`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, Literal

from pyrsistent import PRecord, field

from .backends.memory.store import in_memory_store
from .core.frozen import FrozenMap, freeze
from .core.wire import DEFAULT_STYLE, DIALECTS, Style
from .core.wire.generated import STYLE as GENERATED_STYLE
from .drivers.transport import Endpoint, endpoint_url, given_http
from .plan import plan
from .runtime import Runtime
from .store.check import check_store
from .store.scoped import align_log

__all__ = [
    "create_client",
    "create_in_process_client",
    "conversation_store",
    "metrics",
    "get_chat_history",
    "clear_chat_history",
    "close",
    "Client",
    "Secret",
]

_HOOKS = {"before_llm", "after_llm", "before_tool", "after_tool"}
# What to use instead of a request_params key the loop sets itself.
_INSTEAD = {
    "model": "model=",
    "messages": "history= or a store",
    "input": "history= or a store",
    "tools": "a toolkit; a provider's own tools go in it as provider_tool({...})",
    "stream": "stream() / astream() for a streamed run",
    "system": "system_prompt=",
    "instructions": "system_prompt=",
}
_EXECUTORS = ("threads", "inline")
MAX_TOOL_CALLS = 64  # a model turn's tool calls that run (one answer once asked for 2,000)


class Secret:
    """A string that never shows itself in a repr, str or log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value

    def reveal(self) -> str | None:
        """Return the secret value (for a request header, nowhere else)."""
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret(***)" if self._value else "Secret(None)"

    __str__ = __repr__

    def __reduce__(self):  # never pickled into a cache or a store by accident
        raise TypeError("a Secret cannot be pickled")


class Client(PRecord):
    """An immutable client value: its options, what they imply, and its runtime.

    Evolve it with `c.set(model="m2")`: the result is checked and built like a new client
    from the merged options, and shares `c`'s runtime. Its repr hides key and headers.
    """

    style = field()
    base_url = field()
    model = field()
    api_key = field()  # a Secret
    headers = field()
    secret_headers = field()  # names of headers= that carry a credential, beyond the rule
    system_prompt = field()
    max_turns = field()
    max_tool_calls = field()  # per model turn: the calls past it are answered with an error
    store = field()
    lock = field()  # as given (None: see plan.conversation_lock)
    hooks = field()
    retries = field()
    retry_base_ms = field()
    max_retry_wait_ms = field()
    timeout_ms = field()
    read_timeout_ms = field()
    on_error = field()
    on_metric = field()
    wait_for = field()
    request_params = field()
    body_transform = field()
    transport = field()  # the httpx transport given, or None
    http_client = field()  # the host's httpx.Client / AsyncClient (or a pair), or None
    proxy = field()  # the proxy of the runtime's own clients (None: the environment's)
    default_query = field()  # query parameters of every request (e.g. api-version)
    message_log = field()
    strict_log = field()
    lookup_tool = field()
    tool_executor = field()
    on_unsupported_part = field()
    max_part_bytes = field()
    prompt_cache = field()  # cache breakpoints (anthropic) / prompt_cache_key (openai)
    server_state = field()  # the server keeps the conversation (responses: previous_response_id)
    keep_refused = field()  # a run that ends in a refusal is saved whole (default: not)
    generate = field()  # the host function of an in-process client, else None
    endpoint = field()  # derived from base_url, style, key and headers (None in process)
    given = field()  # derived: transport.Given of the host's clients, or None (the runtime's)
    plan = field()  # derived: the flow configurations the options imply (see plan.py)
    runtime = field()

    def set(self, *args: Any, **changes: Any) -> Client:
        """Return a client built from this one's options with `changes`, sharing its runtime."""
        if args:  # PRecord's positional form: set(name, value)
            changes = {args[0]: args[1], **changes}
        options = {**options_of(self), **changes}
        if self.generate is not None:
            return _in_process(options, self.runtime)
        return _http(options, self.runtime)

    def close(self) -> None:
        """Close the client's runtime (its pools and threads); idempotent."""
        self.runtime.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        store = self.store.get("desc", "store") if isinstance(self.store, Mapping) else "store"
        base = self.endpoint.base if self.endpoint is not None else self.base_url
        return (
            f"Client(style={self.style!r}, base_url={base!r}, model={self.model!r}, "
            f"max_turns={self.max_turns}, store={store})"
        )

    __str__ = __repr__


# Field reads as properties: a PRecord attribute read otherwise first fails the normal
# lookup (an AttributeError raised and caught inside) and costs 5x more.
for _name in Client._precord_fields:
    setattr(Client, _name, property(itemgetter(_name), doc=f"The client's {_name}."))
del _name

_DERIVED = {"endpoint", "given", "plan", "runtime"}


def options_of(client: Client) -> dict:
    """Return the options a client was built from (the key revealed: keep it to yourself)."""
    out = {k: client[k] for k in Client._precord_fields if k not in _DERIVED}
    out["api_key"] = client.api_key.reveal()
    if out["generate"] is None:
        del out["generate"]
    return out


def _check_number(name: str, v: Any, least: float, integer: bool = False) -> None:
    kind = int if integer else int | float
    if v is not None and (isinstance(v, bool) or not isinstance(v, kind) or v < least):
        what = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {what} >= {least}, got {v!r}")


def _check(o: Mapping) -> None:
    if o["style"] not in DIALECTS:
        raise ValueError(f"unknown style {o['style']!r}: expected one of {sorted(DIALECTS)}")
    if o["server_state"] and DIALECTS[o["style"]].server_state_body is None:
        able = sorted(d for d, c in DIALECTS.items() if c.server_state_body is not None)
        raise ValueError(f"server_state=True needs a style whose server keeps a conversation"
                         f" ({', '.join(able)}), not {o['style']!r}")  # fmt: skip
    if not o["model"] or not isinstance(o["model"], str):
        raise ValueError("model is required (a non-empty string)")
    if o["system_prompt"] is not None and not isinstance(o["system_prompt"], str):
        # Else it fails later, deep in a run, as a raw TypeError joining the system text.
        raise TypeError(f"system_prompt must be a string (or None), got "
                        f"{type(o['system_prompt']).__name__}")  # fmt: skip
    _check_number("max_turns", o["max_turns"], 1, integer=True)
    _check_number("max_tool_calls", o["max_tool_calls"], 1, integer=True)
    _check_number("retries", o["retries"], 0, integer=True)
    for name in ("retry_base_ms", "max_retry_wait_ms", "timeout_ms", "read_timeout_ms"):
        _check_number(name, o[name], 0)
    if o["max_turns"] is None or o["retries"] is None:
        raise ValueError("max_turns and retries must be integers")
    if o["store"] is not None:
        check_store(o["store"], who="store")
    hooks = o["hooks"] or {}
    if set(hooks) - _HOOKS or not all(callable(h) for h in hooks.values()):
        raise ValueError(f"hooks must map some of {sorted(_HOOKS)} to functions")
    for name in ("on_error", "on_metric", "wait_for", "body_transform", "lock"):
        if o[name] is not None and not callable(o[name]):
            raise ValueError(f"{name} must be a function")
    if o["on_unsupported_part"] not in ("error", "text"):
        raise ValueError(
            f'on_unsupported_part must be "error" or "text", got {o["on_unsupported_part"]!r}'
        )
    _check_number("max_part_bytes", o["max_part_bytes"], 1, integer=True)
    if not isinstance(o["keep_refused"], bool):
        raise ValueError(f"keep_refused must be True or False, got {o['keep_refused']!r}")
    if o["tool_executor"] not in _EXECUTORS:
        raise ValueError(f"tool_executor must be one of {_EXECUTORS}, got {o['tool_executor']!r}")


def _params(given: Mapping | None, style: str) -> FrozenMap:
    """Return request_params frozen; a field the loop sets on every request is a ValueError
    (it would be overridden, or would override the loop's own)."""
    if given is not None and not isinstance(given, Mapping):
        raise ValueError(f"request_params must be a mapping, got {type(given).__name__}")
    params = dict(given or {})
    refused = [k for k in DIALECTS[style].owned_params if k in params]
    if refused:
        how = "; ".join(f"{k!r}: use {_INSTEAD.get(k, 'the client options')}" for k in refused)
        raise ValueError(f"request_params may not set {refused}: the loop sets them on every "
                         f"{style} request ({how})")  # fmt: skip
    return freeze(params)


def _build(o: dict, runtime: Runtime | None, endpoint: Endpoint | None) -> Client:
    key = o["api_key"]
    runtime = runtime if runtime is not None else Runtime()
    store = o["store"] if o["store"] is not None else in_memory_store()
    fields = {
        **o,
        "generate": o.get("generate"),
        "api_key": key if isinstance(key, Secret) else Secret(key),
        "headers": FrozenMap(o["headers"] or {}),
        "system_prompt": o["system_prompt"] or "",
        "store": store,
        # One tenant scope: the log sees the ids the store's decorators map (namespaced...).
        "message_log": align_log(store, o["message_log"]),
        "hooks": FrozenMap(o["hooks"] or {}),
        "request_params": _params(o["request_params"], o["style"]),
        "given": given_http(o["transport"], o["http_client"]),
        "endpoint": endpoint,
        "runtime": runtime,
    }
    return Client(**fields, plan=plan(fields, runtime))


def _defaults(options: Mapping) -> dict:
    o = {k: None for k in Client._precord_fields if k not in _DERIVED}
    o.update(style=DEFAULT_STYLE, max_turns=10, max_tool_calls=MAX_TOOL_CALLS, retries=2,
             retry_base_ms=500, max_retry_wait_ms=60_000, read_timeout_ms=120_000,
             strict_log=False, lookup_tool=True,
             tool_executor="threads", on_unsupported_part="error",
             prompt_cache=False, server_state=False, keep_refused=False)  # fmt: skip
    unknown = set(options) - set(o)
    if unknown:
        raise ValueError(f"unknown client option(s): {sorted(unknown)}; known: {sorted(o)}")
    o.update(options)
    return o


def _http(options: Mapping, runtime: Runtime | None = None) -> Client:
    o = _defaults(options)
    _check(o)
    base_url = o["base_url"]
    if not base_url:
        raise ValueError("base_url is required (e.g. 'https://api.openai.com/v1')")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    key = o["api_key"]
    key = key.reveal() if isinstance(key, Secret) else key
    codec = DIALECTS[o["style"]]
    if not key:  # each codec names the environment variables of its providers' keys
        key = next((os.environ[v] for v in codec.key_env if os.environ.get(v)), None)
    o["api_key"] = key
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        **codec.headers(key),
        **dict(o["headers"] or {}),
    }
    _check_http(o)
    target, streamed = _targets(base_url, codec, o)
    endpoint = Endpoint(target, headers, codec, key, base=base_url,
                        secret_headers=tuple(o["secret_headers"] or ()),
                        stream_url=streamed)  # fmt: skip
    return _build(o, runtime, endpoint)


def _targets(base_url: str, codec: Any, o: Mapping) -> tuple[Any, Any]:
    """Return the URLs a client posts to, whole and streamed (None: the same one). A
    dialect whose URL names the model and the stream (Gemini's `model_url`) has two."""
    model_url = codec.model_url
    if model_url is None:
        return endpoint_url(base_url, codec.url, o["default_query"]), None
    return tuple(endpoint_url(base_url, lambda b, s=s: model_url(b, o["model"], s),
                              o["default_query"]) for s in (False, True))  # fmt: skip


def _check_http(o: Mapping) -> None:
    names = o["secret_headers"]
    if names is not None and (isinstance(names, str) or not all(
            isinstance(n, str) and n for n in names)):  # fmt: skip
        raise ValueError(f"secret_headers must be a list of header names, got {names!r}")
    query = o["default_query"]
    if query is not None and not (
        isinstance(query, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in query.items())
    ):  # fmt: skip
        raise ValueError(f"default_query must map names to strings, got {query!r}")
    proxy = o["proxy"]
    if proxy is not None and not isinstance(proxy, str):
        raise ValueError(f"proxy must be a URL string such as 'http://proxy:3128', got {proxy!r}")
    if proxy is not None and (o["transport"] is not None or o["http_client"] is not None):
        raise ValueError(
            "proxy= sets the runtime's own HTTP clients; with transport= or http_client= "
            "set the proxy there (httpx.Client(proxy=...))"
        )


def _in_process(options: Mapping, runtime: Runtime | None = None) -> Client:
    o = _defaults(options)
    if not callable(o["generate"]):
        raise ValueError("generate must be a function(request) -> reply")
    if o["style"] != GENERATED_STYLE:
        raise ValueError(f"an in-process client speaks the {GENERATED_STYLE} message shape only")
    _check(o)
    return _build(o, runtime, None)


def create_client(
    *,
    base_url: str,
    model: str,
    style: Style = DEFAULT_STYLE,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    secret_headers: Sequence[str] | None = None,
    system_prompt: str | None = None,
    max_turns: int = 10,
    max_tool_calls: int = MAX_TOOL_CALLS,
    store: Mapping[str, Any] | None = None,
    lock: Callable[[str], Any] | None = None,
    hooks: Mapping[str, Callable] | None = None,
    retries: int = 2,
    retry_base_ms: float = 500,
    max_retry_wait_ms: float = 60_000,
    timeout_ms: float | None = None,
    read_timeout_ms: float = 120_000,
    on_error: Callable[[Mapping], Any] | None = None,
    on_metric: Callable[[Mapping], Any] | None = None,
    wait_for: Callable[[Mapping], Any] | None = None,
    request_params: Mapping[str, Any] | None = None,
    body_transform: Callable[[dict], dict] | None = None,
    transport: Any = None,
    http_client: Any = None,
    proxy: str | None = None,
    default_query: Mapping[str, str] | None = None,
    message_log: Mapping[str, Any] | None = None,
    strict_log: bool = False,
    lookup_tool: bool = True,
    tool_executor: Literal["threads", "inline"] = "threads",
    on_unsupported_part: Literal["error", "text"] = "error",
    max_part_bytes: int | None = None,
    prompt_cache: bool = False,
    server_state: bool = False,
    keep_refused: bool = False,
) -> Client:
    """Return a client value for a chat completions, Anthropic messages, Responses or
    Gemini endpoint.

    base_url, model: where and what to ask; style: "openai" (POST /chat/completions),
    "anthropic" (POST /v1/messages), "responses" (POST /responses) or "gemini" (POST
    /v1beta/models/{model}:generateContent, the key in x-goog-api-key). api_key: else
    OPENAI_API_KEY / OPENROUTER_API_KEY / ANTHROPIC_API_KEY / GEMINI_API_KEY /
    GOOGLE_API_KEY; it reaches request headers
    only, as do headers= that carry a credential (authorization, *-key, *token*, cookie,
    secret_headers): never sent to another origin, masked like the key.
    system_prompt leads every request. max_turns: model turns per run (10);
    max_tool_calls: calls run per model turn (64), the rest answered with an error.
    store: a {get, save} map (default: a fresh in-memory one); lock: fn(id) -> context
    manager over an exchange (default: the store's own "lock", else in-process).
    hooks: before_llm, after_llm, before_tool, after_tool (sync or async). retries (2),
    retry_base_ms (500), max_retry_wait_ms (60 s), on_error: the retry policy
    (docs/retries.md). timeout_ms: the run's deadline; read_timeout_ms: the longest wait
    between bytes (120 s). on_metric(event): every metric; wait_for(request): answers a
    tool's pending request. request_params: extra body fields (not those the loop sets:
    a ValueError); body_transform(body) -> body: the last rewrite of the body as sent.
    HTTP is httpx's (environment proxies and certificates; docs/networks.md):
    http_client (yours, used as given by every verb), transport, proxy, default_query (a
    base URL's user:password@ becomes Basic auth). message_log, strict_log, lookup_tool:
    toolnexus.history. tool_executor: "threads" or "inline". on_unsupported_part
    ("error" | "text"), max_part_bytes: content parts. prompt_cache: cache breakpoints /
    prompt_cache_key. server_state: (responses) the server keeps the conversation.
    keep_refused: save a refused exchange too (default: the stored transcript stays as
    it was; the result and the log keep it). docs/guide.md tells each in full.
    Bad options raise ValueError (TypeError for a store that is not one, or a
    system_prompt that is not a string) at once.
    """
    options = {k: v for k, v in locals().items()}
    return _http(options)


def create_in_process_client(
    *, model: str, generate: Callable[[dict], Any], **options: Any
) -> Client:
    """Return a client whose model is a host function `generate(request) -> reply`.

    The request is {"model", "messages", "tools"} with openai-shaped messages; the reply
    is {"content": str} or {"tool_calls": [{"id"?, "name", "arguments"}]}, plus an
    optional "usage". `generate` may be `async def`. No URL, no key; every other option
    of `create_client` applies.
    """
    if "base_url" in options or "api_key" in options:
        raise ValueError("an in-process client takes no base_url or api_key")
    return _in_process({**options, "model": model, "generate": generate})


def close(client: Client) -> None:
    """Close a client's runtime: its connection pools and threads. Idempotent."""
    client.runtime.close()


def conversation_store(client: Client) -> dict:
    """Return the exact store the client uses (yours, or the default it built)."""
    return client.store


def metrics(client: Client) -> str:
    """Return the client's metrics in the Prometheus text format."""
    return client.runtime.sink()["render"]()


def get_chat_history(client: Client, **filters: Any) -> tuple:
    """Return the client's message log entries matching `filters` (see the log's query)."""
    from .core.scope import scope_of
    from .history.wiring import require_log
    from .otel import traced_log

    log = require_log(client.message_log)
    return traced_log(log, client.runtime, scope_of(client.store).key)["query"](**filters)


def clear_chat_history(
    client: Client, before: Any = None, *, conversation_id: str | None = None
) -> int:
    """Remove the client's message log entries up to `before` (all if None), only those of
    `conversation_id` when given; return how many."""
    from .history.wiring import require_log

    log = require_log(client.message_log)
    if conversation_id is None:
        return log["clear"](before=before)
    if not isinstance(conversation_id, str) or not conversation_id:
        raise ValueError(f"conversation_id must be a non-empty string, got {conversation_id!r}")
    return log["clear"](before=before, conversation_id=conversation_id)
