"""A chat service: any number of workers share conversations through one database.

    TOOLNEXUS_DATABASE=postgresql://app@db/chat OPENAI_API_KEY=sk-... \\
        uvicorn examples.chat_service.app:app --workers 4

TOOLNEXUS_DATABASE is postgresql://..., redis://... or sqlite:PATH (default
sqlite:chat_service.db): the store, its cross-process lock and the message log come
from it (`toolnexus.store.open_backend`; Redis has no message log: /history answers
501). The provider: TOOLNEXUS_BASE_URL, _STYLE, _MODEL, _TIMEOUT_MS, _RETRIES.

Who may touch which conversation: TOOLNEXUS_AUTH=module:function names your
authentication, a function(request) -> principal | None (sync or async); every
conversation id is then the principal's own (`namespaced(principal, store)`: store,
log, lookup tool and forget alike). `examples.chat_service.auth:bearer_tokens` is one
(TOOLNEXUS_TOKENS). Without it the service refuses to start, unless TOOLNEXUS_DEMO=1:
a local demo that answers loopback clients only, as one principal, "demo".
Routes and errors: README.md next to this file.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from contextlib import asynccontextmanager
from functools import lru_cache

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolnexus import ask, astream, create_client, define_tool, forget, to_json, toolkit
from toolnexus.core.errors import ProviderError, RunTimeoutError
from toolnexus.core.secrets import dsn_passwords, scrubber
from toolnexus.history.entry import parse_when
from toolnexus.store import (
    LockTimeoutError,
    StoreCorruptError,
    StoreUnavailableError,
    namespaced,
    open_backend,
)

logger = logging.getLogger("examples.chat_service")
ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
PRINCIPAL = re.compile(r"[A-Za-z0-9._@-]{1,128}")  # no ":": a tenant's prefix
LIMIT = re.compile(r"[0-9]{1,4}")  # ASCII digits: int() would also read "²" and fail
MAX_BODY, MAX_TEXT = 64 * 1024, 32_000


class BadRequest(Exception):
    """A client mistake: BadRequest(status, code, message), answered as a JSON error."""


def storable(text: str) -> bool:
    """Whether `text` can be stored: no NUL (PostgreSQL) and no lone surrogate (UTF-8)."""
    try:
        return "\x00" not in text.encode("utf-8").decode()
    except UnicodeEncodeError:
        return False


def check_id(raw: str) -> str:
    """Return a valid conversation id, or raise BadRequest (400 bad_id)."""
    if not ID.fullmatch(raw):
        raise BadRequest(400, "bad_id", "an id is 1-128 letters, digits and . _ : @ -")
    return raw


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON (a form or text/plain never does: CSRF)."""
    return (content_type or "").split(";")[0].strip().lower() == "application/json"


