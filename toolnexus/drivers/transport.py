"""The HTTP edge of the loop: one model turn over httpx, plain or streamed.

Rule 1: this module speaks HTTP only through httpx (`httpx.Client` and
`httpx.AsyncClient`); nothing under `toolnexus/` opens a socket or parses HTTP itself.
Proxies and certificates from the environment, TLS, connection pooling, redirects,
content decoding and timeouts are httpx's job. What is ours: the endpoint (URL, headers,
the key kept out of every error), following 307/308 without handing the key to another
origin, bounds on what an answer may make us hold, and the pure decoders of `wire/`.

A client's runtime owns one `httpx.Client` and one `httpx.AsyncClient` per event loop
(`owned_client`, `owned_async_client`); a host may pass its own clients or an httpx
transport instead (`Http`). Sync and async twins share every helper but the awaits.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import AsyncIterator, Collection, Iterator, Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote

import httpx

from ..core.errors import ProviderError, excerpt, scrub_error, status_error
from ..core.frozen import FrozenMap, keep_whole
from ..core.secrets import scrub_value, scrubber
from ..core.walk import strings
from ..core.wire import inband, sse
from ..core.wire.jsonload import MAX_BYTES

__all__ = [
    "Endpoint",
    "Http",
    "Given",
    "given_http",
    "owned_client",
    "owned_async_client",
    "endpoint_url",
    "send",
    "send_stream",
    "asend",
    "asend_stream",
    "is_network",
    "TURN",
    "user_agent",
    "CONNECT_TIMEOUT",
    "MAX_REDIRECTS",
    "MAX_ANSWER_BYTES",
    "is_secret_header",
    "LARGE_ASYNC_BODY",
]

TURN = "__turn__"  # the last item of a stream: {"type": TURN, "turn": ...}
CONNECT_TIMEOUT = 5.0  # seconds to open a connection (httpx's and the SDKs' default)
MAX_REDIRECTS = 5  # 307/308 hops followed for one POST
# A whole answer is JSON the decoder refuses past MAX_BYTES: never hold more than that.
MAX_ANSWER_BYTES = MAX_BYTES
# A body this large is sent by the async verbs through the runtime's own sync client, from
# an io thread: a server may answer (413, 401...) before it has read the body and hang up,
# and httpx's AsyncClient loses that answer (asyncio closes a socket whose write failed,
# with the answer unread in it: ReadError, retried, the body sent again). About where
# loopback's socket buffers stop hiding it; text-only bodies of this size are rare.
LARGE_ASYNC_BODY = 1 << 20
# Headers that may carry a credential: dropped when a redirect leaves the origin.
_CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
# Framing headers are the transport's: a user's copy would be a second, maybe wrong, one.
_FRAMING = frozenset({"content-length", "transfer-encoding"})
_HTTPX_UA = f"python-httpx/{httpx.__version__}"  # httpx's default, replaced by ours
_HIDES_NOTHING = scrubber(())  # the scrubber of no secrets: it returns its input


@functools.cache
def user_agent() -> str:
    """Return the User-Agent we send: toolnexus/<version>.

    Read on first use, not at import: the version comes from the package metadata, whose
    machinery is a twentieth of `import toolnexus`.
    """
    from .._version import __version__

    return f"toolnexus/{__version__}"


def __getattr__(name: str) -> Any:
    # USER_AGENT stays importable (`from ...transport import USER_AGENT`), computed lazily.
    if name == "USER_AGENT":
        return user_agent()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def owned_client(proxy: str | None = None) -> httpx.Client:
    """Return the httpx.Client a runtime owns: httpx's defaults (environment proxies and
    certificates, pooling, decoding), a 5 s connect timeout and our User-Agent."""
    return httpx.Client(
        proxy=proxy,
        timeout=httpx.Timeout(120.0, connect=CONNECT_TIMEOUT),
        headers={"user-agent": user_agent()},
        follow_redirects=True,  # followed by `_open` (the key never leaves its origin)
        max_redirects=MAX_REDIRECTS,
    )


def owned_async_client(proxy: str | None = None) -> httpx.AsyncClient:
    """Return the httpx.AsyncClient a runtime owns for one event loop (as `owned_client`)."""
    return httpx.AsyncClient(
        proxy=proxy,
        timeout=httpx.Timeout(120.0, connect=CONNECT_TIMEOUT),
        headers={"user-agent": user_agent()},
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
    )


def is_network(e: BaseException) -> bool:
    """Return whether a transport error is a network failure worth retrying: the request
    failed on the network, never got a connection, or timed out (the SDKs retry their
    APITimeoutError; one the run's deadline caused is turned into its abort by the driver)."""
    retryable = httpx.NetworkError | httpx.RemoteProtocolError | httpx.TimeoutException
    return isinstance(e, retryable | ConnectionError)


def endpoint_url(base_url: str, path_of: Any, query: Mapping | None = None) -> httpx.URL:
    """Return the URL to POST to: the dialect's path after the base URL's path, the base
    URL's own query kept and `query` (default_query) merged over it.

    >>> str(endpoint_url("https://h/openai/deployments/x?api-version=1", lambda b: b + "/c"))
    'https://h/openai/deployments/x/c?api-version=1'
    """
    base = httpx.URL(base_url)
    path = httpx.URL(path_of(str(base.copy_with(query=None, fragment=None)))).raw_path
    path, _, own = path.partition(b"?")  # a dialect's own query (Gemini's alt=sse) kept
    joined = b"&".join(q for q in (base.query, own) if q)
    url = base.copy_with(raw_path=path + (b"?" + joined if joined else b""), fragment=None)
    return url.copy_merge_params(dict(query)) if query else url


def is_secret_header(name: str, also: Collection[str] = ()) -> bool:
    """Whether a header's name says it carries a credential: authorization, a `*-key`, a
    `*token*`, a cookie, or one of `also` (a client's secret_headers=), any case.

    >>> [is_secret_header(n) for n in ("X-Goog-Api-Key", "x-auth-token", "accept")]
    [True, True, False]
    """
    n = name.lower()
    return (n in _CREDENTIALS or n.endswith("-key") or "token" in n or n == "cookie"
            or n in {a.lower() for a in also})  # fmt: skip


def _basic(url: httpx.URL) -> str:
    """Return the Basic credentials of a URL's user:password@ (what httpx would send)."""
    pair = f"{unquote(url.username)}:{unquote(url.password)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def _shown(url: httpx.URL) -> str:
    # What errors and reprs say: no userinfo (a password there is Basic auth, not text).
    return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)


