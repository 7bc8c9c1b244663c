"""The default sync pool: answers on keep-alive sockets, read by httptools or http.client.

A whole (JSON) answer is one POST read to its end: the request goes out as bytes on a
kept socket and the answer is read by httptools' C parser when it is installed (the
`service` extra installs it; uvicorn uses it too), else by the standard library's
http.client. Per POST, by callgrind (benchmarks/service/README.md): httptools about
13,000 instructions, http.client about 310,000 (its headers go through the email
package), httpcore's own pool (h11) about 440,000. Both readers give the same answer:
tests run each. A streamed answer (SSE) must arrive as it is produced: with httptools it
is read from the kept socket as the caller iterates, else it goes to an httpcore pool.
Both speak httpcore's interface (`handle_request(httpcore.Request) ->
httpcore.Response`) and fail with httpcore's exceptions, so `transport.py` treats this
pool like any other: its errors are classified (network or not) and scrubbed there.

The state it owns (idle connections per origin, at most `idle` each) lives in the
client's runtime with the rest of its pools, and is closed with it.
"""

from __future__ import annotations

import http.client
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpcore

try:  # the C parser, when installed (the service extra)
    import httptools

    _PARSE_ERRORS: tuple[type[Exception], ...] = (httptools.HttpParserError,
                                                  httptools.HttpParserUpgrade)  # fmt: skip
except ImportError:  # pragma: no cover - the test extra installs it; tests run both readers
    httptools, _PARSE_ERRORS = None, ()

__all__ = ["KeepAlivePool", "read_httptools", "read_stdlib", "request_head"]

_SSE = b"text/event-stream"
Answer = tuple[int, list[tuple[bytes, bytes]], bytes, bool]  # status, headers, body, keep


def _streamed(request: httpcore.Request) -> bool:
    return any(k.lower() == b"accept" and _SSE in v for k, v in request.headers)


class _Closed(Exception):
    """The server closed the connection before the answer ended, or answered in a way
    this pool does not follow (the connection is dropped, never read out of step)."""


# A 1xx answer comes before the real one (none is asked for: no Expect header). Taking
# it for the answer would leave the real one to be read as the next request's answer:
# httptools' reader skips it, http.client's (which skips only 100) drops the connection.
_INFORMATIONAL = "an informational answer (%d) before the answer: not followed"


def _as_httpcore(e: Exception, connecting: bool) -> Exception:
    """Return the httpcore exception of a socket or parser failure (transport.py maps those)."""
    if isinstance(e, TimeoutError):
        kind = httpcore.ConnectTimeout if connecting else httpcore.ReadTimeout
        return kind(str(e) or "timed out")
    if connecting or isinstance(e, ConnectionRefusedError | socket.gaierror):
        return httpcore.ConnectError(f"{type(e).__name__}: {e}")
    return httpcore.RemoteProtocolError(f"{type(e).__name__}: {e}")


class _Reader:
    """httptools' callbacks: collect one answer (the parser forgets whether the connection
    stays open once the answer is complete, so that is noted when the headers are)."""

    __slots__ = ("parser", "headers", "body", "headed", "keep", "complete")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.headed = self.keep = self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.parser.get_status_code() < 200:  # informational: the answer follows it
            self.headers.clear()
            return
        self.headed, self.keep = True, self.parser.should_keep_alive()

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.complete = self.headed  # not at the end of an informational answer


def _until_close(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether an answer's body runs until the connection closes (no length, not chunked)."""
    names = {k.lower() for k, _ in headers}
    return b"content-length" not in names and b"transfer-encoding" not in names


def read_httptools(sock: socket.socket) -> Answer:
    """Read one answer from `sock` with httptools' C parser."""
    reader = _Reader()
    while not reader.complete:
        data = sock.recv(65536)
        if not data:
            if reader.headed and _until_close(reader.headers):
                break  # the body ran until the server closed: complete, not kept
            raise _Closed("the server closed the connection before the answer ended")
        reader.parser.feed_data(data)
    status, body = reader.parser.get_status_code(), b"".join(reader.body)
    return status, reader.headers, body, reader.keep and reader.complete


def read_stdlib(sock: socket.socket) -> Answer:
    """Read one answer from `sock` with http.client (when httptools is not installed)."""
    response = http.client.HTTPResponse(sock, method="POST")
    try:
        response.begin()
        content = response.read()
    finally:
        response.close()  # its file object, not the socket
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()]
    return response.status, headers, content, not response.will_close


