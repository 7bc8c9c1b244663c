"""The HTTP edge of the loop: one model turn over a pooled transport, plain or streamed.

Thin on purpose: bytes out through the dialect codec, bytes in through the pure
decoders of `wire/`. Sync and async twins share every helper but the awaits.

A client's default transport speaks httpcore's interface, built with
httpx.HTTPTransport's settings and called directly, which skips converting each request
and response between httpx's models and httpcore's (a fifth of a POST's CPU): whole
answers go over http.client keep-alive connections, streams over an httpcore pool
(keepalive.py). The async driver sends whole answers over that sync pool in an io
thread, and streams over an httpcore async pool per event loop.
A host may pass either kind: an httpx transport (e.g. MockTransport) gets httpx
requests; anything else is spoken to as an httpcore pool (handle_request or
handle_async_request over httpcore.Request). `as_transport` wraps either, once, in the
one interface the drivers use (`Transport`): no per-call checks of what it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from functools import cache
from typing import Any

import httpx
from pyrsistent import PMap, pmap

from ..core.errors import ProviderError, excerpt, scrub_error, status_error
from ..core.secrets import scrubber
from ..core.wire import sse

__all__ = [
    "Endpoint",
    "Transport",
    "as_transport",
    "send",
    "send_stream",
    "asend",
    "asend_stream",
    "default_transport",
    "default_async_transport",
    "transport_errors",
    "is_network",
    "TURN",
]

TURN = "__turn__"  # the last item of a stream: {"type": TURN, "turn": ...}

# httpx.HTTPTransport's pool settings, so the default behaves as httpx's would.
_POOL = {"max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0}


def default_transport() -> Any:
    """Return a new pooled sync transport (whole answers on http.client keep-alive
    connections, streams on an httpcore pool; set up as httpx.HTTPTransport's)."""
    from .keepalive import KeepAlivePool  # with the first client: `import toolnexus` stays light

    return KeepAlivePool(httpx.create_ssl_context(), **_POOL)


def default_async_transport() -> Any:
    """Return a new pooled async transport (one per event loop: connections belong to it):
    kept asyncio connections read by httptools when it is installed, else httpcore's."""
    from . import keepalive

    if keepalive.httptools is not None:
        from .keepalive_async import AsyncKeepAlivePool

        return AsyncKeepAlivePool(httpx.create_ssl_context(), _POOL["max_keepalive_connections"],
                                  _POOL["keepalive_expiry"])  # fmt: skip
    import httpcore

    return httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(), **_POOL)


def is_network(e: BaseException) -> bool:
    """Return whether a transport error is a network failure worth retrying (not a timeout)."""
    import httpcore

    network = (httpx.NetworkError, httpx.RemoteProtocolError, httpcore.NetworkError,
               httpcore.RemoteProtocolError, ConnectionError)  # fmt: skip
    return isinstance(e, network)


@cache
def transport_errors() -> tuple[type[Exception], ...]:
    """Return the exception types that mean the request failed on the network or protocol."""
    import httpcore

    return (
        httpx.TransportError,
        httpcore.TimeoutException,
        httpcore.NetworkError,
        httpcore.ProtocolError,
        httpcore.UnsupportedProtocol,
        httpcore.ProxyError,
    )


