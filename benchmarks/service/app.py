"""A chat service over toolnexus: many workers share conversations through PostgreSQL or Redis.

    TOOLNEXUS_STORE=postgresql://app@db/chat TOOLNEXUS_BASE_URL=https://api.openai.com/v1 \\
        uvicorn benchmarks.service.app:app --workers 4

Routes (JSON in and out; errors are {"error": {"code", "message"}}):
  POST   /conversations/{id}/messages   {"text": ...} -> the answer (SSE with
                                        `Accept: text/event-stream`)
  GET    /conversations/{id}            the transcript
  GET    /conversations/{id}/history    ?contains=&since=&until=&limit= (the message log)
  DELETE /conversations/{id}            forget it (store and log)
  GET    /health                        200 when the store answers, else 503

Every exchange runs under the conversation's lock (PostgreSQL advisory lock, Redis
lock or file lock), so two requests for one conversation on two workers queue up
instead of losing a turn. Configuration: see backends.read_config and the README.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolnexus import aask, ask, astream, create_client, define_tool, metrics, toolkit
from toolnexus.core.errors import ProviderError, RunTimeoutError
from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.history.entry import parse_when
from toolnexus.store import LockTimeoutError, StoreCorruptError, StoreUnavailableError

from .backends import open_backends, read_config

__all__ = ["create_app", "app", "check_id", "read_message", "error_body"]

logger = logging.getLogger("toolnexus.chat_service")

ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
MAX_BODY = 64 * 1024  # bytes of a POST body
MAX_TEXT = 32_000  # characters of one message
HISTORY_PARAMS = {"contains", "since", "until", "limit"}
HEALTH_PROBE = "~health~"  # an id no request can use ("~" is not allowed); only ever read


class BadRequest(Exception):
    """A client mistake: answered with `status` and a JSON error, never a traceback."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code


# ---- pure checks of the input -----------------------------------------------------


def check_id(raw: str) -> str:
    """Return a valid conversation id, or raise BadRequest (400) saying what is wrong.

    >>> check_id("user-42")
    'user-42'
    """
    if not raw:
        raise BadRequest(400, "bad_id", "the conversation id is empty")
    if len(raw) > 128:
        raise BadRequest(400, "bad_id", f"the conversation id is {len(raw)} characters; max 128")
    if not ID.fullmatch(raw):
        raise BadRequest(
            400, "bad_id", "a conversation id may use only letters, digits and . _ : @ -"
        )
    return raw


def read_message(body: bytes) -> str:
    """Return the message text of a POST body, or raise BadRequest.

    >>> read_message(b'{"text": "hi"}')
    'hi'
    """
    if len(body) > MAX_BODY:
        raise BadRequest(413, "too_large", f"the body is over {MAX_BODY} bytes")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(400, "bad_json", 'the body is not JSON; send {"text": "..."}') from None
    if not isinstance(doc, dict):
        raise BadRequest(400, "bad_json", 'the body must be a JSON object {"text": "..."}')
    text = doc.get("text")
    if text is None:
        raise BadRequest(422, "missing_text", 'the body has no "text"')
    if not isinstance(text, str) or not text.strip():
        raise BadRequest(422, "bad_text", '"text" must be a non-empty string')
    if len(text) > MAX_TEXT or "\x00" in text:
        raise BadRequest(422, "bad_text", f'"text" must be at most {MAX_TEXT} characters, no NUL')
    return text


def history_query(params: Mapping[str, str]) -> dict:
    """Return the message-log query of history URL parameters, or raise BadRequest."""
    unknown = sorted(set(params) - HISTORY_PARAMS)
    if unknown:
        raise BadRequest(
            400, "bad_query", f"unknown parameter(s) {unknown}; use {sorted(HISTORY_PARAMS)}"
        )
    q: dict[str, Any] = {"limit": 100}
    if params.get("contains"):
        q["contains"] = params["contains"]
    for name in ("since", "until"):
        if params.get(name):
            try:
                q[name] = parse_when(params[name], end=name == "until")
            except ValueError as e:
                raise BadRequest(400, "bad_date", f"{name}: {e}") from None
    if params.get("limit"):
        raw = params["limit"]
        if not raw.isdigit() or not 1 <= int(raw) <= 1000:
            raise BadRequest(400, "bad_limit", f"limit must be an integer 1..1000, got {raw!r}")
        q["limit"] = int(raw)
    return q


