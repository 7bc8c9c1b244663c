"""A tiny loopback HTTP server that answers with exactly the bytes a test gives it.

Unlike the fake provider it never builds a valid answer: it is for the bytes a broken or
hostile provider (or proxy) may send. Each answer is (status, headers, body); a body
sent without Content-Length is ended by closing the connection (how a stream ends).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict, bytes]


class RawServer:
    """Serve scripted answers in order (the last one repeats); record request bodies."""

    def __init__(self) -> None:
        self.answers: list[Answer] | Callable[[dict], Answer] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        handler = _handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL (both dialects' paths answer the same)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, answers: Sequence[Answer] | Callable[[dict], Answer]) -> None:
        """Replace the answers and forget the recorded requests."""
        with self._lock:
            self.answers = answers if callable(answers) else list(answers)
            self.requests = []

    def next_answer(self, body: dict) -> Answer:
        with self._lock:
            self.requests.append(body)
            if callable(self.answers):
                return self.answers(body)
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(server: RawServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = {}
            status, headers, content = server.next_answer(body)
            self.send_response(status)
            streamed = "text/event-stream" in headers.get("content-type", "")
            for k, v in headers.items():
                self.send_header(k, v)
            if streamed:
                self.send_header("connection", "close")
                self.close_connection = True
            else:
                self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)
            self.wfile.flush()

    return Handler


def json_answer(obj: Any, status: int = 200, **headers: str) -> Answer:
    """Return an answer with a JSON body."""
    return status, {"content-type": "application/json", **headers}, json.dumps(obj).encode()


def sse_answer(data: bytes, status: int = 200) -> Answer:
    """Return an answer streaming `data` as text/event-stream (ended by closing)."""
    return status, {"content-type": "text/event-stream"}, data