class Endpoint:
    """Where and how to POST: URL, headers (with the key), the codec; the key stays hidden."""

    __slots__ = ("url", "target", "headers", "codec", "_core", "_post", "scrub")

    def __init__(self, url: str, headers: Mapping, codec: Any, key: str | None):
        # The key is kept only in the headers and, for masking, inside the scrubber.
        self.url, self.target, self.codec = url, httpx.URL(url), codec
        # Normalized once: httpx copies a Headers object faster than it parses a dict.
        self.headers = httpx.Headers(headers)
        self._core: tuple | None = None  # (httpcore URL, headers, streaming headers)
        self._post: tuple | None = None  # (httpcore URL, a whole-answer POST's head)
        # Every text an error carries passes through this: the key in any form is masked.
        self.scrub = scrubber((key,))

    def __repr__(self) -> str:
        return f"Endpoint({self.url!r})"

    def request(self, content: bytes, timeout: float, stream: bool = False) -> httpx.Request:
        """Return the httpx request of a body, for a host's httpx transport."""
        headers = self.headers
        if stream:
            headers = headers.copy()
            headers["accept"] = "text/event-stream"
        return httpx.Request(
            "POST",
            self.target,
            headers=headers,
            content=content,
            extensions={"timeout": httpx.Timeout(timeout).as_dict()},
        )

    def core_request(self, content: bytes, timeout: float, stream: bool = False) -> Any:
        """Return the httpcore request of a body, for the default pool."""
        url, plain, streaming = self._parts()
        import httpcore

        length = (b"Content-Length", str(len(content)).encode())
        return httpcore.Request(
            b"POST",
            url,
            headers=[*(streaming if stream else plain), length],
            content=content,
            extensions={"timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout)},
        )

    def head(self) -> tuple:
        """Return (the httpcore URL, the request line and headers of a whole-answer POST
        without Content-Length): for a pool's `post_whole`, checked and built once."""
        if self._post is None:
            from .keepalive import request_head

            url, plain, _ = self._parts()
            self._post = (url, request_head(b"POST", url.target, plain))
        return self._post

    def _parts(self) -> tuple:
        if self._core is None:  # made on first use, the same each time (races are harmless)
            self._core = self._core_parts()
        return self._core

    def _core_parts(self) -> tuple:
        import httpcore

        t = self.target
        url = httpcore.URL(scheme=t.raw_scheme, host=t.raw_host, port=t.port, target=t.raw_path)
        # httpx.Request adds Host from the URL; a bare httpcore request must say it itself.
        plain = [(b"Host", t.netloc), *self.headers.raw]
        accept = [(k, v) for k, v in plain if k.lower() != b"accept"]
        return url, plain, [*accept, (b"Accept", b"text/event-stream")]

    def failed(self, e: Exception) -> ProviderError:
        """Return the ProviderError for a transport failure (marked `network` when retryable)."""
        text = excerpt(f"{type(e).__name__}: {e}", self.scrub)
        url = self.scrub(self.url)
        return ProviderError(f"POST {url} failed: {text}", url=url, network=is_network(e))

    def status_error(self, status: int, headers: Any, content: bytes) -> ProviderError:
        """Return the ProviderError of a non-2xx response (bounded, the key masked)."""
        return status_error(self.url, status, _header_dict(headers), content, self.scrub)

    def scrubbed(self, e: ProviderError) -> ProviderError:
        """Return a decoder's ProviderError (an SSE error event may echo the key) scrubbed."""
        return scrub_error(e, self.scrub)

    def decode(self, status: int, content: bytes) -> PMap:
        """Return the turn of a 2xx JSON response (decoded with bounded depth and size)."""
        try:
            return self.codec.parse_response(content)
        except ProviderError as e:
            raise self.scrubbed(e) from None
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            text = excerpt(content.decode("utf-8", "replace"), self.scrub)
            raise ProviderError(
                f"POST {self.scrub(self.url)}: unreadable response ({type(e).__name__}): {text}",
                status=status,
                url=self.scrub(self.url),
            ) from None


def _header_dict(headers: Any) -> dict:
    # httpx.Headers or httpcore's [(bytes, bytes)]: names lower-cased, as httpx shows them.
    items = headers.items() if hasattr(headers, "items") else headers
    return {
        (k.decode("latin-1") if isinstance(k, bytes) else k).lower(): (
            v.decode("latin-1") if isinstance(v, bytes) else v
        )
        for k, v in items
    }


class Transport:
    """The one interface the drivers post through: a pool of connections, sync or async.

    `open`/`aopen` return (status, headers dict, response); `chunks`, `read`, `close`
    (and their async twins) read and free the response.
    """

    __slots__ = ("pool", "httpx", "sync", "asynchronous", "post_whole", "apost_whole")

    def __init__(self, pool: Any):
        self.pool = pool
        self.httpx = isinstance(pool, (httpx.BaseTransport, httpx.AsyncBaseTransport))
        self.sync = hasattr(pool, "handle_request")
        self.asynchronous = hasattr(pool, "handle_async_request")
        # The default pool's own path for whole answers (keepalive.KeepAlivePool).
        self.post_whole = None if self.httpx else getattr(pool, "post_whole", None)
        self.apost_whole = None if self.httpx else getattr(pool, "apost_whole", None)

    def whole(self, ep: Endpoint, content: bytes, timeout: float) -> tuple:
        """POST and read the answer whole: (status, headers, body)."""
        if self.post_whole is not None:
            status, headers, body = self.post_whole(*ep.head(), content, timeout)
            return status, _header_dict(headers), body
        status, headers, resp = self.open(ep, content, timeout, False)
        try:
            return status, headers, resp.read()
        finally:
            resp.close()

    def _request(self, ep: Endpoint, content: bytes, timeout: float, stream: bool) -> Any:
        if self.httpx:
            return ep.request(content, timeout, stream)
        return ep.core_request(content, timeout, stream)

    def open(self, ep: Endpoint, content: bytes, timeout: float, stream: bool) -> tuple:
        """POST; return (status, headers, response) with the body unread."""
        resp = self.pool.handle_request(self._request(ep, content, timeout, stream))
        status = resp.status_code if self.httpx else resp.status
        return status, _header_dict(resp.headers), resp

    async def awhole(self, ep: Endpoint, content: bytes, timeout: float) -> tuple:
        """The async twin of `whole`."""
        if self.apost_whole is not None:
            status, headers, body = await self.apost_whole(*ep.head(), content, timeout)
            return status, _header_dict(headers), body
        status, headers, resp = await self.aopen(ep, content, timeout, False)
        try:
            return status, headers, await resp.aread()
        finally:
            await resp.aclose()

    async def aopen(self, ep: Endpoint, content: bytes, timeout: float, stream: bool) -> tuple:
        """The async twin of `open`."""
        resp = await self.pool.handle_async_request(self._request(ep, content, timeout, stream))
        status = resp.status_code if self.httpx else resp.status
        return status, _header_dict(resp.headers), resp

    def chunks(self, resp: Any) -> Iterator[bytes]:
        """Return the response's body chunks as they arrive."""
        return resp.iter_raw() if self.httpx else resp.iter_stream()

    def achunks(self, resp: Any) -> AsyncIterator[bytes]:
        """The async twin of `chunks`."""
        return resp.aiter_raw() if self.httpx else resp.aiter_stream()

    def close(self) -> None:
        """Close the pool's connections."""
        close = getattr(self.pool, "close", None)
        if close is not None:
            close()

    async def aclose(self) -> None:
        """Close an async pool's connections."""
        close = getattr(self.pool, "aclose", None)
        if close is not None:
            await close()


def as_transport(given: Any) -> Transport:
    """Return `given` (an httpx transport or an httpcore pool) as a Transport; else ValueError."""
    if isinstance(given, Transport):
        return given
    if not (hasattr(given, "handle_request") or hasattr(given, "handle_async_request")):
        raise ValueError(
            "transport must be an httpx transport (e.g. httpx.HTTPTransport()) or an "
            f"httpcore connection pool, got {type(given).__name__}"
        )
    return Transport(given)


def _ok(status: int) -> bool:
    return 200 <= status < 300


def _is_json(headers: Mapping) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"


def _check_stream_type(ep: Endpoint, headers: Mapping) -> None:
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind not in ("text/event-stream", "application/json"):
        raise ProviderError(f"POST {ep.url}: a stream was answered with {kind!r}", url=ep.url)


def send(transport: Transport, ep: Endpoint, content: bytes, timeout: float) -> PMap:
    """POST the JSON bytes of a body and return the decoded turn.

    httpx.Client adds cookies, auth flows, redirects and event hooks per request; an
    LLM POST needs none of them, and skipping that layer is most of our speed.
    """
    try:
        status, headers, body = transport.whole(ep, content, timeout)
    except transport_errors() as e:
        raise ep.failed(e) from None
    if not _ok(status):
        raise ep.status_error(status, headers, body)
    return ep.decode(status, body)


class _Stream:
    """The pure decoding state of one streamed turn: SSE decoder + dialect accumulator."""

    def __init__(self, codec: Any):
        self.codec, self.sse, self.acc = codec, sse.start(), codec.stream_start()

    def feed(self, chunk: bytes) -> list[PMap]:
        self.sse, events = sse.feed(self.sse, chunk)
        return self._apply(events)

    def end(self) -> list[PMap]:
        out = self._apply(sse.end(self.sse))
        return [*out, pmap({"type": TURN, "turn": self.codec.stream_turn(self.acc)})]

    def _apply(self, events: tuple) -> list[PMap]:
        out: list[PMap] = []
        for ev in events:
            self.acc, deltas = self.codec.stream_event(self.acc, ev)
            # Stream events are pmaps like every other value we hand out: the answer's
            # text, a model's thinking (Anthropic thinking, reasoning_content) and a
            # refusal's text, each of its own kind.
            out.extend(
                pmap({"type": d["type"], "delta": d["delta"]})
                for d in deltas
                if d["type"] in _SHOWN
            )
        return out


_SHOWN = frozenset({"text", "thinking", "refusal"})  # the deltas a consumer sees


def _whole(ep: Endpoint, status: int, body: bytes) -> list[PMap]:
    """Return the items of a stream request answered with one JSON body (some proxies)."""
    turn = ep.decode(status, body)
    text = [pmap({"type": "text", "delta": turn["text"]})] if turn["text"] else []
    return [*text, pmap({"type": TURN, "turn": turn})]


def send_stream(
    transport: Transport, ep: Endpoint, content: bytes, timeout: float, check: Any = None
) -> Iterator[PMap]:
    """POST a streaming body; yield text deltas as they arrive, then the {TURN} item.

    `check()` runs between network chunks (a deadline or a cancel token may raise). A
    server that ignores `stream: true` and answers with JSON is read as one delta.
    """
    try:
        status, headers, resp = transport.open(ep, content, timeout, True)
    except transport_errors() as e:
        raise ep.failed(e) from None
    try:
        if not _ok(status):
            raise ep.status_error(status, headers, _read_error(resp))
        _check_stream_type(ep, headers)
        try:
            if _is_json(headers):
                yield from _whole(ep, status, resp.read())
                return
            state = _Stream(ep.codec)
            for chunk in transport.chunks(resp):
                if check is not None:
                    check()
                yield from state.feed(chunk)
            yield from state.end()
        except transport_errors() as e:
            raise ep.failed(e) from None
        except ProviderError as e:  # an SSE error event: its text may echo the key
            raise ep.scrubbed(e) from None
    finally:
        resp.close()


def _read_error(resp: Any) -> bytes:
    try:
        return resp.read()
    except transport_errors():
        return b""  # the status is the error; a body cut short adds nothing


async def _aread_error(resp: Any) -> bytes:
    try:
        return await resp.aread()
    except transport_errors():
        return b""


async def asend(transport: Transport, ep: Endpoint, content: bytes, timeout: float) -> PMap:
    """The async twin of `send`."""
    try:
        status, headers, body = await transport.awhole(ep, content, timeout)
    except transport_errors() as e:
        raise ep.failed(e) from None
    if not _ok(status):
        raise ep.status_error(status, headers, body)
    return ep.decode(status, body)


async def asend_stream(
    transport: Transport, ep: Endpoint, content: bytes, timeout: float
) -> AsyncIterator[PMap]:
    """The async twin of `send_stream` (cancellation is the event loop's own)."""
    try:
        status, headers, resp = await transport.aopen(ep, content, timeout, True)
    except transport_errors() as e:
        raise ep.failed(e) from None
    try:
        if not _ok(status):
            raise ep.status_error(status, headers, await _aread_error(resp))
        _check_stream_type(ep, headers)
        try:
            if _is_json(headers):
                for item in _whole(ep, status, await resp.aread()):
                    yield item
                return
            state = _Stream(ep.codec)
            async for chunk in transport.achunks(resp):
                for item in state.feed(chunk):
                    yield item
            for item in state.end():
                yield item
        except transport_errors() as e:
            raise ep.failed(e) from None
        except ProviderError as e:  # an SSE error event: its text may echo the key
            raise ep.scrubbed(e) from None
    finally:
        await resp.aclose()
