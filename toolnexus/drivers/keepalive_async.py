"""The default async pool when httptools is installed: answers on kept asyncio connections.

The async twin of `keepalive.py` for one event loop (the runtime keeps one per loop, as
connections belong to it): a request goes out as bytes on a kept connection and
httptools' parser reads the answer as its bytes arrive, whole or streamed, with no
thread and none of httpcore's layers (anyio, h11). By callgrind (in process, no store):
`astream` of a JSON answer 2.75M -> 1.24M instructions, `aask` 1.04M (on the sync pool
in an io thread) -> 0.95M (benchmarks/service/README.md). It speaks httpcore's async
interface (`handle_async_request(httpcore.Request) -> httpcore.Response`) and fails
with httpcore's exceptions, so `transport.py` treats it like httpcore's own pool.
Without httptools the runtime uses httpcore's pool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpcore

from .keepalive import (
    _PARSE_ERRORS,
    _as_httpcore,
    _Closed,
    _Reader,
    _streamed,
    _until_close,
    request_head,
)

__all__ = ["AsyncKeepAlivePool"]


class _Connection(asyncio.Protocol):
    """One kept connection: the bytes that arrive go to the current answer's reader, and
    whoever waits for them is woken."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader: _Reader | None = None
        self.failure: BaseException | None = None  # a parse error, or the connection lost
        self.eof = False
        self.waiter: asyncio.Future | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.reader is None:  # bytes nobody asked for: out of step, never reused
            self.failure = _Closed("the server sent bytes while the connection was idle")
            self.transport.close()
        elif self.failure is None:
            try:
                self.reader.parser.feed_data(data)
            except _PARSE_ERRORS as e:
                self.failure = e
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None and self.failure is None:
            self.failure = exc
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def usable(self) -> bool:
        """Whether the connection can take another request."""
        return self.failure is None and not self.eof and not self.transport.is_closing()

    async def more(self, timeout: float | None) -> None:
        """Wait for more of the answer; raise what ended it early (httpcore's exceptions)."""
        reader = self.reader
        if self.failure is not None:
            raise _as_httpcore(self.failure, connecting=False)
        if self.eof:
            if reader.headed and _until_close(reader.headers):
                reader.complete, reader.keep = True, False  # its body ran until the close
                return
            raise _as_httpcore(_Closed("the server closed the connection early"), False)
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        # A timer, not asyncio.wait_for (a task and more per read): it fails the waiter.
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.ReadTimeout("timed out"))


