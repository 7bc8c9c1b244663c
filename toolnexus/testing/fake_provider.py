"""A loopback fake LLM provider: real sockets, real HTTP, both wire dialects, scripted per turn.

    with fake_provider([tool_calls_reply(...), text_reply("done")]) as fp:
        client = create_client(base_url=fp.url, model="m")
        ...
        fp.requests   # every request: {"path", "headers", "body", "raw": its bytes}

A script entry is a reply map, dialect-neutral:
  {"content": str}                                 a text answer
  {"tool_calls": [{"id"?, "name", "arguments"}]}   tool calls (arguments: dict or JSON text)
  optional "usage": {"prompt_tokens", "completion_tokens"}, "delay": seconds,
  "finish": a finish/stop reason to report instead of the natural one ("length", ...),
  {"status": 429, "body": "...", "headers": {...}} a failure on cue
  {"stall": seconds}     sleep, then answer (or nothing if the provider stops first)
  {"drop": True}         close the connection without any response (a network error)
  {"response": {...}}    answer 200 with this body verbatim (a provider's own shape:
                         citations, odd blocks, duplicate ids; whole answers only)
Provider shapes beyond the neutral reply (each as real providers send it, whole and
streamed):
  "reasoning_content": str   DeepSeek's reasoning on the openai message (streamed as
                             `delta.reasoning_content` fragments)
  "message_extra": {...}     more fields of the openai message, verbatim (OpenRouter's
                             `reasoning_details`, `annotations`; streamed in one delta)
  a call's "extra": {...}    fields of an openai tool call, verbatim (Gemini's
                             `extra_content`; streamed on the call's first fragment)
  "refusal": str             an openai refusal (`message.refusal`, content null)
  "thinking": [{"thinking", "signature"} | {"redacted": data}, ...]  anthropic thinking /
                             redacted_thinking blocks before the text (thinking_delta and
                             signature_delta when streamed)
  "raw_usage": {...}         the usage object in the dialect's own shape, verbatim
                             (prompt_tokens_details, cache_read_input_tokens, ...)
or a function(request_body, dialect) -> reply for dynamic scripts.
The dialect of a request is read from its path: /chat/completions, /messages,
/responses (the Responses dialect: see `toolnexus.testing.fake_responses`) or
/models/{model}:generateContent (Gemini, streamed at :streamGenerateContent: see
`toolnexus.testing.fake_gemini`).

A request whose body has `"stream": true` gets real SSE in its dialect: openai
chunks (text and tool-call arguments in fragments, a usage chunk when
`stream_options.include_usage`, then `data: [DONE]`), or anthropic's whole event
sequence (message_start, content blocks with text_delta / input_json_delta
fragments, pings, message_delta, message_stop). Stream-only reply keys:
  "chunk": n bytes per network write (default: the provider's `chunk`, else one
  write per event), "chunk_delay": seconds between writes,
  "stream_error": {"type", "message"}   an SSE error event halfway through,
  "stream_stall": seconds               send the first event, then stall,
  "stream_drop": True                   cut the connection halfway through,
  "sse": bytes | str                    a recorded stream, sent as it is.
`fake_provider(script, profile="ollama")` answers as a named server does (its errors,
headers and stream quirks) and reads the keys `fail`, `fail_inband`, `stream_fail`
(see `toolnexus.testing.profiles`; a plain provider reads them too, as the official API).
`openai_stream` and `anthropic_stream` return the SSE bytes of a reply (pure).

Every request is checked first against its provider's published request schema and
its documented rules (`toolnexus.testing.validators`); one that breaks them gets a 400
in the provider's own error shape (`invalid_request_error`, naming the failing field's
path) and consumes no script entry, as the real API would refuse it.
`fake_provider(script, schema=False)` keeps only our rules (for a test that sends a
compatible provider's extra fields on purpose); `validate=False` turns all checks off.
The schema check needs jsonschema (the `testing` extra): without it, the default
(`schema=None`) keeps only our rules and says so once, in a `SchemaChecksSkipped`
warning; `schema=True` insists (an ImportError naming the extra).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any

from . import profiles
from .fake_replies import (
    RESPONSES,
    anthropic_response,
    anthropic_stream,
    openai_response,
    openai_stream,
    stream_events,
    text_reply,
    tool_calls_reply,
)
from .fakes import Fake
from .registry import FAKES
from .validators import schema_checks_on, schema_problems, validate_request

__all__ = [
    "fake_provider",
    "FakeProvider",
    "text_reply",
    "tool_calls_reply",
    "openai_response",
    "anthropic_response",
    "openai_stream",
    "anthropic_stream",
]


class FakeProvider:
    """A running fake provider; use as a context manager (it stops on exit)."""

    def __init__(
        self,
        script: Sequence | Callable,
        *,
        delay: float = 0.0,
        model: str = "fake-model",
        chunk: int | None = None,
        chunk_delay: float = 0.0,
        validate: bool = True,
        schema: bool | None = None,
        profile: str | None = None,
    ):
        if profile is not None and profile not in profiles.PROFILES:
            raise ValueError(f"unknown profile {profile!r}: one of {list(profiles.PROFILES)}")
        self.profile = profile  # the server it plays (testing.profiles), None: the plain one
        self.script = script
        self.validate = validate  # answer 400 to a request the real API would refuse
        self.schema = schema_checks_on(validate, schema)  # ... by the published schema too
        self.delay = delay
        self.model = model
        self.chunk = chunk  # bytes per write of a streamed answer (None: one per event)
        self.chunk_delay = chunk_delay
        self._stopping = threading.Event()  # wakes stalled handlers when the provider stops
        self.requests: list[dict] = []
        # Responses the server keeps (store not false): id -> the conversation's items.
        # Clear it to play a server that forgot them (previous_response_not_found).
        self.kept: dict[str, list] = {}
        self._lock = threading.Lock()
        self._next = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._server.socket.listen(128)  # a backlog fit for concurrency tests (default: 5)
        # A short poll interval: stop() returns at once instead of after up to 0.5 s.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL to give a client (ends in /v1, right for both dialects)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeProvider:
        """Start serving in a background thread; return self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def reply_for(self, body: Mapping, dialect: str) -> Mapping:
        """Return the scripted reply for a request."""
        if callable(self.script):
            return self.script(body, dialect)
        with self._lock:
            if self._next >= len(self.script):
                return {"status": 500, "body": "fake provider: script exhausted"}
            reply = self.script[self._next]
            self._next += 1
            return reply