def _readable(sock: socket.socket) -> bool:
    """Whether a socket has something to read now, without waiting. poll() where there is
    one: select() refuses a descriptor past 1024, which a busy process has."""
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([sock], [], [], 0)[0])
    ready = select.poll()
    ready.register(sock, select.POLLIN)
    return bool(ready.poll(0))


class _Conn:
    """One keep-alive socket to an origin; `sock` is None once closed."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


class _Idle:
    """Idle keep-alive connections per (scheme, host, port), at most `idle` kept each,
    none kept longer than `expiry` seconds (a peer or a NAT may drop an idle connection
    without a word, and a POST on it would wait for its read timeout)."""

    def __init__(self, ssl: Any, idle: int, expiry: float):
        self.ssl, self.idle, self.expiry = ssl, idle, expiry
        self.free: dict[tuple, list[tuple[float, _Conn]]] = {}
        self.guard = threading.Lock()

    def take(self, url: httpcore.URL) -> _Conn | None:
        """Return an idle connection still open, or None."""
        key, now = (url.scheme, url.host, url.port), time.monotonic()
        with self.guard:
            free = self.free.get(key)
            while free:
                since, conn = free.pop()
                # An idle keep-alive socket has nothing to read: readable means the
                # server closed it (or sent junk), so it is dropped, not reused.
                fresh = now - since < self.expiry
                if fresh and conn.sock is not None and not _readable(conn.sock):
                    return conn
                conn.close()
        return None

    def get(self, url: httpcore.URL, timeout: float | None) -> _Conn:
        """Return an idle connection still open, else a new one to the request's origin
        (TLS for https); a failure to connect is httpcore's exception."""
        conn = self.take(url)
        if conn is not None:
            return conn
        host, https = url.host.decode("ascii"), url.scheme == b"https"
        try:
            sock = socket.create_connection((host, url.port or (443 if https else 80)), timeout)
        except OSError as e:
            raise _as_httpcore(e, connecting=True) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client does
            return _Conn(self.ssl.wrap_socket(sock, server_hostname=host) if https else sock)
        except OSError as e:  # the TLS handshake, a certificate refused
            sock.close()
            raise _as_httpcore(e, connecting=True) from None
        except BaseException:
            sock.close()
            raise

    def give(self, url: httpcore.URL, conn: _Conn) -> None:
        """Keep a connection whose answer was read whole, for the next request."""
        key = (url.scheme, url.host, url.port)
        with self.guard:
            free = self.free.setdefault(key, [])
            if len(free) < self.idle:
                free.append((time.monotonic(), conn))
                return
        conn.close()

    def close(self) -> None:
        with self.guard:
            conns = [c for free in self.free.values() for _, c in free]
            self.free.clear()
        for conn in conns:
            conn.close()


# RFC 9110: a field name is a token; a value is visible bytes, spaces and tabs (no CR,
# LF, NUL or other control byte, which would break or smuggle the framing).
_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """Return a request line and its header lines (a blank line still to come), checked:
    a name that is not a token, or a value with a control byte, is a LocalProtocolError
    (as httpcore's own pool refuses them).

    >>> request_head(b"POST", b"/v1", [(b"Host", b"api")])
    b'POST /v1 HTTP/1.1\\r\\nHost: api\\r\\n'
    """
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in headers:
        if not _NAME.fullmatch(name) or not _VALUE.fullmatch(value):
            raise httpcore.LocalProtocolError(
                f"invalid header {name!r}: a name must be a token, a value has no control bytes"
            )
        lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n"


def _post_whole(
    idle: _Idle, read: Callable, url: httpcore.URL, data: bytes, timeout: Any, connect: Any
) -> Answer:
    """Send a whole request on a keep-alive connection and read the answer whole."""
    conn = idle.get(url, connect)
    try:
        conn.sock.settimeout(timeout)
        conn.sock.sendall(data)
        answer = read(conn.sock)
        if answer[0] < 200:
            raise _Closed(_INFORMATIONAL % answer[0])
    except (OSError, http.client.HTTPException, _Closed, *_PARSE_ERRORS) as e:
        conn.close()
        raise _as_httpcore(e, connecting=False) from None
    except BaseException:
        conn.close()
        raise
    if answer[3]:
        idle.give(url, conn)
    else:
        conn.close()
    return answer