class Endpoint:
    """Where and how to POST: URL, headers (with the key), the codec; the key stays hidden."""

    __slots__ = ("url", "base", "target", "headers", "stream_headers", "codec", "scrub", "hides",
                 "secret_names", "stream_target")  # fmt: skip

    def __init__(self, target: Any, headers: Mapping, codec: Any, key: str | None, base: str = "",
                 secret_headers: Collection[str] = (), stream_url: Any = None):  # fmt: skip
        given = httpx.URL(target)
        # A URL's user:password@ goes as the Basic header httpx would make of it, and
        # leaves the URL: no log line (httpx's "HTTP Request:"), error or traceback that
        # prints the URL can show it.
        self.target = given.copy_with(username=None, password=None) if given.userinfo else given
        self.url, self.codec = _shown(self.target), codec
        self.stream_target = self.target.copy_with(raw_path=httpx.URL(stream_url or given).raw_path)
        self.base = _shown(httpx.URL(base)) if base else self.url  # for a client's repr
        # Normalized once; a user's framing headers are dropped (httpx sets the real ones).
        kept = {k: v for k, v in headers.items() if k.lower() not in _FRAMING}
        self.headers = httpx.Headers(kept)
        if given.userinfo:  # over any Authorization, as httpx's own URL auth would be
            self.headers["authorization"] = _basic(given)
        self.stream_headers = self.headers.copy()
        self.stream_headers["accept"] = "text/event-stream"
        # Headers that carry a credential: never sent to another origin, masked in text.
        self.secret_names = frozenset(k.lower() for k in self.headers.keys()
                                      if is_secret_header(k, secret_headers))  # fmt: skip
        # "Bearer X": X alone (a text that shows X after other words is masked from X on).
        values = [v.split(" ", 1)[-1] for k, v in self.headers.items()
                  if k.lower() in self.secret_names]  # fmt: skip
        # The key in any form, a password in the URL, and every secret header's value
        # are masked in every error text, tool result and model answer.
        password = unquote(given.password) if given.password else None
        self.scrub = scrubber((key, password, *values))
        self.hides = self.scrub is not _HIDES_NOTHING  # False: no secret (a local model)

    def __repr__(self) -> str:
        return f"Endpoint({self.url!r})"

    def failed(self, e: Exception) -> ProviderError:
        """Return the ProviderError for a transport failure (marked `network` when retryable)."""
        text = excerpt(f"{type(e).__name__}: {e}", self.scrub)
        url = self.scrub(self.url)
        return ProviderError(f"POST {url} failed: {text}", url=url, network=is_network(e))

    def too_large(self, what: str, limit: int) -> ProviderError:
        """Return the ProviderError of an answer past a bound (it was not read further)."""
        url = self.scrub(self.url)
        return ProviderError(f"POST {url}: {what} is over {limit:,} bytes: not read", url=url)

    def status_error(self, status: int, headers: Any, content: bytes) -> ProviderError:
        """Return the ProviderError of a non-2xx response (bounded, the key masked), with
        the provider's error type and code when its body is an error envelope."""
        e = status_error(self.url, status, dict(headers.items()), content, self.scrub)
        said = inband.provider_words(content)
        if said is not None:
            e.error_type, e.code = (self.scrub(x) if isinstance(x, str) else x for x in said)
        return e

    def scrubbed(self, e: ProviderError) -> ProviderError:
        """Return a decoder's ProviderError (an SSE error event may echo the key) scrubbed."""
        return scrub_error(e, self.scrub)

    def clean(self, value: Any) -> Any:
        """Return a turn (or a delta) with every form of the secrets masked: a model that
        spells out a key it read puts it in no result, transcript, log or event. A value
        with nothing to mask is returned as it is, after one quick look at its strings."""
        if type(value) is str:  # a stream's delta: one look, no walk (what the walk gives)
            return self.scrub(value)
        if not self.hides or all(self.scrub(t) is t for t in strings(value)):
            return value
        return scrub_value(value, self.scrub)

    def decode(self, status: int, content: bytes) -> FrozenMap:
        """Return the turn of a 2xx JSON response (decoded with bounded depth and size)."""
        try:
            turn = self.clean(self.codec.parse_response(content))
        except ProviderError as e:
            raise self.scrubbed(e) from None
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            text = excerpt(content.decode("utf-8", "replace"), self.scrub)
            raise ProviderError(
                f"POST {self.scrub(self.url)}: unreadable response ({type(e).__name__}): {text}",
                status=status,
                url=self.scrub(self.url),
            ) from None
        return keep_whole(turn) if sse.surrogate_free(content) else turn  # (see _Stream.whole)


