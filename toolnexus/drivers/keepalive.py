"""The default sync pool: whole answers on http.client keep-alive connections, streams on httpcore.

A whole (JSON) answer is one POST read to its end, which the standard library's
HTTPConnection does in half the CPU of httpcore's pool (measured per exchange with
callgrind in benchmarks/service: the model call was a fifth of a service request). A
streamed answer (SSE) must arrive as it is produced and goes to an httpcore pool. Both
speak httpcore's interface (`handle_request(httpcore.Request) -> httpcore.Response`)
and fail with httpcore's exceptions, so `transport.py` treats this pool like any other:
its errors are classified (network or not) and scrubbed there.

The state it owns (idle connections per origin, at most `idle` each) lives in the
client's runtime with the rest of its pools, and is closed with it.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
import time
from typing import Any

import httpcore

__all__ = ["KeepAlivePool"]

_SSE = b"text/event-stream"


def _streamed(request: httpcore.Request) -> bool:
    return any(k.lower() == b"accept" and _SSE in v for k, v in request.headers)


def _as_httpcore(e: Exception) -> Exception:
    """Return the httpcore exception of an http.client failure (transport.py maps those)."""
    if isinstance(e, TimeoutError):
        return httpcore.ReadTimeout(str(e) or "timed out")
    if isinstance(e, ConnectionRefusedError | socket.gaierror):
        return httpcore.ConnectError(f"{type(e).__name__}: {e}")
    return httpcore.RemoteProtocolError(f"{type(e).__name__}: {e}")


class _Idle:
    """Idle keep-alive HTTPConnections per (scheme, host, port), at most `idle` kept each,
    none kept longer than `expiry` seconds (a peer or a NAT may drop an idle connection
    without a word, and a POST on it would wait for its read timeout)."""

    def __init__(self, ssl: Any, idle: int, expiry: float):
        self.ssl, self.idle, self.expiry = ssl, idle, expiry
        self.free: dict[tuple, list[tuple[float, http.client.HTTPConnection]]] = {}
        self.guard = threading.Lock()

    def take(self, url: httpcore.URL, timeout: float | None) -> http.client.HTTPConnection:
        """Return an idle connection still open, else a new (unconnected) one."""
        key, now = (url.scheme, url.host, url.port), time.monotonic()
        with self.guard:
            free = self.free.get(key)
            while free:
                since, conn = free.pop()
                # An idle keep-alive socket has nothing to read: readable means the
                # server closed it (or sent junk), so it is dropped, not reused.
                fresh = now - since < self.expiry
                if fresh and conn.sock is not None and not select.select([conn.sock], [], [], 0)[0]:
                    conn.sock.settimeout(timeout)
                    return conn
                conn.close()
        host, port = url.host.decode("ascii"), url.port
        if url.scheme == b"https":
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=self.ssl)
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def give(self, url: httpcore.URL, conn: http.client.HTTPConnection) -> None:
        """Keep a connection whose response was read whole, for the next request."""
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


def _post_whole(idle: _Idle, request: httpcore.Request) -> httpcore.Response:
    """POST on a keep-alive connection and read the answer whole."""
    url, timeout = request.url, request.extensions.get("timeout", {}).get("read")
    conn = idle.take(url, timeout)
    try:
        conn.putrequest(
            request.method.decode("ascii"), url.target.decode("ascii"),
            skip_host=True, skip_accept_encoding=True,
        )  # fmt: skip
        for name, value in request.headers:  # Host and Content-Length are among them
            conn.putheader(name, value)
        conn.endheaders(b"".join(request.stream))  # headers and body in one send
        response = conn.getresponse()
        content = response.read()
    except (OSError, http.client.HTTPException) as e:
        conn.close()
        raise _as_httpcore(e) from None
    except BaseException:
        conn.close()
        raise
    if response.will_close:
        conn.close()
    else:
        idle.give(url, conn)
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()]
    return httpcore.Response(response.status, headers=headers, content=content)


class KeepAlivePool:
    """A sync pool: whole answers on http.client keep-alive connections, streams on httpcore."""

    def __init__(self, ssl_context: Any, max_connections: int, max_keepalive_connections: int,
                 keepalive_expiry: float) -> None:  # fmt: skip
        self.idle = _Idle(ssl_context, max_keepalive_connections, keepalive_expiry)
        self.streams = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
        )

    def handle_request(self, request: httpcore.Request) -> httpcore.Response:
        """Send a request: a stream on httpcore's pool, anything else whole on http.client."""
        if _streamed(request):
            return self.streams.handle_request(request)
        return _post_whole(self.idle, request)

    def close(self) -> None:
        """Close every connection."""
        self.idle.close()
        self.streams.close()
