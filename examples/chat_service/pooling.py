"""An httpx async transport made of several small connection pools (least-busy first).

httpcore 1.0's AsyncConnectionPool rescans every connection for every queued request
(O(connections x queued) per request, plus a poll() per idle socket: encode/httpcore#1035).
With 30+ model calls in flight on one pool, that bookkeeping alone took more CPU than
the rest of a request. Small pools keep each scan short; a request goes to the pool
with the fewest responses open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx

__all__ = ["sharded_transport"]


class _Counted(httpx.AsyncByteStream):
    """A response body that reports when it is closed (the connection is free again)."""

    def __init__(self, inner: httpx.AsyncByteStream, done: Callable[[], None]):
        self.inner, self.done, self.open = inner, done, True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            if self.open:
                self.open = False
                self.done()


class _Sharded(httpx.AsyncBaseTransport):
    def __init__(self, shards: int, per_shard: int):
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        self.pools = [httpx.AsyncHTTPTransport(limits=limits) for _ in range(shards)]
        self.busy = [0] * shards

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        i = min(range(len(self.pools)), key=self.busy.__getitem__)
        self.busy[i] += 1

        def done() -> None:
            self.busy[i] -= 1

        try:
            r = await self.pools[i].handle_async_request(request)
        except BaseException:
            done()
            raise
        return httpx.Response(
            r.status_code,
            headers=r.headers,
            stream=_Counted(r.stream, done),
            extensions=r.extensions,
        )

    async def aclose(self) -> None:
        for pool in self.pools:
            await pool.aclose()


def sharded_transport(connections: int, per_shard: int = 4) -> httpx.AsyncBaseTransport:
    """Return an async transport of about `connections` connections in pools of `per_shard`."""
    return _Sharded(max(1, -(-connections // per_shard)), per_shard)
