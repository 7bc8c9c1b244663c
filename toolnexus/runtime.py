"""A client's runtime: the one owned place for its long-lived resources and memos.

A client value holds options only; what a run needs beyond them lives here, created on
first use and freed by `close()`:
- the HTTP connection pool (sync), and one async pool per event loop (connections
  belong to the loop that opened them);
- the thread pool a turn's tool calls overlap on, and the one the async driver runs
  blocking store, lock and log calls in (large, so lock waiters never starve a holder);
- the per-conversation memo: for each conversation this runtime saved, the saved
  transcript, it as the next request replays it, and the JSON text of each message, so
  the next exchange that loads that very value (an in-memory store, a read cache) skips
  translating, repairing and re-encoding it. It
  is bounded (MEMO_SIZE conversations, least recently used dropped) and holds the
  values it describes, so a hit is exact;
- the toolkit with the message log's lookup tool, per conversation (same bound), so an
  exchange does not rebuild the tool and its request JSON;
- the metrics sink behind `metrics(client)`.

`client.set(...)` shares its runtime with the client it came from, on purpose: an
evolved client reuses the connections and threads. Close the runtime once, when done.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .drivers.transport import Transport, default_async_transport, default_transport

__all__ = ["Runtime", "MEMO_SIZE"]

MEMO_SIZE = 256  # conversations remembered per runtime
TOOL_THREADS = 16
IO_THREADS = 256  # threads start on demand: only blocked lock waiters need many


class Runtime:
    """The resources and memos of one client (and the clients evolved from it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._transport: Transport | None = None
        self._atransports: dict = {}  # {event loop: Transport}
        self._tool_pool: ThreadPoolExecutor | None = None
        self._io_pool: ThreadPoolExecutor | None = None
        self._memo: OrderedDict[str, Mapping] = OrderedDict()
        self._lookup: OrderedDict[str, tuple] = OrderedDict()  # id -> (toolkit, log, made)
        self._scoper: tuple | None = None  # (toolkit, log, scoped(id)) of the last toolkit
        self._sink: dict | None = None
        self._local_lock: Callable | None = None
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._memo)} conversations remembered"
        return f"Runtime({state})"

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this client was closed: create a new one")

    def transport(self) -> Transport:
        """Return the default sync connection pool (made on first use)."""
        with self._lock:
            self._check_open()
            if self._transport is None:
                self._transport = Transport(default_transport())
            return self._transport

    def atransport(self) -> Transport:
        """Return the default async connection pool of the running event loop."""
        import asyncio  # loaded with the first async run: `import toolnexus` stays light

        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            made = self._atransports.get(loop)
            if made is None:
                for old in [k for k in self._atransports if k.is_closed()]:
                    del self._atransports[old]  # its connections died with their loop
                made = self._atransports[loop] = Transport(default_async_transport())
            return made

    def tool_pool(self) -> ThreadPoolExecutor:
        """Return the thread pool a turn's tool calls overlap on."""
        with self._lock:
            self._check_open()
            if self._tool_pool is None:
                self._tool_pool = ThreadPoolExecutor(TOOL_THREADS, "toolnexus-tool")
            return self._tool_pool

    def io_pool(self) -> ThreadPoolExecutor:
        """Return the thread pool the async driver runs blocking store/lock/log calls in."""
        with self._lock:
            self._check_open()
            if self._io_pool is None:
                self._io_pool = ThreadPoolExecutor(IO_THREADS, "toolnexus-io")
            return self._io_pool

    def sink(self) -> dict:
        """Return the metrics sink behind `metrics(client)`."""
        with self._lock:
            if self._sink is None:
                from .prometheus import metrics_sink

                self._sink = metrics_sink()
            return self._sink

    def local_lock(self) -> Callable:
        """Return the in-process conversation lock of this runtime's clients."""
        with self._lock:
            if self._local_lock is None:
                from .store.locks import local_lock

                self._local_lock = local_lock()
            return self._local_lock

    def recall(self, conversation_id: str) -> Mapping | None:
        """Return the memo {messages, history, texts} of a conversation this runtime saved."""
        with self._lock:
            memo = self._memo.get(conversation_id)
            if memo is not None:
                self._memo.move_to_end(conversation_id)
            return memo

    def remember(self, conversation_id: str, memo: Mapping) -> None:
        """Keep the memo of a conversation just saved (the least recent one goes past the bound)."""
        with self._lock:
            self._memo[conversation_id] = memo
            self._memo.move_to_end(conversation_id)
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)

    def lookup_toolkit(
        self, tk: Any, log: Any, conversation_id: str, scoper: Callable[[], Callable]
    ) -> Any:
        """Return the toolkit plus the log's lookup tool scoped to a conversation, made
        once per conversation (LRU, MEMO_SIZE ids) by `scoper()(conversation_id)`; the
        scoper itself is made once per (toolkit, log) value (the last one is kept), so
        the toolkit's request entries are not built again for each new conversation."""
        with self._lock:
            hit = self._lookup.get(conversation_id)
            if hit is not None and hit[0] is tk and hit[1] is log:
                self._lookup.move_to_end(conversation_id)
                return hit[2]
            last = self._scoper
        if last is None or last[0] is not tk or last[1] is not log:
            last = (tk, log, scoper())
        made = last[2](conversation_id)
        with self._lock:
            self._scoper = last
            self._lookup[conversation_id] = (tk, log, made)
            self._lookup.move_to_end(conversation_id)
            while len(self._lookup) > MEMO_SIZE:
                self._lookup.popitem(last=False)
        return made

    def close(self) -> None:
        """Close the connection pools and thread pools; forget the memos. Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            transport, self._transport = self._transport, None
            pools = (self._tool_pool, self._io_pool)
            self._tool_pool = self._io_pool = None
            self._atransports.clear()  # closed with their event loops
            self._memo.clear()
            self._lookup.clear()
            self._scoper = None
        if transport is not None:
            transport.close()
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
