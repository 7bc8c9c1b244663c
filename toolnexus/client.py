"""Clients as values, and the sync driver: the only place the loop does I/O."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from pyrsistent import PMap, PRecord, field, freeze, pmap, thaw

from . import loop
from .errors import ProviderError, excerpt
from .skills import system_for
from .store.locks import local_lock
from .store.memory import in_memory_store
from .toolkit import execute as execute_tool
from .transcript import freeze_transcript
from .wire import DIALECTS
from .wire import openai as openai_wire
from .wire.common import encode_json

__all__ = [
    "create_client",
    "create_in_process_client",
    "run",
    "ask",
    "conversation",
    "conversation_store",
    "Client",
]

_KEY_ENV = {"openai": ("OPENAI_API_KEY", "OPENROUTER_API_KEY"), "anthropic": ("ANTHROPIC_API_KEY",)}

# Options of later features: accepted now so configurations stay valid; the README
# says which of them have no effect yet.
_OPTIONS = {
    "base_url", "style", "model", "api_key", "headers", "system_prompt", "max_turns",
    "store", "lock", "hooks", "retries", "retry_base_ms", "timeout_ms", "on_error",
    "on_metric", "wait_for", "request_params", "body_transform", "transport",
    "message_log", "strict_log", "lookup_tool",
}  # fmt: skip


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
    headers = field()
    system_prompt = field()
    max_turns = field()
    store = field()
    lock = field()
    options = field()  # the remaining options, as given
    post = field()  # fn(body, turn_no) -> normalized turn: the transport seam of the loop
    http = field()
    pool = field()

    def __repr__(self) -> str:
        store = self.store.get("desc", "store") if isinstance(self.store, Mapping) else "store"
        return (
            f"Client(style={self.style!r}, base_url={self.base_url!r}, model={self.model!r}, "
            f"max_turns={self.max_turns}, store={store})"
        )

    __str__ = __repr__


def _check(options: Mapping) -> None:
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"unknown client option(s): {sorted(unknown)}; known: {sorted(_OPTIONS)}")
    style = options.get("style", "openai")
    if style not in DIALECTS:
        raise ValueError(f"unknown style {style!r}: expected one of {sorted(DIALECTS)}")
    max_turns = options.get("max_turns", 10)
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ValueError(f"max_turns must be an integer >= 1, got {max_turns!r}")
    store = options.get("store")
    if store is not None and not (callable(store.get("get")) and callable(store.get("save"))):
        raise ValueError("store must be a mapping with callable 'get' and 'save'")


def _base(options: Mapping, style: str, post: Callable, http: Any) -> Client:
    rest = {k: v for k, v in options.items() if k not in Client._precord_fields}
    return Client(
        style=style,
        base_url=options.get("base_url"),
        model=options["model"],
        api_key=Secret(options.get("api_key")),
        headers=freeze(dict(options.get("headers") or {})),
        system_prompt=options.get("system_prompt") or "",
        max_turns=options.get("max_turns", 10),
        store=options.get("store") or in_memory_store(),
        lock=options.get("lock") or local_lock(),
        options=pmap(rest),
        post=post,
        http=http,
        # Long-lived on the client, so no run pays for creating threads or connections.
        pool=ThreadPoolExecutor(max_workers=16, thread_name_prefix="toolnexus-tool"),
    )


def _send(transport: httpx.BaseTransport, request: httpx.Request) -> httpx.Response:
    """Send on the transport directly and read the body.

    httpx.Client adds cookies, auth flows, redirects and event hooks per request; an
    LLM POST needs none of them, and skipping that layer is most of our speed.
    """
    resp = transport.handle_request(request)
    try:
        resp.read()
    finally:
        resp.close()
    return resp


def _http_post(
    transport: httpx.BaseTransport,
    url: str,
    headers: Mapping,
    timeout: dict,
    codec: Any,
    key: str | None,
) -> Callable:
    target = httpx.URL(url)
    headers = dict(headers)

    def post(body: Mapping, turn_no: int) -> PMap:
        request = httpx.Request(
            "POST",
            target,
            headers=headers,
            content=encode_json(body),
            extensions={"timeout": timeout},
        )
        try:
            resp = _send(transport, request)
        except httpx.HTTPError as e:
            raise ProviderError(f"POST {url} failed: {type(e).__name__}: {e}", url=url) from None
        if not 200 <= resp.status_code < 300:
            text = excerpt(resp.text, (key,))
            raise ProviderError(
                f"POST {url} returned {resp.status_code}: {text}",
                status=resp.status_code,
                body=text,
                url=url,
            )
        try:
            return codec.parse_response(json.loads(resp.content))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise ProviderError(
                f"POST {url}: unreadable response ({e}): {excerpt(resp.text, (key,))}",
                status=resp.status_code,
                url=url,
            ) from None

    return post


def create_client(**options: Any) -> Client:
    """Return a client value for an OpenAI-style or Anthropic-style endpoint.

    Bad options raise ValueError at once. The key comes from `api_key` or the
    environment and reaches request headers only.
    """
    _check(options)
    if not options.get("base_url"):
        raise ValueError("base_url is required (e.g. 'https://api.openai.com/v1')")
    if not options.get("model"):
        raise ValueError("model is required")
    style = options.get("style", "openai")
    key = options.get("api_key") or next(
        (os.environ[v] for v in _KEY_ENV[style] if os.environ.get(v)), None
    )
    codec = DIALECTS[style]
    timeout = options.get("timeout_ms")
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        **codec.headers(key),
        **dict(options.get("headers") or {}),
    }
    # One pooled transport per client: connections are reused across turns and runs.
    transport = options.get("transport") or httpx.HTTPTransport()
    limits = httpx.Timeout(timeout / 1000 if timeout else 600.0).as_dict()
    post = _http_post(transport, codec.url(options["base_url"]), headers, limits, codec, key)
    return _base({**options, "api_key": key}, style, post, transport)


def create_in_process_client(*, model: str, generate: Callable[[dict], Mapping], **options: Any):
    """Return a client whose model is a host function `generate(request) -> reply`.

    The request is {"model", "messages", "tools"} with openai-shaped messages; the reply
    is {"content": str} or {"tool_calls": [{"id"?, "name", "arguments"}]}, plus an
    optional "usage". No URL, no key.
    """
    if not callable(generate):
        raise ValueError("generate must be a function(request) -> reply")
    if not model:
        raise ValueError("model is required")
    if options.get("style", "openai") != "openai":
        raise ValueError("an in-process client speaks the openai message shape only")
    _check(options)

    def post(body: Mapping, turn_no: int) -> PMap:
        # Plain lists and dicts: the host function may print, mutate or json.dumps them.
        request = {
            "model": body["model"],
            "messages": thaw(body["messages"]),
            "tools": body.get("tools", []),
        }
        return openai_wire.parse_generated(generate(request), turn_no)

    return _base({**options, "model": model}, "openai", post, None)


def conversation_store(client: Client) -> dict:
    """Return the exact store the client uses (yours, or the default it built)."""
    return client.store


# ---- the sync driver -------------------------------------------------------


def _run_tool(tk: Any, call: Mapping) -> PMap:
    if call["error"] is not None:
        return loop.invalid_result(call)
    r = execute_tool(tk, call["name"], call["args"])
    return asyncio.run(r) if inspect.isawaitable(r) else r


def _execute(client: Client, tk: Any, calls: Sequence[Mapping]) -> list:
    """Run a turn's calls concurrently; results in call order."""
    # The first call runs on this thread while the pool runs the rest: one thread hop fewer.
    rest = [client.pool.submit(_run_tool, tk, c) for c in calls[1:]]
    first = _run_tool(tk, calls[0])
    return [first, *(f.result() for f in rest)]


