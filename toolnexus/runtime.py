"""A client's runtime: the one owned place for its long-lived resources and memos.

A client value holds options only; what a run needs beyond them lives here, created on
first use and freed by `close()`:
- the httpx clients: one `httpx.Client`, and one `httpx.AsyncClient` per event loop
  (connections belong to the loop that opened them), for each proxy setting in use;
  forgotten in a child after `os.fork()`, so parent and child never share a connection;
- the threads a turn's tool calls are offered to as they overlap (`drivers.helpers`),
  the thread pool that runs tools and blocking sends under a deadline, and the one the
  async driver runs blocking store, lock and log calls in (large, so lock waiters never
  starve a holder);
- the per-conversation memo: for each conversation this runtime saved, the saved
  transcript, it as the next request replays it, and the JSON text of each message, so
  the next exchange that loads that very value (an in-memory store, a read cache) skips
  translating, repairing and re-encoding it. It
  is bounded by bytes (MEMO_BYTES of the remembered messages' JSON, 16 MiB unless
  TOOLNEXUS_MEMO_BYTES says otherwise, least recently used dropped; memory is about six
  times that) and by MEMO_SIZE conversations, and holds
  the values it describes, so a hit is exact;
- the toolkit with the message log's lookup tool, per conversation (same bound), so an
  exchange does not rebuild the tool and its request JSON;
- the metrics sink behind `metrics(client)`;
- what each endpoint and model refused in a request (encrypted reasoning, unsigned
  thinking: see core.flow), so later runs leave it out from the start.

`client.set(...)` shares its runtime with the client it came from, on purpose: an
evolved client reuses the connections and threads. Close the runtime once, when done.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .core.bounds import UNENCODED_MESSAGE_BYTES, memo_bytes_bound
from .drivers.helpers import Helpers
from .drivers.transport import Http, owned_async_client, owned_client

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["Runtime", "MEMO_SIZE", "MEMO_BYTES", "memo_bytes", "memo_bytes_bound"]

MEMO_SIZE = 256  # conversations remembered per runtime
# The JSON bytes of the conversations a runtime remembers: 16 MiB is about 100 MB of
# memory (a message's objects take about six times its JSON), 89 conversations of
# 1,000 messages of about 190 bytes. A conversation past it alone is not remembered (it
# is loaded again). A process sets it with TOOLNEXUS_MEMO_BYTES, read once at import
# (a service worker's memory bound: see docs/deployment.md, "What routing costs").
MEMO_BYTES = memo_bytes_bound(os.environ)
TOOL_THREADS = 16
IO_THREADS = 256  # threads start on demand: only blocked lock waiters need many


class Runtime:
    """The resources and memos of one client (and the clients evolved from it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forget_resources()
        self._memo: OrderedDict[str, tuple[Mapping, int]] = OrderedDict()  # id -> (memo, bytes)
        self._memo_bytes = 0
        self._lookup: OrderedDict[str, tuple] = OrderedDict()  # id -> (toolkit, log, made)
        self._scoper: tuple | None = None  # (toolkit, log, scoped(id)) of the last toolkit
        # The running exchange (an otel.Trace) of each conversation key: the client's, so
        # two clients in one process never parent each other's spans.
        self.traces: dict[str, Any] = {}
        self._sink: dict | None = None
        # (style, base_url, model) -> what its server refused (see core.flow: omitted)
        self._omitted: OrderedDict[tuple, frozenset] = OrderedDict()
        self.closed = False
        _LIVE.add(self)

    def _forget_resources(self) -> None:
        # What belongs to one process: connections, threads, the in-process lock.
        self._http: dict = {}  # {proxy: Http}
        self._ahttp: dict = {}  # {(event loop, proxy): (Http, the closer kept for the loop)}
        self._tool_pool: ThreadPoolExecutor | None = None
        self._helpers: Helpers | None = None
        self._io_pool: ThreadPoolExecutor | None = None
        self._local_lock: Callable | None = None

    def _after_fork(self) -> None:
        """In a forked child: drop (never close: the parent still uses them) the inherited
        connections and pools, whose threads did not survive the fork."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._forget_resources()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._memo)} conversations remembered"
        return f"Runtime({state})"

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this client was closed: create a new one")

    def http(self, proxy: str | None = None) -> Http:
        """Return the runtime's own httpx.Client for `proxy` (made on first use)."""
        with self._lock:
            self._check_open()
            made = self._http.get(proxy)
            if made is None:
                made = self._http[proxy] = Http(owned_client(proxy))
            return made

    async def ahttp(self, proxy: str | None = None) -> Http:
        """Return the runtime's own httpx.AsyncClient of the running event loop for `proxy`."""
        import asyncio  # loaded with the first async run: `import toolnexus` stays light

        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            made = self._ahttp.get((loop, proxy))
            if made is not None:
                return made[0]
            for old in [k for k in self._ahttp if k[0].is_closed()]:
                del self._ahttp[old]  # its connections died with their loop
            http = Http(owned_async_client(proxy))
            closer = _close_with_the_loop(http.client)
            self._ahttp[(loop, proxy)] = (http, closer)
        await closer.__anext__()
        return http

    def tool_pool(self) -> ThreadPoolExecutor:
        """Return the thread pool tools run in when a run has a deadline or a cancel token
        (and the async driver's plain tools in a turn with async ones, blocking sends under
        a deadline)."""
        with self._lock:
            self._check_open()
            if self._tool_pool is None:
                from concurrent.futures import ThreadPoolExecutor  # loaded on first use

                self._tool_pool = ThreadPoolExecutor(TOOL_THREADS, "toolnexus-tool")
            return self._tool_pool

    def tool_helpers(self) -> Helpers:
        """Return the threads a turn's tool calls are offered to as they overlap (the async
        driver's plain tools too: it offers them all and takes none back)."""
        with self._lock:
            self._check_open()
            if self._helpers is None:
                self._helpers = Helpers(TOOL_THREADS, "toolnexus-tool")
            return self._helpers

    def io_pool(self) -> ThreadPoolExecutor:
        """Return the thread pool the async driver runs blocking store/lock/log calls in."""
        with self._lock:
            self._check_open()
            if self._io_pool is None:
                from concurrent.futures import ThreadPoolExecutor

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
            kept = self._memo.get(conversation_id)
            if kept is None:
                return None
            self._memo.move_to_end(conversation_id)
            return kept[0]

    def remember(self, conversation_id: str, memo: Mapping) -> None:
        """Keep the memo of a conversation just saved (the least recent ones go past the
        bounds: MEMO_SIZE conversations, MEMO_BYTES of JSON)."""
        size = memo_bytes(memo)
        with self._lock:
            old = self._memo.pop(conversation_id, None)
            self._memo_bytes -= old[1] if old is not None else 0
            if size > MEMO_BYTES:
                return
            self._memo[conversation_id] = (memo, size)
            self._memo_bytes += size
            while len(self._memo) > MEMO_SIZE or self._memo_bytes > MEMO_BYTES:
                self._memo_bytes -= self._memo.popitem(last=False)[1][1]

    def remembered_bytes(self) -> int:
        """Return the JSON bytes of the conversations this runtime remembers."""
        with self._lock:
            return self._memo_bytes

    def omitted(self, key: tuple) -> frozenset:
        """Return what requests to an endpoint and model leave out, as its refusals taught."""
        with self._lock:
            return self._omitted.get(key, frozenset())

    def omit(self, key: tuple, part: str) -> None:
        """Remember that requests to an endpoint and model leave `part` out (bounded)."""
        with self._lock:
            self._omitted[key] = self._omitted.get(key, frozenset()) | {part}
            self._omitted.move_to_end(key)
            while len(self._omitted) > MEMO_SIZE:
                self._omitted.popitem(last=False)

    def forget(self, conversation_id: str) -> None:
        """Drop what this runtime keeps of a conversation: its memo and its lookup toolkit."""
        with self._lock:
            kept = self._memo.pop(conversation_id, None)
            self._memo_bytes -= kept[1] if kept is not None else 0
            self._lookup.pop(conversation_id, None)

    def lookup_toolkit(
        self, tk: Any, log: Any, conversation_id: str, scoper: Callable[[], Callable],
        scoped_id: str | None = None,
    ) -> Any:  # fmt: skip
        """Return the toolkit plus the log's lookup tool scoped to a conversation, made
        once per conversation (LRU, MEMO_SIZE ids) by `scoper()(scoped_id or
        conversation_id)`; the scoper itself is made once per (toolkit, log) value (the
        last one is kept), so the toolkit's request entries are not built again for each
        new conversation. `conversation_id` is the memo's key (the store's scope's key)."""
        with self._lock:
            hit = self._lookup.get(conversation_id)
            if hit is not None and hit[0] is tk and hit[1] is log:
                self._lookup.move_to_end(conversation_id)
                return hit[2]
            last = self._scoper
        if last is None or last[0] is not tk or last[1] is not log:
            last = (tk, log, scoper())
        made = last[2](scoped_id if scoped_id is not None else conversation_id)
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
            clients = [h.client for h in self._http.values()]
            pools = (self._tool_pool, self._io_pool)
            helpers, self._helpers = self._helpers, None
            self._tool_pool = self._io_pool = None
            self._http.clear()
            self._ahttp.clear()  # closed as their event loops shut down
            self._memo.clear()
            self._memo_bytes = 0
            self._lookup.clear()
            self._scoper = None
            self.traces.clear()
        for client in clients:
            client.close()
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        if helpers is not None:
            helpers.close()


async def _close_with_the_loop(client: Any) -> Any:
    """Close an async client as its event loop shuts down.

    Connections belong to their loop, and `asyncio.run` closes the loop when its
    coroutine returns: kept idle connections would outlive it (unclosed until garbage
    collection, a ResourceWarning each). An async generator is what the loop finalizes
    as it shuts down (`shutdown_asyncgens`), so the runtime keeps one per loop.
    """
    try:
        yield
    finally:
        await client.aclose()


_LIVE: weakref.WeakSet[Runtime] = weakref.WeakSet()


def _forget_in_child() -> None:
    for runtime in list(_LIVE):
        runtime._after_fork()


os.register_at_fork(after_in_child=_forget_in_child)


def memo_bytes(memo: Mapping) -> int:
    """Return the JSON bytes a conversation's memo stands for (its history's texts)."""
    texts = memo.get("texts")
    if texts is None:
        return len(memo.get("history") or ()) * UNENCODED_MESSAGE_BYTES
    return sum(map(len, texts))
