"""The chat service's model transport (benchmarks/service/pooling.py) over real loopback HTTP.

Whole answers go over http.client keep-alive connections; these tests pin what the
service relies on: answers and headers arrive for both drivers, connections are reused,
a connection the server closed while idle is replaced (not failed on), and network
failures come back as toolnexus's ProviderError / RunTimeoutError like httpcore's do.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from pathlib import Path

import pytest

from toolnexus import aask, ask, create_client, stream
from toolnexus.core.errors import ProviderError, RunTimeoutError
from toolnexus.testing import fake_provider
from toolnexus.testing.fake_provider import openai_response

pytest.importorskip("httpcore")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.service.pooling import service_transport  # noqa: E402


def client_of(url: str, **options):
    options = {"retries": 0, "api_key": "sk-secret-123", "model": "m", **options}
    return create_client(transport=service_transport(4), base_url=url, **options)


def test_whole_answers_on_both_drivers_reuse_one_connection():
    seen: list[str] = []

    def script(body, dialect):
        seen.append(body["messages"][-1]["content"])
        return {"content": "re: " + body["messages"][-1]["content"]}

    with fake_provider(script) as fp:
        client = client_of(fp.url)
        assert ask(client, "one")["text"] == "re: one"
        [(conn,)] = [tuple(free) for free in client.transport.pool.keepalive.free.values()]
        sock = conn.sock
        assert asyncio.run(aask(client, "two"))["text"] == "re: two"
        assert ask(client, "three")["text"] == "re: three"
        # the same keep-alive connection (and socket) served all three
        assert [tuple(f) for f in client.transport.pool.keepalive.free.values()] == [(conn,)]
        assert conn.sock is sock
        client.transport.pool.close()
        # the same request, byte for byte in its headers, as the default httpcore transport's
        default = create_client(base_url=fp.url, retries=0, api_key="sk-secret-123", model="m")
        ask(default, "one")
    assert seen == ["one", "two", "three", "one"]
    headers = [r["headers"] for r in fp.requests]
    assert headers[0] == headers[3] and headers[0]["Authorization"] == "Bearer sk-secret-123"
    assert [r["body"] for r in fp.requests][0] == fp.requests[3]["body"]


def test_streamed_answers_still_stream_on_the_sync_driver():
    with fake_provider(lambda body, dialect: {"content": "streamed reply"}, chunk=4) as fp:
        client = client_of(fp.url)
        deltas = [e["delta"] for e in stream(client, "hi") if e["type"] == "text"]
        client.transport.pool.close()
    assert "".join(deltas) == "streamed reply" and len(deltas) > 1
    assert fp.requests[0]["headers"]["Accept"] == "text/event-stream"


class OneShotServer:
    """Answers each connection's first request (keep-alive headers), then closes it."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.accepted = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(body) < length:
                    body += conn.recv(65536)
                payload = json.dumps(openai_response({"content": "fresh"})).encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(payload), payload)
                )
            # closed here without "connection: close": the client finds out when idle

    def __enter__(self) -> OneShotServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()


def test_a_connection_the_server_closed_while_idle_is_replaced():
    with OneShotServer() as server:
        client = client_of(server.url)
        for _ in range(3):
            # give the server's FIN time to arrive, as it would between two real requests
            threading.Event().wait(0.05)
            assert ask(client, "hi")["text"] == "fresh"
        client.transport.pool.close()
    assert server.accepted == 3


def test_refused_dropped_and_late_answers_are_provider_and_timeout_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with pytest.raises(ProviderError, match="ConnectError") as refused:
        ask(client_of(closed), "hi")
    assert "sk-secret-123" not in str(refused.value)

    def script(body, dialect):
        text = body["messages"][-1]["content"]
        return {"drop": True} if text == "drop" else {"stall": 3} if text == "slow" else {}

    with fake_provider(script) as fp:
        client = client_of(fp.url, timeout_ms=300)
        with pytest.raises(ProviderError, match="RemoteProtocolError"):
            ask(client, "drop")
        with pytest.raises(RunTimeoutError):
            ask(client, "slow")
        with pytest.raises(RunTimeoutError):
            asyncio.run(aask(client, "slow"))
        client.transport.pool.close()