def invalid_request(dialect: str, problems: Sequence[str]) -> bytes:
    """Return the 400 body a provider sends for an invalid request, in its own shape.

    Problems are "path: why" strings (OpenAI's `param` is the first one's path).
    """
    return FAKES[dialect].refusal(problems)


def _problems(body: Mapping, seen: Mapping, dialect: str, schema: bool) -> list[str]:
    """Return a request's problems: the published schema judges the body as sent, our
    rules the conversation the server reads (a Responses request naming a kept
    `previous_response_id` continues the items kept under it)."""
    if seen is body or not schema:
        return validate_request(seen, dialect, schema=schema)
    return [*schema_problems(body, dialect), *validate_request(seen, dialect, schema=False)]


# The path each dialect posts to (the last segment of its URL) -> the dialect.
PATHS = MappingProxyType({f.path: name for name, f in FAKES.items()})


def _serves(fake: Fake, path: str) -> bool:
    return fake.serves(path) if fake.serves is not None else path.endswith(fake.path)


def _dialect_of_path(path: str) -> str | None:
    return next((name for name, f in FAKES.items() if _serves(f, path)), None)


def _streamed(fake: Fake, path: str, body: Mapping) -> bool:
    """Return whether a request asks for a stream: by its body, or by its URL (Gemini's)."""
    by_url = fake.stream_path is not None and fake.stream_path(path)
    return body.get("stream") is True or by_url


# ---- the request handler: one small function per step of serving a request -----------


def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, headers: Mapping = ()) -> None:
    """Send a whole JSON answer."""
    h.send_response(status)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", str(len(payload)))
    for k, v in dict(headers).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(payload)


def _wait(fp: FakeProvider, seconds: float) -> bool:
    """Sleep `seconds`; return True if the provider stopped meanwhile."""
    # Interruptible: a stopping provider must not leave threads asleep.
    return bool(seconds) and fp._stopping.wait(seconds)