class Http:
    """One httpx client as the drivers use it: sync or async, the runtime's or the host's.

    A host's client is used as given (its auth, hooks, mounts, proxies, verify, http2);
    only the run's timeouts are set per request, and our User-Agent where the client
    still sends httpx's default.
    """

    __slots__ = ("client", "asynchronous", "follow", "hops", "connect", "agent", "_timeout")

    def __init__(self, client: httpx.Client | httpx.AsyncClient):
        self.client = client
        self.asynchronous = isinstance(client, httpx.AsyncClient)
        self.follow, self.hops = client.follow_redirects, client.max_redirects
        self.connect = client.timeout.connect  # None: no bound of its own
        self.agent = client.headers.get("user-agent") == _HTTPX_UA
        self._timeout: tuple = (None, None)  # the last (seconds, timeout extension) built

    def __repr__(self) -> str:
        return f"Http({type(self.client).__name__})"

    def _timeouts(self, timeout: float) -> dict:
        # A run without a deadline posts with the same timeout every time: built once.
        last, made = self._timeout
        if last == timeout:
            return made
        connect = timeout if self.connect is None else min(self.connect, timeout)
        made = httpx.Timeout(timeout, connect=connect).as_dict()
        self._timeout = (timeout, made)
        return made

    def request(self, ep: Endpoint, content: bytes, timeout: float, stream: bool) -> httpx.Request:
        """Return the POST of a body: `timeout` bounds each read and write, and the
        connect too when the client has no shorter bound of its own."""
        headers = ep.stream_headers if stream else ep.headers
        if self.agent:
            headers = headers.copy()
            headers.setdefault("user-agent", user_agent())
        extensions = {"timeout": dict(self._timeouts(timeout))}  # a copy: hooks may change it
        target = ep.stream_target if stream else ep.target
        return self.client.build_request("POST", target, content=content, headers=headers,
                                         extensions=extensions)  # fmt: skip