def error_body(code: str, message: str) -> dict:
    """Return the JSON body of an error."""
    return {"error": {"code": code, "message": message}}


def _backend_down(e: BaseException) -> bool:
    # Driver errors that escaped a store or log unwrapped still mean "the backend is down".
    psycopg, redis = sys.modules.get("psycopg"), sys.modules.get("redis")
    pool = sys.modules.get("psycopg_pool")
    kinds: tuple = ()
    if psycopg is not None:
        kinds += (psycopg.OperationalError,)
    if pool is not None:
        kinds += (pool.PoolTimeout,)
    if redis is not None:
        kinds += (redis.ConnectionError, redis.TimeoutError)
    return bool(kinds) and isinstance(e, kinds)


def classify(e: BaseException) -> tuple[int, str, str]:
    """Return (HTTP status, code, message) for an exception raised while serving."""
    if isinstance(e, BadRequest):
        return e.status, e.code, str(e)
    if isinstance(e, StoreUnavailableError) or _backend_down(e):
        return 503, "store_unavailable", "the conversation store is unavailable; retry shortly"
    if isinstance(e, LockTimeoutError):
        return 503, "busy", "the conversation is busy (its lock was not free in time); retry"
    if isinstance(e, StoreCorruptError):
        return 500, "store_corrupt", "the stored conversation is corrupt: " + str(e)[:300]
    if isinstance(e, RunTimeoutError):
        return 504, "timeout", "the model did not answer in time"
    if isinstance(e, ProviderError):
        return 502, "provider_error", "the model provider failed: " + str(e)[:300]
    return 500, "internal", "an internal error occurred (see the server log)"


def error_response(e: BaseException) -> JSONResponse:
    """Return the JSON error response of an exception (logged when it is not the client's)."""
    status, code, message = classify(e)
    if status >= 500:
        logger.warning("%s %s: %s: %s", status, code, type(e).__name__, str(e)[:500])
    if code == "internal":
        logger.error("unexpected error", exc_info=e)
    headers = {"retry-after": "1"} if status == 503 else None
    return JSONResponse(error_body(code, message), status, headers=headers)


