"""The default transport (toolnexus/drivers/keepalive.py) over real loopback HTTP.

Whole answers go over http.client keep-alive connections (for the async driver too, in
an io thread); these tests pin what that relies on: answers and headers arrive for both
drivers, connections are reused, a connection the server closed while idle or kept past
its expiry is replaced (not failed on), and network failures come back as ProviderError
/ RunTimeoutError like httpcore's do.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import threading
import time

import httpcore
import pytest

from toolnexus import aask, ask, create_client, stream
from toolnexus.core.errors import ProviderError, RunTimeoutError
from toolnexus.drivers.keepalive import KeepAlivePool
from toolnexus.testing import fake_provider
from toolnexus.testing.fake_provider import openai_response


def client_of(url: str, **options):
    options = {"retries": 0, "api_key": "sk-secret-123", "model": "m", **options}
    return create_client(base_url=url, **options)


def idle_of(client):
    """The idle keep-alive connections of a client's default pool."""
    pool = client.runtime.transport().pool
    assert isinstance(pool, KeepAlivePool)
    return [tuple(c for _, c in free) for free in pool.idle.free.values()]


def test_whole_answers_on_both_drivers_reuse_one_connection():
    seen: list[str] = []

    def script(body, dialect):
        seen.append(body["messages"][-1]["content"])
        return {"content": "re: " + body["messages"][-1]["content"]}

    with fake_provider(script) as fp:
        client = client_of(fp.url)
        assert ask(client, "one")["text"] == "re: one"
        [(conn,)] = idle_of(client)
        sock = conn.sock
        assert asyncio.run(aask(client, "two"))["text"] == "re: two"
        assert ask(client, "three")["text"] == "re: three"
        # the same keep-alive connection (and socket) served all three
        assert idle_of(client) == [(conn,)]
        assert conn.sock is sock
        client.close()
        # the same request, byte for byte in its headers, as httpcore's own pool sends
        pool = httpcore.ConnectionPool()
        ask(create_client(base_url=fp.url, retries=0, api_key="sk-secret-123", model="m",
                          transport=pool), "one")  # fmt: skip
        pool.close()
    assert seen == ["one", "two", "three", "one"]
    headers = [r["headers"] for r in fp.requests]
    assert headers[0] == headers[3] and headers[0]["Authorization"] == "Bearer sk-secret-123"
    assert [r["body"] for r in fp.requests][0] == fp.requests[3]["body"]


def test_streamed_answers_still_stream_on_the_sync_driver():
    with fake_provider(lambda body, dialect: {"content": "streamed reply"}, chunk=4) as fp:
        client = client_of(fp.url)
        deltas = [e["delta"] for e in stream(client, "hi") if e["type"] == "text"]
        client.close()
    assert "".join(deltas) == "streamed reply" and len(deltas) > 1
    assert fp.requests[0]["headers"]["Accept"] == "text/event-stream"


class OneShotServer:
    """Answers each connection's first request (keep-alive headers), then closes it."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.accepted = 0
        self.closed = threading.Semaphore(0)  # released after each connection is closed
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
            self.closed.release()
            # closed here without "connection: close": the client finds out when idle

    def __enter__(self) -> OneShotServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()


def test_a_connection_the_server_closed_while_idle_is_replaced():
    with OneShotServer() as server:
        client = client_of(server.url)
        for n in range(3):
            if n:  # the server closed the last connection: wait until its FIN is here
                assert server.closed.acquire(timeout=30)
                [(conn,)] = idle_of(client)
                assert select.select([conn.sock], [], [], 30)[0]
            assert ask(client, "hi")["text"] == "fresh"
        client.close()
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
        client.close()


def test_an_idle_connection_past_its_expiry_is_not_reused():
    with fake_provider(lambda body, dialect: {"content": "ok"}) as fp:
        client = client_of(fp.url)
        ask(client, "one")
        [(first,)] = idle_of(client)
        ask(client, "two")
        assert idle_of(client) == [(first,)]  # reused while fresh
        client.runtime.transport().pool.idle.expiry = 0.0
        ask(client, "three")
        [(second,)] = idle_of(client)
        assert second is not first and first.sock is None  # the expired one was closed
        client.close()


def test_a_cancelled_aask_stops_waiting_for_a_whole_answer_at_once():
    # The POST runs in an io thread: cancelling the run must not wait for its answer.
    with fake_provider(lambda body, dialect: {"stall": 120}) as fp:
        client = client_of(fp.url)

        async def cancel_while_waiting() -> float:
            task = asyncio.ensure_future(aask(client, "slow"))
            while not fp.requests:  # the request reached the server: it is waiting now
                await asyncio.sleep(0.01)
            start = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - start

        assert asyncio.run(cancel_while_waiting()) < 30  # the answer would take 120 s
        client.close()


def test_a_host_async_transport_still_serves_aask():
    import httpx

    seen = []

    async def handler(request):
        seen.append(request.url.path)
        return httpx.Response(200, json=openai_response({"content": "mocked"}))

    client = create_client(base_url="http://model.test/v1", api_key="k", model="m",
                           transport=httpx.MockTransport(handler))  # fmt: skip
    assert asyncio.run(aask(client, "hi"))["text"] == "mocked" and seen == ["/v1/chat/completions"]
