"""A loopback fake LLM provider: real sockets, real HTTP, both wire dialects, scripted per turn.

    with fake_provider([tool_calls_reply(...), text_reply("done")]) as fp:
        client = create_client(base_url=fp.url, model="m")
        ...
        fp.requests   # every request: {"path", "headers", "body"}

A script entry is a reply map, dialect-neutral:
  {"content": str}                                 a text answer
  {"tool_calls": [{"id"?, "name", "arguments"}]}   tool calls (arguments: dict or JSON text)
  optional "usage": {"prompt_tokens", "completion_tokens"}, "delay": seconds,
  {"status": 429, "body": "...", "headers": {...}} a failure on cue
or a function(request_body, dialect) -> reply for dynamic scripts.
The dialect of a request is read from its path: /chat/completions or /messages.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "fake_provider",
    "FakeProvider",
    "text_reply",
    "tool_calls_reply",
    "openai_response",
    "anthropic_response",
]

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


def text_reply(content: str, **extra: Any) -> dict:
    """Return a script entry that answers with text."""
    return {"content": content, **extra}


def tool_calls_reply(*calls: tuple[str, Mapping] | Mapping, **extra: Any) -> dict:
    """Return a script entry calling tools: (name, args) pairs or {"id"?, "name", "arguments"}."""
    norm = [c if isinstance(c, Mapping) else {"name": c[0], "arguments": c[1]} for c in calls]
    return {"tool_calls": norm, **extra}


def _calls(reply: Mapping, seq: int) -> list[dict]:
    # Ids unique across a conversation: request number and position in the turn.
    return [
        {**c, "id": c.get("id") or f"call_{seq}_{i}"}
        for i, c in enumerate(reply.get("tool_calls") or [])
    ]


def openai_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the chat completions response body of a reply."""
    calls = _calls(reply, seq)
    u = reply.get("usage") or DEFAULT_USAGE
    message: dict = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"]
                    if isinstance(c["arguments"], str)
                    else json.dumps(c["arguments"]),
                },
            }
            for c in calls
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": u["prompt_tokens"],
            "completion_tokens": u["completion_tokens"],
            "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
        },
    }


def anthropic_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the messages response body of a reply."""
    calls = _calls(reply, seq)
    u = reply.get("usage") or DEFAULT_USAGE
    content: list[dict] = (
        [{"type": "text", "text": reply["content"]}] if reply.get("content") else []
    )
    content += [
        {
            "type": "tool_use",
            "id": c["id"],
            "name": c["name"],
            "input": json.loads(c["arguments"])
            if isinstance(c["arguments"], str)
            else c["arguments"],
        }
        for c in calls
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"]},
    }


RESPONSES = {"openai": openai_response, "anthropic": anthropic_response}


class FakeProvider:
    """A running fake provider; use as a context manager (it stops on exit)."""

    def __init__(
        self, script: Sequence | Callable, *, delay: float = 0.0, model: str = "fake-model"
    ):
        self.script = script
        self.delay = delay
        self.model = model
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._next = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

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


def _handler(fp: FakeProvider) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, so clients reuse connections

        def log_message(self, *args: Any) -> None:  # quiet: tests read fp.requests instead
            pass

        def _send(self, status: int, payload: bytes, headers: Mapping = ()) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for k, v in dict(headers).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            dialect = "openai" if self.path.endswith("/chat/completions") else "anthropic"
            if not self.path.endswith(("/chat/completions", "/messages")):
                return self._send(404, b'{"error": "unknown path"}')
            try:
                body = json.loads(raw)
            except ValueError:
                return self._send(400, b'{"error": "body is not JSON"}')
            with fp._lock:
                fp.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                seq = len(fp.requests)
            reply = fp.reply_for(body, dialect)
            delay = reply.get("delay", fp.delay)
            if delay:
                time.sleep(delay)
            if "status" in reply:
                payload = reply.get("body", "")
                payload = payload if isinstance(payload, str) else json.dumps(payload)
                return self._send(reply["status"], payload.encode(), reply.get("headers", {}))
            self._send(200, json.dumps(RESPONSES[dialect](reply, fp.model, seq)).encode())

    return Handler


def fake_provider(script: Sequence | Callable, **options: Any) -> FakeProvider:
    """Return a fake provider (not yet started; use it in a `with` block)."""
    return FakeProvider(script, **options)