def _drive(client: Client, state: PMap, tk: Any) -> PMap:
    """Run the pure loop to its end, doing the I/O it asks for."""
    params = client.options.get("request_params") or {}
    # Encoded once per run, not once per turn.
    tools = DIALECTS[client.style].encode_tools(tk)
    system = system_for(client.system_prompt, tk)
    while True:
        body = loop.request(state, client.model, tools, system, params)
        state, calls = loop.on_turn(state, client.post(body, state["turns"] + 1))
        if not calls:
            return state
        state = loop.on_results(state, calls, _execute(client, tk, calls), client.max_turns)
        if loop.is_finished(state):
            return state


def _history(client: Client, history: Sequence | None, conversation_id: str | None):
    if history is not None:
        return freeze_transcript(history)
    if conversation_id is None:
        return freeze_transcript(None)
    return freeze_transcript(client.store["get"](conversation_id))


def _check_run(prompt: Any, conversation_id: Any) -> None:
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a string, got {type(prompt).__name__}")
    if conversation_id is not None and (
        not isinstance(conversation_id, str) or not conversation_id
    ):
        raise ValueError(f"conversation_id must be a non-empty string, got {conversation_id!r}")


def _finish(client: Client, state: PMap, conversation_id: str | None) -> PMap:
    """The one exit point of a run: save (with an id) and build the result."""
    if conversation_id is not None:
        client.store["save"](conversation_id, state["messages"])
    return loop.result(state, client.model)


def run(
    client: Client,
    prompt: str,
    *,
    toolkit: PMap | None = None,
    history: Sequence | None = None,
    conversation_id: str | None = None,
) -> PMap:
    """Run the tool-calling loop for `prompt`; return the RunResult map.

    With `conversation_id`, the store's transcript is loaded first (unless `history`
    is given, which wins) and the final transcript saved after every normal exit
    (done or max_turns). A raised error saves nothing: the stored transcript stays
    as it was. Without an id the store is never touched.
    """
    _check_run(prompt, conversation_id)
    if conversation_id is None:
        state = loop.start(client.style, _history(client, history, None), prompt)
        return _finish(client, _drive(client, state, toolkit), None)
    with client.lock(conversation_id):
        state = loop.start(client.style, _history(client, history, conversation_id), prompt)
        return _finish(client, _drive(client, state, toolkit), conversation_id)


def ask(client: Client, prompt: str, *, toolkit: PMap | None = None, id: str | None = None) -> PMap:
    """Return `run(client, prompt, toolkit=toolkit, conversation_id=id)`."""
    return run(client, prompt, toolkit=toolkit, conversation_id=id)


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