class _Body:
    """A streamed answer's body as it arrives; the connection goes back to the pool when
    the answer has ended, and is closed if the caller stops before."""

    def __init__(self, pool: AsyncKeepAlivePool, key: tuple, conn: _Connection, timeout: Any):
        self.pool, self.key, self.conn, self.timeout = pool, key, conn, timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self.conn
        reader = conn.reader
        try:
            while True:
                # Drained to the end before looking at `complete`: more of the answer (and
                # its end) may have arrived while the caller held a chunk.
                while reader.body:
                    chunks, reader.body = reader.body, []
                    for chunk in chunks:
                        yield chunk
                if reader.complete:
                    break
                await conn.more(self.timeout)
        except BaseException:  # cancelled, timed out, failed, or left early
            self.drop()
            raise
        self.conn = None
        self.pool.give(self.key, conn)

    async def aread(self) -> bytes:
        """Read the rest of the answer."""
        return b"".join([chunk async for chunk in self])

    def drop(self) -> None:
        """Close the connection, unless the whole answer was read (it went back then)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        """Let the connection go (httpcore's Response.aclose calls this)."""
        self.drop()


class AsyncKeepAlivePool:
    """An async pool for one event loop: requests on kept connections, answers read by
    httptools as they arrive (whole or streamed)."""

    def __init__(self, ssl_context: Any, max_keepalive_connections: int, keepalive_expiry: float):
        self.ssl, self.idle, self.expiry = ssl_context, max_keepalive_connections, keepalive_expiry
        self.free: dict[tuple, list[tuple[float, _Connection]]] = {}
        self._closer: AsyncIterator | None = None

    async def _close_with_the_loop(self) -> None:
        """Have the idle connections closed when the loop shuts down.

        Connections belong to their loop, and `asyncio.run` closes the loop when its
        coroutine returns: kept idle connections would outlive it (unclosed until garbage
        collection, with a ResourceWarning each). An async generator is what the loop
        finalizes as it shuts down (`shutdown_asyncgens`), so one kept here closes them."""
        if self._closer is None:
            self._closer = _closer(self)
            await self._closer.__anext__()

    def _take(self, key: tuple) -> _Connection | None:
        free, now = self.free.get(key), time.monotonic()
        while free:
            since, conn = free.pop()
            if now - since < self.expiry and conn.usable:
                return conn
            conn.close()
        return None

    def give(self, key: tuple, conn: _Connection) -> None:
        """Keep a connection whose answer was read whole, if it may be kept."""
        reader, conn.reader = conn.reader, None
        if not (reader.keep and reader.complete and conn.usable):
            conn.close()
            return
        free = self.free.setdefault(key, [])
        if len(free) < self.idle:
            free.append((time.monotonic(), conn))
        else:
            conn.close()

    async def _connect(self, url: httpcore.URL, timeout: float | None) -> _Connection:
        host, https = url.host.decode("ascii"), url.scheme == b"https"
        port = url.port or (443 if https else 80)
        tls = {"ssl": self.ssl, "server_hostname": host} if https else {}
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(_Connection, host, port, **tls), timeout
            )
        except OSError as e:  # TimeoutError (wait_for's) is an OSError too
            raise _as_httpcore(e, connecting=True) from None
        return conn

    async def _send(self, url: httpcore.URL, data: bytes, timeout: Any) -> tuple:
        """Send a request on a kept connection and read up to the end of the answer's
        headers; return (status, headers, its body as a `_Body`)."""
        key = (url.scheme, url.host, url.port)
        if self._closer is None:
            await self._close_with_the_loop()
        conn = self._take(key) or await self._connect(url, timeout)
        conn.reader = reader = _Reader()
        body = _Body(self, key, conn, timeout)
        try:
            conn.transport.write(data)
            while not reader.headed:
                await conn.more(timeout)
        except BaseException:
            body.drop()
            raise
        return reader.parser.get_status_code(), reader.headers, body

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        """Send a request on a kept connection; answer with the response whose body is
        read as it arrives (a stream) or already read (a whole answer)."""
        url = request.url
        head = request_head(request.method, url.target, request.headers)
        data = head + b"\r\n" + b"".join([part async for part in request.stream])
        status, headers, body = await self._send(url, data, request.extensions.get(
            "timeout", {}).get("read"))  # fmt: skip
        content = body if _streamed(request) else await body.aread()
        return httpcore.Response(status, headers=headers, content=content)

    async def apost_whole(
        self, url: httpcore.URL, head: bytes, content: bytes, timeout: float
    ) -> tuple:
        """POST `content` after `head` (from `request_head`, with Host, without
        Content-Length) and read the answer whole: (status, [(name, value)], body). The
        transport's own path for whole answers: no request or response objects."""
        data = head + b"Content-Length: %d\r\n\r\n" % len(content) + content
        status, headers, body = await self._send(url, data, timeout)
        return status, headers, await body.aread()

    async def aclose(self) -> None:
        """Close every idle connection."""
        conns = [c for free in self.free.values() for _, c in free]
        self.free.clear()
        for conn in conns:
            conn.close()


async def _closer(pool: AsyncKeepAlivePool) -> AsyncIterator[None]:
    try:
        yield
    finally:  # the loop shuts down (or the pool is dropped): no idle connection outlives it
        await pool.aclose()