def _open_stream(idle: _Idle, url: httpcore.URL, data: bytes, timeout: Any) -> tuple:
    """Send a streamed request on a keep-alive connection and read up to the end of the
    answer's headers; return (status, headers, its body as a `_Body`)."""
    conn = idle.get(url, timeout)
    reader = _Reader()
    try:
        conn.sock.settimeout(timeout)
        conn.sock.sendall(data)
        while not reader.headed:
            got = conn.sock.recv(65536)
            if not got:
                raise _Closed("the server closed the connection before the answer's headers")
            reader.parser.feed_data(got)
        if reader.parser.get_status_code() < 200:
            raise _Closed(_INFORMATIONAL % reader.parser.get_status_code())
    except (OSError, _Closed, *_PARSE_ERRORS) as e:
        conn.close()
        raise _as_httpcore(e, connecting=False) from None
    except BaseException:
        conn.close()
        raise
    return reader.parser.get_status_code(), reader.headers, _Body(idle, url, conn, reader)


class _Body:
    """A streamed answer's body, read from its socket as the caller iterates (with
    httptools). The connection goes back to the pool when the answer has ended, and is
    closed if the caller stops before (what is left of the answer cannot be skipped)."""

    def __init__(self, idle: _Idle, url: httpcore.URL, conn: _Conn, reader: _Reader) -> None:
        self.idle, self.url, self.conn, self.reader = idle, url, conn, reader

    def __iter__(self) -> Iterator[bytes]:
        reader, conn = self.reader, self.conn
        try:
            while True:
                if reader.body:
                    chunks, reader.body = reader.body, []
                    yield from chunks
                if reader.complete:
                    break
                got = conn.sock.recv(65536)
                if not got:
                    if _until_close(reader.headers):
                        reader.keep = False  # the body ran until the server closed
                        break
                    raise _Closed("the server closed the connection before the answer ended")
                reader.parser.feed_data(got)
        except (OSError, _Closed, *_PARSE_ERRORS) as e:
            self.close()
            raise _as_httpcore(e, connecting=False) from None
        if reader.keep and reader.complete:
            self.conn = None
            self.idle.give(self.url, conn)
        else:
            self.close()

    def close(self) -> None:
        """Let the connection go: closed, unless the whole answer was read and it was kept."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()


class KeepAlivePool:
    """A sync pool: whole answers on keep-alive sockets, streams on httpcore.

    `read` reads one answer from a socket: `read_httptools` when httptools is
    installed, else `read_stdlib` (the same answers; the first costs a twentieth).
    """

    def __init__(self, ssl_context: Any, max_connections: int, max_keepalive_connections: int,
                 keepalive_expiry: float, read: Callable | None = None) -> None:  # fmt: skip
        self.idle = _Idle(ssl_context, max_keepalive_connections, keepalive_expiry)
        self.read = read or (read_httptools if httptools is not None else read_stdlib)
        self.streams = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
        )

    def handle_request(self, request: httpcore.Request) -> httpcore.Response:
        """Send a request on a kept socket: a streamed answer is read as it arrives (on
        httpcore's pool when httptools is not installed), any other whole."""
        streamed = _streamed(request)
        if streamed and self.read is not read_httptools:
            return self.streams.handle_request(request)
        head = request_head(request.method, request.url.target, request.headers)
        timeouts = request.extensions.get("timeout", {})
        data = head + b"\r\n" + b"".join(request.stream)
        if streamed:
            status, headers, body = _open_stream(self.idle, request.url, data, timeouts.get("read"))
            return httpcore.Response(status, headers=headers, content=body)
        status, headers, content, _ = _post_whole(
            self.idle, self.read, request.url, data, timeouts.get("read"), timeouts.get("connect")
        )
        return httpcore.Response(status, headers=headers, content=content)

    def post_whole(self, url: httpcore.URL, head: bytes, content: bytes, timeout: float) -> tuple:
        """POST `content` after `head` (from `request_head`, with Host, without
        Content-Length) and read the answer whole: (status, [(name, value)], body). The
        transport's own path for whole answers: no request or response objects."""
        data = head + b"Content-Length: %d\r\n\r\n" % len(content) + content
        return _post_whole(self.idle, self.read, url, data, timeout, timeout)[:3]

    def close(self) -> None:
        """Close every connection."""
        self.idle.close()
        self.streams.close()
