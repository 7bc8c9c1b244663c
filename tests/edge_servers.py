"""Loopback servers for the HTTP edge: an answering server (plain or TLS, any headers and
body), a forward proxy (absolute-form requests and CONNECT tunnels) and helpers that run
one prompt through all four verbs.

They speak real HTTP/1.1 over real sockets, so what they see is what a network would:
the proxy counts what went through it, the server records each request's line and
headers.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from toolnexus import arun, astream, run, stream
from toolnexus.core.wire import DIALECTS
from toolnexus.testing.fake_replies import RESPONSES, stream_events, text_reply

# handler(request) -> (status, headers, body bytes or an iterable of chunks)
Answer = tuple[int, dict, Any]


def _routes(base: str = "http://h/v1", model: str = "m") -> list[tuple[str, str, str, bool]]:
    """Return (path end, query, dialect, streamed by its URL) of every registry row's
    requests, for a client of `model` (read off the records; a base's own path and query
    come before and after them)."""
    out = []
    for name, d in DIALECTS.items():
        urls = [(d.url(base), False)] if d.model_url is None else [
            (d.model_url(base, model, s), s) for s in (False, True)]  # fmt: skip
        for url, streamed in urls:
            split = urlsplit(url)
            out.append((split.path.removeprefix("/v1"), split.query, name, streamed))
    return out


def _route(routes: list, target: str) -> tuple[str, bool]:
    path, _, query = target.partition("?")
    given = set(query.split("&"))
    found = [(n, s) for end, q, n, s in routes
             if path.endswith(end) and set(filter(None, q.split("&"))) <= given]  # fmt: skip
    assert len(found) == 1, f"no one dialect serves {target}: {found}"
    return found[0]


def model_answer(text: str, gzipped: bool = False) -> Callable[[dict], Answer]:
    """Return a handler that answers any dialect's request with `text` (whole or streamed,
    as the request asks), gzip-encoded when `gzipped`."""
    routes = _routes()

    def answer(req: dict) -> Answer:
        body, reply = req["json"], text_reply(text)
        dialect, by_url = _route(routes, req["path"])
        if body.get("stream") or by_url:
            events = stream_events(reply, body, dialect, "m", 0)
            content: Any = b"".join(events)
            headers = {"content-type": "text/event-stream"}
        else:
            made = RESPONSES[dialect](reply, "m", 0)
            content, headers = json.dumps(made).encode(), {"content-type": "application/json"}
        if gzipped:
            content, headers = gzip.compress(content), {**headers, "content-encoding": "gzip"}
        return 200, headers, content

    return answer


class EdgeServer:
    """Answer each POST with `handler(request)`; record every request (line, headers, body).

    `tls` is a server-side ssl.SSLContext (trustme), for HTTPS.
    """

    def __init__(self, handler: Callable[[dict], Answer], tls: ssl.SSLContext | None = None):
        self.handler, self.requests = handler, []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> EdgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(server: EdgeServer) -> type:
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
            req = {"path": self.path, "headers": list(self.headers.items()), "json": body,
                   "raw": raw, "line": self.requestline}  # fmt: skip
            server.requests.append(req)
            status, headers, content = server.handler(req)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if isinstance(content, bytes):
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
                return
            self.send_header("connection", "close")  # ended by closing
            self.close_connection = True
            self.end_headers()
            for piece in content:
                self.wfile.write(piece)
                self.wfile.flush()

        do_GET = do_POST

    return Handler


class ForwardProxy:
    """A forward proxy: absolute-form requests are relayed, CONNECT is tunnelled.

    `seen` lists the request lines it handled ("POST http://..." or "CONNECT host:port").
    """

    def __init__(self) -> None:
        self.seen: list[str] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, client: socket.socket) -> None:
        data = b""
        while True:
            head, data = _read_head(client, data)
            if not head:
                return
            line = head.split(b"\r\n", 1)[0].decode()
            self.seen.append(line)
            method, target, _ = line.split(" ", 2)
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                upstream = socket.create_connection((host, int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _pipe(client, upstream)
                return
            body, data = _read_body(client, head, data)
            client.sendall(_relay(head, target, body))


def _relay(head: bytes, target: str, body: bytes) -> bytes:
    # One absolute-form request, sent upstream in origin form on a connection of its own
    # ("Connection: close"), so the proxy sees every request; the answer read to its close.
    hostport, _, path = target.split("://", 1)[1].partition("/")
    host, _, port = hostport.partition(":")
    lines = [x for x in head.split(b"\r\n")[1:] if x and not x.lower().startswith(b"connection:")]
    first = head.split(b"\r\n", 1)[0].replace(target.encode(), b"/" + path.encode(), 1)
    upstream = socket.create_connection((host, int(port or 80)))
    with upstream:
        upstream.sendall(b"\r\n".join([first, *lines, b"Connection: close", b"", b""]) + body)
        out = b""
        while piece := upstream.recv(65536):
            out += piece
    return out


def _read_head(sock: socket.socket, data: bytes = b"") -> tuple[bytes, bytes]:
    # Return (the head up to its blank line, the bytes after it); (b"", b"") at close.
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            return b"", b""
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", rest


def _read_body(sock: socket.socket, head: bytes, data: bytes) -> tuple[bytes, bytes]:
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(data) < length:
        data += sock.recv(65536)
    return data[:length], data[length:]


def _pipe(a: socket.socket, b: socket.socket) -> None:
    # Relay both ways until either side closes.
    socks = [a, b]
    try:
        while True:
            ready, _, _ = select.select(socks, [], [], 10)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    finally:
        b.close()


def four_verbs(client: Any, prompt: str = "hi") -> list[str]:
    """Return the answer text of `prompt` through run, stream, arun and astream (the two
    async verbs on one event loop, as an app would: an AsyncClient belongs to its loop)."""
    out = [run(client, prompt)["text"]]
    out.append(next(e for e in stream(client, prompt) if e["type"] == "done")["result"]["text"])

    async def both() -> list[str]:
        texts = [(await arun(client, prompt))["text"]]
        async for e in astream(client, prompt):
            if e["type"] == "done":
                return [*texts, e["result"]["text"]]
        raise AssertionError("no done event")

    return out + asyncio.run(both())


def chunks(pieces: Iterable[bytes]) -> Iterable[bytes]:
    """Return the pieces as a close-delimited body (a generator the server writes)."""
    yield from pieces