class Given(NamedTuple):
    """The host's HTTP clients of a toolnexus client: what the verbs post through.

    `asynchronous` None with `sync` set: the async verbs post through the sync client
    from io threads. `sync` None: the sync verbs refuse (there is nothing they can use).
    """

    sync: Http | None
    asynchronous: Http | None


def given_http(transport: Any = None, http_client: Any = None) -> Given | None:
    """Return the host's clients from `transport=` (an httpx transport, sync, async or
    both as MockTransport is) or `http_client=` (an httpx.Client, an httpx.AsyncClient,
    or a pair of both); None when neither was given; ValueError for anything else."""
    if transport is not None and http_client is not None:
        raise ValueError("give transport= or http_client=, not both")
    if transport is not None:
        sync = hasattr(transport, "handle_request")
        asynchronous = hasattr(transport, "handle_async_request")
        if not (sync or asynchronous) or isinstance(transport, httpx.Client | httpx.AsyncClient):
            raise ValueError(
                "transport must be an httpx transport (e.g. httpx.HTTPTransport(...) or "
                f"httpx.MockTransport(handler)), got {type(transport).__name__}; "
                "an httpx.Client or AsyncClient goes in http_client="
            )
        # Around the transport, the client layer is the runtime's own (redirects, agent).
        settings = {"transport": transport, "headers": {"user-agent": user_agent()},
                    "follow_redirects": True, "max_redirects": MAX_REDIRECTS,
                    "timeout": httpx.Timeout(120.0, connect=CONNECT_TIMEOUT)}  # fmt: skip
        plain = Http(httpx.Client(**settings)) if sync else None
        awaiting = Http(httpx.AsyncClient(**settings)) if asynchronous else None
        return Given(plain, awaiting)
    if http_client is None:
        return None
    clients = list(http_client) if isinstance(http_client, list | tuple) else [http_client]
    sync = [c for c in clients if isinstance(c, httpx.Client)]
    asynchronous = [c for c in clients if isinstance(c, httpx.AsyncClient)]
    if len(sync) > 1 or len(asynchronous) > 1 or len(sync) + len(asynchronous) != len(clients):
        raise ValueError(
            "http_client must be an httpx.Client, an httpx.AsyncClient, or one of each "
            f"as a pair, got {type(http_client).__name__}"
        )
    return Given(Http(sync[0]) if sync else None,
                 Http(asynchronous[0]) if asynchronous else None)  # fmt: skip


def _next(ep: Endpoint, http: Http, resp: httpx.Response, hop: int) -> httpx.Request | None:
    """Return the request a 307/308 leads to (same method and body), or None to stop.

    httpx builds it (and drops Authorization when the origin changes); the other
    headers that carry a credential (the key's, and the secret headers a user gave) are
    dropped here too. 301/302/303 are answers, as the
    providers' SDKs read them after httpx turns them into a GET: we never re-POST there.
    """
    nxt = resp.next_request
    if nxt is None or not http.follow or resp.status_code not in (307, 308):
        return None
    if hop >= http.hops:
        raise ProviderError(
            f"POST {ep.scrub(ep.url)}: more than {http.hops} redirects", url=ep.scrub(ep.url)
        )
    if nxt.url.netloc != ep.target.netloc or nxt.url.scheme != ep.target.scheme:
        for name in _CREDENTIALS | ep.secret_names:
            nxt.headers.pop(name, None)
    return nxt


