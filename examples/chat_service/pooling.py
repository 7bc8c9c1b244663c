"""An async transport made of several small httpcore pools, taken in turn.

httpcore 1.0's AsyncConnectionPool rescans every connection for every queued request
(O(connections x queued) per request, plus a poll() per idle socket: encode/httpcore#1035).
With 30+ model calls in flight on one pool, that bookkeeping alone took more CPU than
the rest of a request. Small pools keep each scan short. The transport speaks
httpcore's own interface, which toolnexus drives directly (no httpx models per call).
"""

from __future__ import annotations

from itertools import cycle
from typing import Any

import httpcore
import httpx

__all__ = ["sharded_transport"]


class _Sharded:
    """httpcore's handle_async_request over pools taken round-robin (equal latencies)."""

    def __init__(self, shards: int, per_shard: int):
        ssl = httpx.create_ssl_context()
        self.pools = [
            httpcore.AsyncConnectionPool(
                ssl_context=ssl, max_connections=per_shard, max_keepalive_connections=per_shard
            )
            for _ in range(shards)
        ]
        self._next = cycle(self.pools).__next__

    async def handle_async_request(self, request: httpcore.Request) -> Any:
        return await self._next().handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self.pools:
            await pool.aclose()


def sharded_transport(connections: int, per_shard: int = 4) -> Any:
    """Return an async transport of about `connections` connections in pools of `per_shard`."""
    return _Sharded(max(1, -(-connections // per_shard)), per_shard)