# ---- the tools the model may call --------------------------------------------------


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@define_tool
def utc_now() -> str:
    """Return the current date and time in UTC (ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


TOOLS = toolkit(add, utc_now)


# ---- the service value and the handlers -----------------------------------------------


def build_service(config: Mapping) -> dict:
    """Return {client, store, lock, log, forget_log, close, semaphore, threads} for a config."""
    b = open_backends(config)
    threads = config["driver"] == "threads"
    client = create_client(
        base_url=config["base_url"],
        style=config["style"],
        model=config["model"],
        api_key=config["api_key"],
        system_prompt=config["system_prompt"],
        timeout_ms=config["timeout_ms"],
        retries=config["retries"],
        store=b["store"],
        lock=b["lock"],
        message_log=b["log"],
    )
    semaphore = asyncio.Semaphore(config["max_inflight"])
    return {**b, "client": client, "semaphore": semaphore, "threads": threads}


def answer_json(id: str, result: FrozenMap) -> dict:
    """Return the JSON answer of a RunResult."""
    calls = [
        {k: c.get(k) for k in ("name", "args", "output", "is_error")} for c in result["tool_calls"]
    ]
    return {
        "conversation_id": id,
        "text": result["text"],
        "status": result["status"],
        "usage": thaw(result["usage"]),
        "turns": result["turns"],
        "model": result["model"],
        "tool_calls": thaw(calls),
        "pending": thaw(result["pending"]),
    }


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


def _event_data(id: str, event: FrozenMap) -> dict:
    if event["type"] == "done":
        return answer_json(id, event["result"])
    return thaw({k: v for k, v in event.items() if k != "type"})


async def _produce(svc: Mapping, id: str, text: str, queue: asyncio.Queue) -> None:
    # Runs as its own task: a client that disconnects mid-stream does not cancel the
    # exchange, which is finished and saved (so the lock is always released cleanly).
    try:
        async with svc["semaphore"]:
            async for event in astream(svc["client"], text, toolkit=TOOLS, conversation_id=id):
                await queue.put(event)
    except BaseException as e:  # handed to the response, which maps it to a status
        await queue.put(e)
    await queue.put(None)


async def _stream(request: Request, svc: Mapping, id: str, text: str) -> Response:
    queue: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(_produce(svc, id, text, queue))
    request.app.state.tasks.add(task)
    task.add_done_callback(request.app.state.tasks.discard)
    first = await queue.get()  # lock taken and transcript loaded: errors so far get a status
    if isinstance(first, BaseException):
        return error_response(first)

    async def body() -> AsyncIterator[bytes]:
        item = first
        while item is not None:
            if isinstance(item, BaseException):
                status, code, message = classify(item)
                yield _sse("error", {**error_body(code, message)["error"], "status": status})
            else:
                yield _sse(item["type"], _event_data(id, item))
            item = await queue.get()

    return StreamingResponse(body(), media_type="text/event-stream")


async def post_message(request: Request) -> Response:
    """POST /conversations/{id}/messages: one exchange, answered as JSON or SSE."""
    id = check_id(request.path_params["id"])
    text = read_message(await request.body())
    svc = request.app.state.svc
    if "text/event-stream" in request.headers.get("accept", ""):
        return await _stream(request, svc, id, text)
    async with svc["semaphore"]:
        if svc["threads"]:  # the whole exchange in one worker thread: the sync driver
            result = await asyncio.to_thread(ask, svc["client"], text, toolkit=TOOLS, id=id)
        else:
            result = await aask(svc["client"], text, toolkit=TOOLS, id=id)
    return JSONResponse(answer_json(id, result))


async def get_conversation(request: Request) -> Response:
    """GET /conversations/{id}: the stored transcript (404 when there is none)."""
    id = check_id(request.path_params["id"])
    transcript = await asyncio.to_thread(request.app.state.svc["store"]["get"], id)
    if transcript is None:
        return JSONResponse(error_body("not_found", f"no conversation {id!r}"), 404)
    return JSONResponse({"conversation_id": id, "messages": thaw(transcript)})


async def get_history(request: Request) -> Response:
    """GET /conversations/{id}/history: the conversation's message-log entries, oldest first."""
    id = check_id(request.path_params["id"])
    q = history_query(request.query_params)
    log = request.app.state.svc["log"]
    if log is None:
        return JSONResponse(error_body("no_log", "this service has no message log"), 501)
    entries = await asyncio.to_thread(log["query"], conversation_id=id, **q)
    return JSONResponse(
        {
            "conversation_id": id,
            "entries": [
                {
                    "id": e["id"],
                    "direction": e["direction"],
                    "text": e["text"],
                    "timestamp": e["timestamp"].isoformat(),
                }
                for e in entries
            ],
        }
    )


def _forget(svc: Mapping, id: str) -> int | None:
    # Under the conversation's lock: an exchange in flight finishes first, and cannot
    # save the conversation back after it was deleted.
    with svc["lock"](id):
        svc["store"]["delete"](id)
        forget = svc["forget_log"]
        return forget(id) if forget is not None else None


async def delete_conversation(request: Request) -> Response:
    """DELETE /conversations/{id}: remove the transcript and its message-log entries."""
    id = check_id(request.path_params["id"])
    removed = await asyncio.to_thread(_forget, request.app.state.svc, id)
    return JSONResponse({"conversation_id": id, "deleted": True, "log_entries_removed": removed})


