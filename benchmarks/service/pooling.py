"""The service's model transport: whole answers on http.client in threads, streams on async pools.

Under load, httpcore's async pool was half of a worker's CPU with the async driver: its
anyio streams and cancel scopes cost several times what the same POST costs on a sync
pool, and AsyncConnectionPool rescans every connection for every queued request
(O(connections x queued), plus a poll() per idle socket: encode/httpcore#1035). So a
plain POST (a JSON answer) runs on the standard library's keep-alive HTTPConnection in a
worker thread and comes back whole: a fifth of the instructions a service request costs
went to the model POST on httpcore's sync pool, and http.client takes half of that. A
streamed one (SSE, which must arrive as it is produced) goes to httpcore: small async
pools taken in turn, which keep each scan short (or its sync pool for the sync driver).
The transport speaks httpcore's own interface on both sides, which toolnexus drives
directly, so one client serves the sync driver (`ask`, through `handle_request`) and
the async one (`aask`, `astream`); failures are raised as httpcore's exceptions, which
toolnexus maps to ProviderError (and to RunTimeoutError once the run's deadline passed).

A cancelled `aask` stops waiting at once; its POST finishes in its thread, bounded by
the request's own timeout.
"""

from __future__ import annotations

import asyncio
import http.client
import select
import socket
import threading
from itertools import cycle
from typing import Any

import httpcore
import httpx

__all__ = ["service_transport"]

_SSE = b"text/event-stream"


def _streamed(request: httpcore.Request) -> bool:
    return any(k.lower() == b"accept" and _SSE in v for k, v in request.headers)


class _KeepAlive:
    """Idle keep-alive HTTPConnections per (scheme, host, port), at most `idle` kept each."""

    def __init__(self, ssl: Any, idle: int):
        self.ssl, self.idle = ssl, idle
        self.free: dict[tuple, list[http.client.HTTPConnection]] = {}
        self.guard = threading.Lock()

    def take(self, url: httpcore.URL, timeout: float | None) -> http.client.HTTPConnection:
        """Return an idle connection still open, else a new (unconnected) one."""
        key = (url.scheme, url.host, url.port)
        with self.guard:
            free = self.free.get(key)
            while free:
                conn = free.pop()
                # An idle keep-alive socket has nothing to read: readable means the
                # server closed it (or sent junk), so it is dropped, not reused.
                if conn.sock is not None and not select.select([conn.sock], [], [], 0)[0]:
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
                free.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self.guard:
            conns = [c for free in self.free.values() for c in free]
            self.free.clear()
        for conn in conns:
            conn.close()


def _post_whole(pool: _KeepAlive, request: httpcore.Request) -> httpcore.Response:
    """POST on a keep-alive http.client connection and read the answer whole."""
    url, timeout = request.url, request.extensions.get("timeout", {}).get("read")
    conn = pool.take(url, timeout)
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
        raise _as_httpcore(e) from e
    except BaseException:
        conn.close()
        raise
    if response.will_close:
        conn.close()
    else:
        pool.give(url, conn)
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()]
    return httpcore.Response(response.status, headers=headers, content=content)


def _as_httpcore(e: Exception) -> Exception:
    """Return the httpcore exception (which toolnexus maps) of an http.client failure."""
    if isinstance(e, TimeoutError):
        return httpcore.ReadTimeout(str(e) or "timed out")
    if isinstance(e, ConnectionRefusedError | socket.gaierror):
        return httpcore.ConnectError(f"{type(e).__name__}: {e}")
    return httpcore.RemoteProtocolError(f"{type(e).__name__}: {e}")


class _ServiceTransport:
    """handle_request on a sync pool; handle_async_request: whole in a thread, or streamed."""

    def __init__(self, connections: int, per_shard: int):
        ssl = httpx.create_ssl_context()
        self.keepalive = _KeepAlive(ssl, connections)
        self.pool = httpcore.ConnectionPool(
            ssl_context=ssl, max_connections=connections, max_keepalive_connections=connections
        )
        shards = max(1, -(-connections // per_shard))
        self.shards = [
            httpcore.AsyncConnectionPool(
                ssl_context=ssl, max_connections=per_shard, max_keepalive_connections=per_shard
            )
            for _ in range(shards)
        ]
        self._next_shard = cycle(self.shards).__next__

    def handle_request(self, request: httpcore.Request) -> httpcore.Response:
        if _streamed(request):
            return self.pool.handle_request(request)
        return _post_whole(self.keepalive, request)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if _streamed(request):
            return await self._next_shard().handle_async_request(request)
        # Bytes content: an async-iterable stream, read by the async driver as usual.
        return await asyncio.to_thread(_post_whole, self.keepalive, request)

    def close(self) -> None:
        self.keepalive.close()
        self.pool.close()

    async def aclose(self) -> None:
        self.close()
        for pool in self.shards:
            await pool.aclose()


def service_transport(connections: int, per_shard: int = 4) -> Any:
    """Return the service's model transport for about `connections` connections at once."""
    return _ServiceTransport(connections, per_shard)