def _write_chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def _stream_head(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("content-type", "text/event-stream")
    h.send_header("cache-control", "no-cache")
    h.send_header("transfer-encoding", "chunked")
    h.end_headers()


def _write_event(h: BaseHTTPRequestHandler, fp: FakeProvider, event: bytes, reply: Mapping) -> bool:
    """Write one SSE event in the reply's chunk size; return True if the provider stopped."""
    size = reply.get("chunk", fp.chunk) or len(event)
    pause = reply.get("chunk_delay", fp.chunk_delay)
    for i in range(0, len(event), size):
        _write_chunk(h, event[i : i + size])
        if pause and _wait(fp, pause):
            return True
    return False


def _stream(h: BaseHTTPRequestHandler, fp: FakeProvider, reply: Mapping, events: list) -> None:
    """Send `events` as a chunked SSE answer (cut, stalled or paced as the reply says)."""
    _stream_head(h)
    half = max(1, len(events) // 2)
    for n, event in enumerate(events):
        if n == half and reply.get("stream_drop"):
            h.close_connection = True  # no final chunk: the body is cut short
            return
        if n == 1 and _wait(fp, reply.get("stream_stall", 0)):
            return
        if _write_event(h, fp, event, reply):
            return
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


def _read_request(h: BaseHTTPRequestHandler) -> tuple[str, Any, bytes] | None:
    """Return the request's (dialect, JSON body, its bytes), or answer 404/400 and return
    None."""
    raw = h.rfile.read(int(h.headers.get("content-length") or 0))
    dialect = _dialect_of_path(h.path)
    if dialect is None:
        _send(h, 404, b'{"error": "unknown path"}')
        return None
    try:
        return dialect, json.loads(raw), raw
    except ValueError:
        _send(h, 400, b'{"error": "body is not JSON"}')
        return None


def _record(h: BaseHTTPRequestHandler, fp: FakeProvider, body: Any, raw: bytes) -> int:
    """Keep the request in `fp.requests`; return its sequence number (from 1)."""
    with fp._lock:
        fp.requests.append({"path": h.path, "headers": dict(h.headers), "body": body,
                            "raw": raw})  # fmt: skip
        return len(fp.requests)


def _refusal(fp: FakeProvider, body: Any, dialect: str) -> tuple[Any, bytes | None]:
    """Return the conversation the server reads and the 400 body refusing it (None: valid)."""
    fake = FAKES[dialect]
    seen, forgot = fake.expand(body, fp.kept) if fake.expand is not None else (body, None)
    if forgot is not None:
        return seen, forgot
    problems = _problems(body, seen, dialect, fp.schema) if fp.validate else []
    return seen, invalid_request(dialect, problems) if problems else None


def _answer(h: BaseHTTPRequestHandler, fp: FakeProvider, reply: Mapping, request: tuple) -> None:
    """Answer with the scripted reply: delayed, dropped, a failure, verbatim or made."""
    body, seen, dialect, seq = request
    if _wait(fp, reply.get("delay", fp.delay)) or _wait(fp, reply.get("stall", 0)):
        h.close_connection = True
        return
    if reply.get("drop"):
        h.close_connection = True  # the client sees the connection end, no reply
        return
    if "status" in reply:
        payload = reply.get("body", "")
        payload = payload if isinstance(payload, str) else json.dumps(payload)
        return _send(h, reply["status"], payload.encode(), reply.get("headers", {}))
    fake = FAKES[dialect]
    if fake.keep is not None:  # the server keeps what it answered (Responses' store)
        fake.keep(fp.kept, seen, reply, fp.model, seq)
    if "response" in reply:  # the provider's own shape, verbatim
        return _send(h, 200, json.dumps(reply["response"]).encode())
    if _streamed(fake, h.path, body):
        return _stream(h, fp, reply, stream_events(reply, body, dialect, fp.model, seq))
    answer = json.dumps(RESPONSES[dialect](reply, fp.model, seq)).encode()
    _send(h, 200, reply.get("prefix", b"") + answer)  # a profile's bytes before the JSON


def _serve(h: BaseHTTPRequestHandler, fp: FakeProvider) -> None:
    """Serve one POST: read, record, check, then answer from the script."""
    request = _read_request(h)
    if request is None:
        return
    dialect, body, raw = request
    seq = _record(h, fp, body, raw)
    seen, refused = _refusal(fp, body, dialect)
    if refused is not None:
        return _send(h, 400, refused)
    streamed = _streamed(FAKES[dialect], h.path, body)
    reply = _as_profile(fp, fp.reply_for(body, dialect), body, dialect, seq, streamed)
    _answer(h, fp, reply, (body, seen, dialect, seq))


class _Handler(BaseHTTPRequestHandler):
    """The fake provider's HTTP handler; `fp` is set per provider by `_handler`."""

    fp: FakeProvider
    protocol_version = "HTTP/1.1"  # keep-alive, so clients reuse connections
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
    # algorithm and delayed ACKs stall each response by ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet: tests read fp.requests instead
        pass

    def do_POST(self) -> None:
        _serve(self, self.fp)


def _handler(fp: FakeProvider) -> type:
    """Return the handler class serving `fp`."""
    return type("Handler", (_Handler,), {"fp": fp})


def _as_profile(fp: FakeProvider, reply: Mapping, body: Mapping, dialect: str, seq: int,
                streamed: bool) -> Mapping:  # fmt: skip
    """Return a reply as the provider's profile sends it (testing.profiles); a plain
    provider uses its dialect's official profile for the profile-only keys."""
    if fp.profile is None and not profiles.KEYS.intersection(reply):
        return reply
    name = fp.profile or profiles.default_profile(dialect)

    def events(r: Mapping) -> list | None:
        return stream_events(r, body, dialect, fp.model, seq) if streamed else None

    return profiles.expand(reply, name, dialect, events)


def fake_provider(script: Sequence | Callable, **options: Any) -> FakeProvider:
    """Return a fake provider (not yet started; use it in a `with` block)."""
    return FakeProvider(script, **options)