def _probe(svc: Mapping) -> None:
    svc["store"]["get"](HEALTH_PROBE)
    if svc["log"] is not None:
        svc["log"]["query"](conversation_id=HEALTH_PROBE, limit=1)


def _warm(svc: Mapping) -> None:
    # Fill the pools and create the tables before the first request, so a fresh worker
    # is as fast as a warm one; a backend that is down only means 503s until it is back.
    svc["warm"]()
    try:
        _probe(svc)
    except Exception as e:
        logger.warning("starting without the store: %s", classify(e)[2])


async def health(request: Request) -> Response:
    """GET /health: 200 when the store (and log) answer, 503 otherwise."""
    svc = request.app.state.svc
    body = {"worker": os.getpid(), "store": svc["store"].get("desc", "store")}
    try:
        await asyncio.to_thread(_probe, svc)
    except Exception as e:
        status, code, message = classify(e)
        return JSONResponse({**body, "status": "unavailable", **error_body(code, message)}, 503)
    return JSONResponse({**body, "status": "ok"})


def endpoint(handler: Callable) -> Callable:
    """Return `handler` answering every exception with its JSON error (no traceback)."""

    @functools.wraps(handler)
    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as e:
            # Here rather than in a Starlette exception handler for Exception: that one
            # runs in ServerErrorMiddleware, which re-raises, and uvicorn then drops the
            # keep-alive connection after every 503.
            return error_response(e)

    return guarded


async def _handle(request: Request, e: Exception) -> Response:
    return error_response(e)


async def prometheus(request: Request) -> Response:
    """GET /metrics: this worker's run, model-call and tool metrics (Prometheus text)."""
    text = metrics(request.app.state.svc["client"])
    return Response(text, media_type="text/plain; version=0.0.4")


async def _http_error(request: Request, e: HTTPException) -> Response:
    # Starlette's own errors (no route, wrong method) as JSON like ours.
    code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
    return JSONResponse(
        error_body(code, f"{e.detail}: {request.method} {request.url.path}"),
        e.status_code,
        headers=e.headers,
    )


def create_app(env: Mapping[str, str] | None = None) -> Starlette:
    """Return the ASGI app configured from `env` (default: os.environ at startup)."""

    @asynccontextmanager
    async def lifespan(app: Starlette):
        config = read_config(os.environ if env is None else env)
        # The async driver takes locks and calls stores in worker threads; the default
        # pool (min(32, cpus + 4) threads) would make requests wait for threads, and a
        # request waiting on a held conversation lock would keep one busy. One thread
        # per request in flight, plus a few for health checks and the message log.
        threads = config["max_inflight"] + 8
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(threads))
        app.state.svc = await asyncio.to_thread(build_service, config)
        await asyncio.to_thread(_warm, app.state.svc)
        # What startup made (modules, pools, the app) lives as long as the worker: out of
        # the collector's generations, a full collection no longer walks all of it.
        gc.freeze()
        app.state.tasks = set()
        try:
            yield
        finally:
            if app.state.tasks:
                await asyncio.wait(app.state.tasks, timeout=10)
            await asyncio.to_thread(app.state.svc["close"])

    # {id:path} also matches an empty id or one with "/", so those get a clear 400.
    routes = [
        Route("/health", endpoint(health), methods=["GET"]),
        Route("/metrics", endpoint(prometheus), methods=["GET"]),
        Route("/conversations/{id:path}/messages", endpoint(post_message), methods=["POST"]),
        Route("/conversations/{id:path}/history", endpoint(get_history), methods=["GET"]),
        Route("/conversations/{id:path}", endpoint(get_conversation), methods=["GET"]),
        Route("/conversations/{id:path}", endpoint(delete_conversation), methods=["DELETE"]),
    ]
    handlers = {Exception: _handle, HTTPException: _http_error}
    return Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)


app = create_app()