async def read_body(request: Request) -> bytes:
    """Return the body of a JSON request, read up to MAX_BODY bytes (413 past it, never
    read further), or raise BadRequest (415 when it is not declared application/json)."""
    if not is_json(request.headers.get("content-type")):
        raise BadRequest(415, "not_json", "send the body as Content-Type: application/json")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise BadRequest(413, "too_large", f"the body is over {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:  # a chunked or lying body: stop reading at the bound
            raise BadRequest(413, "too_large", f"the body is over {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def read_message(body: bytes) -> str:
    """Return the text of a POST body {"text": ...}, or raise BadRequest."""
    if len(body) > MAX_BODY:
        raise BadRequest(413, "too_large", f"the body is over {MAX_BODY} bytes")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: deeply nested arrays
        raise BadRequest(400, "bad_json", 'the body is not JSON; send {"text": "..."}') from None
    if not isinstance(doc, dict):
        raise BadRequest(400, "bad_json", 'the body must be a JSON object {"text": "..."}')
    if "text" not in doc:
        raise BadRequest(422, "missing_text", 'the body has no "text"')
    text = doc["text"]
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise BadRequest(422, "bad_text", f'"text" must be 1 to {MAX_TEXT} characters')
    if not storable(text):
        raise BadRequest(422, "bad_text", '"text" has a NUL or a lone surrogate')
    return text


def history_query(params: Mapping[str, str]) -> dict:
    """Return the log query of /history's parameters, or raise BadRequest."""
    if set(params) - {"contains", "since", "until", "limit"}:
        raise BadRequest(400, "bad_query", "the parameters are contains, since, until, limit")
    q: dict = {"limit": 100}
    if params.get("contains"):
        if not storable(params["contains"]):
            raise BadRequest(400, "bad_query", "contains has a NUL or a lone surrogate")
        q["contains"] = params["contains"]
    for name in ("since", "until"):
        if params.get(name):
            try:
                q[name] = parse_when(params[name], end=name == "until")
            except (ValueError, OverflowError):  # OverflowError: year 1 or 9999 off UTC
                raise BadRequest(400, "bad_date", f"{name}: not a date like 2026-05-08") from None
    if params.get("limit"):
        if not LIMIT.fullmatch(params["limit"]) or not 1 <= int(params["limit"]) <= 1000:
            raise BadRequest(400, "bad_limit", "limit must be an integer 1..1000")
        q["limit"] = int(params["limit"])
    return q


ERRORS = {  # exception -> (status, code, message)
    BadRequest: None,
    StoreUnavailableError: (503, "store_unavailable", "the store is unavailable; retry shortly"),
    LockTimeoutError: (503, "busy", "the conversation is busy; retry"),
    StoreCorruptError: (500, "store_corrupt", "the stored conversation is corrupt"),
    RunTimeoutError: (504, "timeout", "the model did not answer in time"),
    ProviderError: (502, "provider_error", "the model provider failed (see the server log)"),
}


def error_body(app: Starlette, e: BaseException) -> tuple[int, dict]:
    """Return (status, {"error": {code, message}}) of `e`, every secret scrubbed.

    An end user sees no internal URL or provider text: the details go to the log."""
    kind = next((k for k in ERRORS if isinstance(e, k)), None)
    status, code, message = e.args if kind is BadRequest else ERRORS.get(kind) or (
        500, "internal", "an internal error occurred (see the server log)")  # fmt: skip
    if kind is ProviderError:
        logger.warning("provider error: %s", app.state.scrub(str(e)[:2000]))
    return status, {"error": {"code": code, "message": app.state.scrub(message)}}


# ---- who may touch which conversation ----------------------------------------------


def demo_principal(request: Request) -> str | None:
    """The local demo's authentication: loopback clients only, all one principal."""
    host = request.client.host if request.client else ""
    return "demo" if host in ("127.0.0.1", "::1") else None


def load_auth(env: Mapping[str, str]) -> Callable:
    """Return the authentication TOOLNEXUS_AUTH names (module:function), the demo's with
    TOOLNEXUS_DEMO=1; without either, refuse to serve (RuntimeError saying how)."""
    spec = env.get("TOOLNEXUS_AUTH", "")
    if spec:
        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(module), name)
    if env.get("TOOLNEXUS_DEMO") == "1":
        return demo_principal
    raise RuntimeError(
        "the chat service will not serve without authentication: set TOOLNEXUS_AUTH="
        "module:function (a function(request) -> principal or None, e.g. "
        "examples.chat_service.auth:bearer_tokens), or TOOLNEXUS_DEMO=1 for a local demo "
        "(loopback clients only)"
    )


async def principal(request: Request) -> str:
    """Return the request's authenticated principal, or raise BadRequest (401)."""
    who = request.app.state.auth(request)
    who = await who if inspect.isawaitable(who) else who
    if who is None:
        raise BadRequest(401, "unauthenticated", "this request is not authenticated")
    if not isinstance(who, str) or not PRINCIPAL.fullmatch(who):  # the operator's mistake
        raise RuntimeError("the authentication returned a principal that is not 1-128 "
                           "letters, digits and . _ @ -")  # fmt: skip
    return who


async def tenant(request: Request):
    """Return the client of the request's principal: its store, log, lookup tool and
    forget see only that principal's conversations (`namespaced`)."""
    return request.app.state.tenants(await principal(request))


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


TOOLS = toolkit(add)


def answer(id: str, r: Mapping) -> dict:
    """Return the answer of a RunResult (to_json encodes its frozen parts as they are)."""
    calls = [{k: c[k] for k in ("name", "args", "output", "is_error")} for c in r["tool_calls"]]
    keys = ("text", "status", "turns", "usage", "model", "pending")
    return {"conversation_id": id, **{k: r[k] for k in keys}, "tool_calls": calls}


def sse(kind: str, data: object) -> bytes:
    """Return one server-sent event."""
    return b"event: " + kind.encode() + b"\ndata: " + to_json(data) + b"\n\n"


async def post_message(request: Request) -> Response:
    """One exchange, answered as JSON (or SSE with `Accept: text/event-stream`)."""
    client = await tenant(request)  # before reading anything of the body
    id, text = check_id(request.path_params["id"]), read_message(await read_body(request))
    if "text/event-stream" not in request.headers.get("accept", ""):
        # The sync driver in Starlette's thread pool (40 threads): 13% fewer instructions
        # per exchange than `aask` (benchmarks/service/README.md).
        done = await run_in_threadpool(ask, client, text, toolkit=TOOLS, id=id)
        return Response(to_json(answer(id, done)), media_type="application/json")
    events = astream(client, text, toolkit=TOOLS, id=id)
    first = await anext(events)  # an error before the first event still gets a status

    async def stream():
        event = first
        try:
            while True:
                fields = {k: v for k, v in event.items() if k != "type"}
                done = event["type"] == "done"
                yield sse(event["type"], answer(id, event["result"]) if done else fields)
                event = await anext(events)
        except StopAsyncIteration:
            pass
        except Exception as e:  # the status line is sent: the error goes as an event
            status, body = error_body(request.app, e)
            yield sse("error", {**body["error"], "status": status})
        finally:  # a client gone mid-stream: the exchange stops and saves nothing
            await events.aclose()

    return StreamingResponse(stream(), media_type="text/event-stream")


async def get_conversation(request: Request) -> Response:
    """The stored transcript (404 when there is none)."""
    client = await tenant(request)
    id = check_id(request.path_params["id"])
    found = await asyncio.to_thread(client.store["get"], id)
    if found is None:
        return JSONResponse({"error": {"code": "not_found", "message": "no such id"}}, 404)
    return Response(
        to_json({"conversation_id": id, "messages": found}), media_type="application/json"
    )


async def get_history(request: Request) -> Response:
    """The conversation's message-log entries, oldest first."""
    client = await tenant(request)
    id, q = check_id(request.path_params["id"]), history_query(request.query_params)
    log = client.message_log  # in the principal's scope
    if log is None:
        return JSONResponse({"error": {"code": "no_log", "message": "no message log"}}, 501)
    found = await asyncio.to_thread(log["query"], conversation_id=id, **q)
    keys = ("id", "direction", "text")
    entries = [{**{k: e[k] for k in keys}, "timestamp": e["timestamp"].isoformat()} for e in found]
    return JSONResponse({"conversation_id": id, "entries": entries})


async def delete_conversation(request: Request) -> Response:
    """Forget a conversation: its transcript and its message-log entries (under its lock)."""
    client = await tenant(request)
    id = check_id(request.path_params["id"])
    went = await asyncio.to_thread(forget, client, id)
    removed = went["log_entries"] if client.message_log is not None else None
    return JSONResponse({"conversation_id": id, "deleted": True, "log_entries_removed": removed})


async def health(request: Request) -> Response:
    """200 when the database answers, else 503."""
    await asyncio.to_thread(request.app.state.db["store"]["get"], "~health~")  # "~": no real id
    return JSONResponse({"status": "ok", "worker": os.getpid()})


async def on_error(request: Request, e: Exception) -> Response:
    """Every error as JSON {"error": {code, message}}: Starlette's (404, 405) and ours."""
    if isinstance(e, HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        body = {"error": {"code": code, "message": str(e.detail)}}
        return JSONResponse(body, e.status_code, headers=e.headers)
    status, body = error_body(request.app, e)
    headers = {503: {"retry-after": "1"}, 401: {"www-authenticate": "Bearer"}}.get(status)
    return JSONResponse(body, status, headers=headers)


@asynccontextmanager
async def lifespan(app: Starlette):
    """Open the database and the client for this worker; close them at exit."""
    env, url = os.environ, os.environ.get("TOOLNEXUS_DATABASE", "sqlite:chat_service.db")
    app.state.auth = load_auth(env)  # first: no authentication, no service
    app.state.db = db = open_backend(url)
    numbers = {k: int(env[f"TOOLNEXUS_{k.upper()}"]) for k in ("timeout_ms", "retries")
               if env.get(f"TOOLNEXUS_{k.upper()}")}  # fmt: skip
    app.state.client = client = create_client(
        base_url=env.get("TOOLNEXUS_BASE_URL", "https://api.openai.com/v1"),
        style=env.get("TOOLNEXUS_STYLE", "openai"),
        model=env.get("TOOLNEXUS_MODEL", "gpt-4.1-mini"),
        store=db["store"], message_log=db["log"], **numbers)  # fmt: skip
    app.state.scrub = scrubber((client.api_key.reveal(), *dsn_passwords(url)))
    # One client per principal (sharing the runtime: connections, threads), its store
    # and message log namespaced to it; the most recent 1024 are kept.
    app.state.tenants = lru_cache(1024)(lambda who: client.set(store=namespaced(who, db["store"])))
    with client:
        yield
    db["close"]()


# {id:path} also matches an empty id or one with "/": they get a clear 400.
ID_ROUTE = "/conversations/{id:path}"
app = Starlette(
    routes=[
        Route("/health", health, methods=["GET"]),
        Route(ID_ROUTE + "/messages", post_message, methods=["POST"]),
        Route(ID_ROUTE + "/history", get_history, methods=["GET"]),
        Route(ID_ROUTE, get_conversation, methods=["GET"]),
        Route(ID_ROUTE, delete_conversation, methods=["DELETE"]),
    ],
    # Ours and Starlette's (404, 405) are answered by the router's middleware; any other
    # exception (a 500) is answered too, then logged with its traceback by the server.
    exception_handlers={
        **dict.fromkeys(ERRORS, on_error),
        HTTPException: on_error,
        Exception: on_error,
    },  # fmt: skip
    lifespan=lifespan,
)
app.router.redirect_slashes = False  # "/conversations" (an id of ".") is a JSON 404, not a 307
