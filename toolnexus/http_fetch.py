"""The effects of an HTTP tool's call: where it may go, and a bounded exchange.

The model chooses an HTTP tool's arguments, and whatever it read may have chosen them,
so every call here is held to the operator's declaration:
- the address: a host outside `allow_hosts` is refused, and so is a host that resolves
  to a private, loopback, link-local or otherwise non-public address, unless the tool
  says `allow_private=True` (checked before connecting; a DNS answer that changes between
  the check and the connection is not caught: an egress proxy is the place for that);
- redirects: none followed unless the tool asks (`follow_redirects=N`), and then only
  to the same origin (scheme, host, port), at most N hops, so a header never reaches
  another origin;
- the answer: at most `max_bytes` after decoding (a gzip bomb stops at the bound, never
  inflated whole) and at most `timeout` seconds for the whole exchange (a slow drip of
  bytes stops at the deadline, not at each read's timeout);
- state: each call uses a fresh httpx.Client, closed after it, so no cookie or
  connection passes from one run (or user, or tenant) to the next; a host's own client
  (`http_client=`) is used as given, its cookie jar included.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

__all__ = ["Limits", "Refused", "address_refusal", "exchange", "same_origin", "origin"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_ACCEPT_ENCODING = "gzip, deflate"  # what `_inflate` reads, bounded


class Limits(NamedTuple):
    """What one HTTP tool allows a call (from its declaration)."""

    timeout: float  # seconds for the whole exchange, redirects included
    max_bytes: int  # of the answer, after decoding
    hops: int  # same-origin redirects followed (0: none)
    allow_hosts: frozenset[str] | None  # None: any host (the address check still applies)
    allow_private: bool


class Refused(Exception):
    """A call the declaration does not allow: its message is the model's error result."""


def origin(url: Any) -> tuple[str, str, int | None]:
    """Return the (scheme, host, port) of an httpx.URL, default ports filled in."""
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host.lower(), port)


def same_origin(a: Any, b: Any) -> bool:
    """Return whether two httpx.URLs share scheme, host and port."""
    return origin(a) == origin(b)


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is loopback
    return ip.is_global and not ip.is_multicast


def address_refusal(
    host: str, port: int | None, resolve: Callable[..., list] = socket.getaddrinfo
) -> str | None:
    """Return why `host` may not be reached (it resolves to a non-public address), or None.

    >>> address_refusal("127.0.0.1", 80)
    'the address of 127.0.0.1 is not public (127.0.0.1): refused (allow_private allows it)'
    >>> address_refusal("93.184.215.14", 443) is None
    True
    """
    try:
        infos = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        return f"cannot resolve {host}: {e}"
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not _public(ip):
            return f"the address of {host} is not public ({ip}): refused (allow_private allows it)"
    return None


def check_target(url: Any, limits: Limits) -> None:
    """Raise Refused when the declaration does not allow a request to `url`."""
    host = url.host.lower()
    if limits.allow_hosts is not None and host not in limits.allow_hosts:
        raise Refused(f"host {host} is not among the tool's allowed hosts")
    if not limits.allow_private:
        why = address_refusal(host, origin(url)[2])
        if why is not None:
            raise Refused(why)


def _inflate(raw: Iterator[bytes], encoding: str, room: int) -> Iterator[bytes]:
    """Yield the decoded bytes of an answer, never more than `room` + 1 of them."""
    if encoding in ("", "identity"):
        yield from raw
        return
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise Refused(f"the answer's content-encoding {encoding!r} is not one this tool reads")
    d = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, told by the header
    for chunk in raw:
        data = chunk
        while data and room >= 0:
            out = d.decompress(data, room + 1)  # bounded: a bomb never inflates whole
            room -= len(out)
            yield out
            data = d.unconsumed_tail
        if room < 0:
            return


def read_bounded(resp: Any, limits: Limits, deadline: float) -> bytes:
    """Return the decoded body of a streamed httpx.Response, or raise Refused at a bound."""
    encoding = resp.headers.get("content-encoding", "").strip().lower()
    pieces, size = [], 0
    try:
        for piece in _inflate(resp.iter_raw(), encoding, limits.max_bytes):
            size += len(piece)
            if size > limits.max_bytes:
                raise Refused(f"the answer is over {limits.max_bytes:,} bytes: not read further")
            if time.monotonic() > deadline:
                raise Refused(f"the answer took over {limits.timeout:g} s: not read further")
            pieces.append(piece)
    except zlib.error as e:
        raise Refused(f"the answer's {encoding} encoding is broken ({e})") from None
    return b"".join(pieces)


def _open(client: Any, request: Any, limits: Limits, deadline: float) -> Any:
    """Send `request` and follow same-origin redirects within the hops; return the last
    streamed response (the caller closes it)."""
    first = request.url
    for hop in range(limits.hops + 1):
        resp = client.send(request, stream=True, follow_redirects=False)
        nxt = resp.next_request if resp.status_code in _REDIRECTS else None
        if nxt is None or hop == limits.hops or time.monotonic() > deadline:
            return resp
        if not same_origin(nxt.url, first):
            return resp  # the 3xx itself is the answer: nothing leaves the origin
        resp.close()
        request = nxt
    return resp  # not reached: the loop returns on its last hop


class Answer(NamedTuple):
    """A finished exchange: status, decoded body and the text's charset."""

    status: int
    body: bytes
    charset: str
    redirect: bool  # a 3xx not followed


def exchange(client: Any, request: Any, limits: Limits) -> Answer:
    """Run one bounded exchange on `client` (redirects as allowed); raise Refused at a
    bound and httpx's errors as they are."""
    deadline = time.monotonic() + limits.timeout
    resp = _open(client, request, limits, deadline)
    try:
        body = read_bounded(resp, limits, deadline)
    finally:
        resp.close()
    redirect = resp.status_code in _REDIRECTS
    return Answer(resp.status_code, body, resp.charset_encoding or "utf-8", redirect)


class Clients:
    """Fresh httpx.Clients for one tool's calls, sharing only an SSL context (which
    holds configuration, no state of a run); made lazily, so `import` stays light."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._ssl: Any = None
        self._lock = threading.Lock()

    def new(self) -> Any:
        """Return a new httpx.Client (the caller closes it): no redirects, no pool kept."""
        import httpx

        with self._lock:
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
        return httpx.Client(timeout=self.timeout, follow_redirects=False, verify=self._ssl)


def request_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Return the headers a call sends: the declared ones, and the encodings we decode."""
    out = dict(headers)
    if not any(k.lower() == "accept-encoding" for k in out):
        out["Accept-Encoding"] = _ACCEPT_ENCODING
    return out
