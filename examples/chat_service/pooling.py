"""The service's model transport: whole answers on a sync pool in threads, streams on async pools.

Under load, httpcore's async pool was half of a worker's CPU with the async driver: its
anyio streams and cancel scopes cost several times what the same POST costs on the sync
pool, and AsyncConnectionPool rescans every connection for every queued request
(O(connections x queued), plus a poll() per idle socket: encode/httpcore#1035). So a
plain POST (a JSON answer) runs on one sync httpcore pool in a worker thread and comes
back whole; a streamed one (SSE, which must arrive as it is produced) goes to small
async pools taken in turn, which keep each scan short. The transport speaks httpcore's
own interface on both sides, which toolnexus drives directly, so one client serves the
sync driver (`ask`, through `handle_request`) and the async one (`aask`, `astream`).

A cancelled `aask` stops waiting at once; its POST finishes in its thread, bounded by
the request's own timeout.
"""

from __future__ import annotations

import asyncio
from itertools import cycle
from typing import Any

import httpcore
import httpx

__all__ = ["service_transport"]

_SSE = b"text/event-stream"


def _streamed(request: httpcore.Request) -> bool:
    return any(k.lower() == b"accept" and _SSE in v for k, v in request.headers)


class _ServiceTransport:
    """handle_request on a sync pool; handle_async_request: whole in a thread, or streamed."""

    def __init__(self, connections: int, per_shard: int):
        ssl = httpx.create_ssl_context()
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
        return self.pool.handle_request(request)

    def _whole(self, request: httpcore.Request) -> httpcore.Response:
        response = self.pool.handle_request(request)
        try:
            content = response.read()
        finally:
            response.close()
        # Bytes content: an async-iterable stream, read by the async driver as usual.
        return httpcore.Response(response.status, headers=response.headers, content=content)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if _streamed(request):
            return await self._next_shard().handle_async_request(request)
        return await asyncio.to_thread(self._whole, request)

    def close(self) -> None:
        self.pool.close()

    async def aclose(self) -> None:
        self.pool.close()
        for pool in self.shards:
            await pool.aclose()


def service_transport(connections: int, per_shard: int = 4) -> Any:
    """Return the service's model transport for about `connections` connections at once."""
    return _ServiceTransport(connections, per_shard)