def _open(http: Http, ep: Endpoint, content: bytes, timeout: float, stream: bool) -> Any:
    request, hop = http.request(ep, content, timeout, stream), 0
    while True:
        resp = http.client.send(request, stream=True, follow_redirects=False)
        try:
            nxt = _next(ep, http, resp, hop)
        except BaseException:
            resp.close()
            raise
        if nxt is None:
            return resp
        resp.close()
        request, hop = nxt, hop + 1


async def _aopen(http: Http, ep: Endpoint, content: bytes, timeout: float, stream: bool) -> Any:
    request, hop = http.request(ep, content, timeout, stream), 0
    while True:
        resp = await http.client.send(request, stream=True, follow_redirects=False)
        try:
            nxt = _next(ep, http, resp, hop)
        except BaseException:
            await resp.aclose()
            raise
        if nxt is None:
            return resp
        await resp.aclose()
        request, hop = nxt, hop + 1


class _Bounded:
    """Collects a body's decoded bytes up to a bound (a ProviderError past it)."""

    __slots__ = ("ep", "parts", "size")

    def __init__(self, ep: Endpoint, resp: httpx.Response):
        self.ep, self.parts, self.size = ep, [], 0
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
            raise ep.too_large("the answer", MAX_ANSWER_BYTES)

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > MAX_ANSWER_BYTES:
            raise self.ep.too_large("the answer", MAX_ANSWER_BYTES)
        self.parts.append(chunk)

    def body(self) -> bytes:
        return b"".join(self.parts)


def _read(ep: Endpoint, resp: httpx.Response) -> bytes:
    bounded = _Bounded(ep, resp)
    for chunk in resp.iter_bytes():
        bounded.add(chunk)
    return bounded.body()


async def _aread(ep: Endpoint, resp: httpx.Response) -> bytes:
    bounded = _Bounded(ep, resp)
    async for chunk in resp.aiter_bytes():
        bounded.add(chunk)
    return bounded.body()


def _ok(status: int) -> bool:
    return 200 <= status < 300


def _kind(resp: httpx.Response) -> str:
    return resp.headers.get("content-type", "").split(";")[0].strip().lower()


def _stream_kind(ep: Endpoint, resp: httpx.Response) -> str:
    kind = _kind(resp)  # read once a turn: a lookup in httpx's Headers costs a few µs
    if kind and kind not in ("text/event-stream", "application/json"):
        raise ProviderError(f"POST {ep.url}: a stream was answered with {kind!r}", url=ep.url)
    return kind


def _error_body(ep: Endpoint, resp: httpx.Response) -> bytes:
    try:
        return _read(ep, resp)
    except (httpx.RequestError, ProviderError):
        return b""  # the status is the error; a body cut short or huge adds nothing


async def _aerror_body(ep: Endpoint, resp: httpx.Response) -> bytes:
    try:
        return await _aread(ep, resp)
    except (httpx.RequestError, ProviderError):
        return b""


def send(http: Http, ep: Endpoint, content: bytes, timeout: float) -> FrozenMap:
    """POST the JSON bytes of a body and return the decoded turn."""
    try:
        resp = _open(http, ep, content, timeout, False)
        try:
            if not _ok(resp.status_code):
                raise ep.status_error(resp.status_code, resp.headers, _error_body(ep, resp))
            body = _read(ep, resp)
        finally:
            resp.close()
    except httpx.RequestError as e:
        raise ep.failed(e) from None
    return ep.decode(resp.status_code, body)


async def asend(http: Http, ep: Endpoint, content: bytes, timeout: float) -> FrozenMap:
    """The async twin of `send`."""
    try:
        resp = await _aopen(http, ep, content, timeout, False)
        try:
            if not _ok(resp.status_code):
                body = await _aerror_body(ep, resp)
                raise ep.status_error(resp.status_code, resp.headers, body)
            body = await _aread(ep, resp)
        finally:
            await resp.aclose()
    except httpx.RequestError as e:
        raise ep.failed(e) from None
    return ep.decode(resp.status_code, body)


