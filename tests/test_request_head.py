"""The head of a whole-answer POST (drivers/keepalive.request_head), as a property."""

from __future__ import annotations

import httpcore
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.drivers.keepalive import request_head

httptools = pytest.importorskip("httptools")

TOKEN = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_",
                min_size=1, max_size=20).map(str.encode)  # fmt: skip
# Visible bytes, spaces and tabs inside (a value's edges are trimmed by any parser).
VALUE = st.binary(max_size=40).map(lambda v: bytes(b for b in v if b == 9 or 32 <= b != 127))
VALUE = VALUE.map(lambda v: v.strip(b" \t"))
CONTROL = st.sampled_from([b"\r", b"\n", b"\r\n", b"\x00", b"\x01", b"\x1f", b"\x7f"])


class _Seen:
    def __init__(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.url = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))


@given(st.lists(st.tuples(TOKEN, VALUE), max_size=8), TOKEN)
def test_a_head_is_the_request_an_http_parser_reads_back(headers, path):
    target = b"/" + path
    seen = _Seen()
    httptools.HttpRequestParser(seen).feed_data(request_head(b"POST", target, headers) + b"\r\n")
    assert seen.url == target and seen.headers == headers


@given(TOKEN, VALUE, CONTROL, VALUE)
def test_a_control_byte_in_a_header_is_refused(name, before, brk, after):
    with pytest.raises(httpcore.LocalProtocolError):
        request_head(b"POST", b"/v1", [(name, before + brk + after)])
    with pytest.raises(httpcore.LocalProtocolError):
        request_head(b"POST", b"/v1", [(name + brk + b"x", b"v")])
    with pytest.raises(httpcore.LocalProtocolError):
        request_head(b"POST", b"/v1", [(name + b":" + name, b"v")])  # not a token
