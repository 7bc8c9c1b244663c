"""The HTTP edge of the loop: one model turn over an httpx transport, plain or streamed.

Thin on purpose: bytes out through the dialect codec, bytes in through the pure
decoders of `wire/`. Sync and async twins share every helper but the awaits.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx
from pyrsistent import PMap, pmap

from .errors import ProviderError, excerpt
from .wire import sse
from .wire.common import encode_body

__all__ = ["Endpoint", "send", "send_stream", "asend", "asend_stream", "TURN"]

TURN = "__turn__"  # the last item of a stream: {"type": TURN, "turn": ...}


class Endpoint:
    """Where and how to POST: URL, headers (with the key), the codec; the key stays hidden."""

    __slots__ = ("url", "target", "headers", "codec", "_key")

    def __init__(self, url: str, headers: Mapping, codec: Any, key: str | None):
        self.url, self.target, self.codec, self._key = url, httpx.URL(url), codec, key
        # Normalized once: httpx copies a Headers object faster than it parses a dict.
        self.headers = httpx.Headers(headers)

    def __repr__(self) -> str:
        return f"Endpoint({self.url!r})"

    def request(self, body: Mapping, timeout: float, stream: bool = False) -> httpx.Request:
        """Return the httpx request for a body (streaming bodies ask for SSE)."""
        if stream:
            body = self.codec.stream_body(body)
        headers = self.headers
        if stream:
            headers = headers.copy()
            headers["accept"] = "text/event-stream"
        return httpx.Request(
            "POST",
            self.target,
            headers=headers,
            content=encode_body(body),
            extensions={"timeout": httpx.Timeout(timeout).as_dict()},
        )

    def failed(self, e: Exception) -> ProviderError:
        """Return the ProviderError for a network failure."""
        return ProviderError(f"POST {self.url} failed: {type(e).__name__}: {e}", url=self.url)

    def status_error(self, resp: httpx.Response) -> ProviderError:
        """Return the ProviderError of a non-2xx response (bounded, the key masked)."""
        text = excerpt(resp.text, (self._key,))
        return ProviderError(
            f"POST {self.url} returned {resp.status_code}: {text}",
            status=resp.status_code,
            body=text,
            url=self.url,
            headers=dict(resp.headers),
        )

    def decode(self, resp: httpx.Response) -> PMap:
        """Return the turn of a 2xx JSON response."""
        try:
            return self.codec.parse_response(json.loads(resp.content))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise ProviderError(
                f"POST {self.url}: unreadable response ({e}): {excerpt(resp.text, (self._key,))}",
                status=resp.status_code,
                url=self.url,
            ) from None


def _ok(resp: httpx.Response) -> bool:
    return 200 <= resp.status_code < 300


def send(transport: httpx.BaseTransport, ep: Endpoint, body: Mapping, timeout: float) -> PMap:
    """POST a body on the transport itself and return the decoded turn.

    httpx.Client adds cookies, auth flows, redirects and event hooks per request; an
    LLM POST needs none of them, and skipping that layer is most of our speed.
    """
    try:
        resp = transport.handle_request(ep.request(body, timeout))
        try:
            resp.read()
        finally:
            resp.close()
    except httpx.HTTPError as e:
        raise ep.failed(e) from None
    if not _ok(resp):
        raise ep.status_error(resp)
    return ep.decode(resp)


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
            # Stream events are pmaps like every other value we hand out.
            out.extend(
                pmap({"type": "text", "delta": d["delta"]}) for d in deltas if d["type"] == "text"
            )
        return out


def send_stream(
    transport: httpx.BaseTransport, ep: Endpoint, body: Mapping, timeout: float, check: Any = None
) -> Iterator[PMap]:
    """POST a streaming body; yield text deltas as they arrive, then the {TURN} item.

    `check()` runs between network chunks (a deadline or a cancel token may raise).
    """
    try:
        resp = transport.handle_request(ep.request(body, timeout, stream=True))
    except httpx.HTTPError as e:
        raise ep.failed(e) from None
    try:
        if not _ok(resp):
            resp.read()
            raise ep.status_error(resp)
        state = _Stream(ep.codec)
        try:
            for chunk in resp.iter_raw():
                if check is not None:
                    check()
                yield from state.feed(chunk)
        except httpx.HTTPError as e:
            raise ep.failed(e) from None
        yield from state.end()
    finally:
        resp.close()


async def asend(transport: httpx.AsyncBaseTransport, ep: Endpoint, body: Mapping, timeout: float):
    """The async twin of `send`."""
    try:
        resp = await transport.handle_async_request(ep.request(body, timeout))
        try:
            await resp.aread()
        finally:
            await resp.aclose()
    except httpx.HTTPError as e:
        raise ep.failed(e) from None
    if not _ok(resp):
        raise ep.status_error(resp)
    return ep.decode(resp)


async def asend_stream(
    transport: httpx.AsyncBaseTransport, ep: Endpoint, body: Mapping, timeout: float
) -> AsyncIterator[PMap]:
    """The async twin of `send_stream` (cancellation is the event loop's own)."""
    try:
        resp = await transport.handle_async_request(ep.request(body, timeout, stream=True))
    except httpx.HTTPError as e:
        raise ep.failed(e) from None
    try:
        if not _ok(resp):
            await resp.aread()
            raise ep.status_error(resp)
        state = _Stream(ep.codec)
        try:
            async for chunk in resp.aiter_raw():
                for item in state.feed(chunk):
                    yield item
        except httpx.HTTPError as e:
            raise ep.failed(e) from None
        for item in state.end():
            yield item
    finally:
        await resp.aclose()