class _Stream:
    """The pure decoding state of one streamed turn: SSE decoder + dialect accumulator."""

    def __init__(self, codec: Any, clean: Any = None):
        self.codec, self.sse, self.acc = codec, sse.start(), codec.stream_start()
        self.clean = clean or (lambda value: value)  # the endpoint's secret masking
        # No event's data had a "\\u" escape: no surrogate in the turn, none to walk for.
        self.whole = True

    def feed(self, chunk: bytes) -> list[FrozenMap]:
        self.sse, events = sse.feed(self.sse, chunk)
        return self._apply(events)

    def end(self) -> list[FrozenMap]:
        out = self._apply(sse.end(self.sse))
        turn = self.clean(self.codec.stream_turn(self.acc))
        return [*out, FrozenMap({"type": TURN, "turn": keep_whole(turn) if self.whole else turn})]

    def _apply(self, events: tuple) -> list[FrozenMap]:
        out: list[FrozenMap] = []
        for ev in events:
            self.whole = self.whole and sse.surrogate_free(ev["data"])
            self.acc, deltas = self.codec.stream_event(self.acc, ev)
            # Stream events are pmaps like every value we hand out: the answer's text, a
            # model's thinking (thinking, reasoning_content), a refusal's text, each its kind.
            for d in deltas:
                if d["type"] in _SHOWN:
                    out.append(FrozenMap({"type": d["type"], "delta": self.clean(d["delta"])}))
        return out


_SHOWN = frozenset({"text", "thinking", "refusal"})  # the deltas a consumer sees


def _whole(ep: Endpoint, status: int, body: bytes) -> list[FrozenMap]:
    """Return the items of a stream request answered with one JSON body (some proxies)."""
    turn = ep.decode(status, body)
    text = [FrozenMap({"type": "text", "delta": turn["text"]})] if turn["text"] else []
    return [*text, FrozenMap({"type": TURN, "turn": turn})]


def send_stream(
    http: Http, ep: Endpoint, content: bytes, timeout: float, check: Any = None
) -> Iterator[FrozenMap]:
    """POST a streaming body; yield text deltas as they arrive, then the {TURN} item.

    `check()` runs between network chunks (a deadline or a cancel token may raise). A
    server that ignores `stream: true` and answers with JSON is read as one delta.
    """
    try:
        resp = _open(http, ep, content, timeout, True)
    except httpx.RequestError as e:
        raise ep.failed(e) from None
    try:
        if not _ok(resp.status_code):
            raise ep.status_error(resp.status_code, resp.headers, _error_body(ep, resp))
        if _stream_kind(ep, resp) == "application/json":
            yield from _whole(ep, resp.status_code, _read(ep, resp))
            return
        state = _Stream(ep.codec, ep.clean)
        for chunk in resp.iter_bytes():
            if check is not None:
                check()
            yield from state.feed(chunk)
        yield from state.end()
    except httpx.RequestError as e:
        raise ep.failed(e) from None
    except ProviderError as e:  # an SSE error event: its text may echo the key
        raise ep.scrubbed(e) from None
    finally:
        resp.close()


async def asend_stream(
    http: Http, ep: Endpoint, content: bytes, timeout: float
) -> AsyncIterator[FrozenMap]:
    """The async twin of `send_stream` (cancellation is the event loop's own)."""
    try:
        resp = await _aopen(http, ep, content, timeout, True)
    except httpx.RequestError as e:
        raise ep.failed(e) from None
    try:
        if not _ok(resp.status_code):
            body = await _aerror_body(ep, resp)
            raise ep.status_error(resp.status_code, resp.headers, body)
        if _stream_kind(ep, resp) == "application/json":
            for item in _whole(ep, resp.status_code, await _aread(ep, resp)):
                yield item
            return
        state = _Stream(ep.codec, ep.clean)
        async for chunk in resp.aiter_bytes():
            for item in state.feed(chunk):
                yield item
        for item in state.end():
            yield item
    except httpx.RequestError as e:
        raise ep.failed(e) from None
    except ProviderError as e:  # an SSE error event: its text may echo the key
        raise ep.scrubbed(e) from None
    finally:
        await resp.aclose()
