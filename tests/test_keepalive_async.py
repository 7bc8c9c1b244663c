"""The default async pool (toolnexus/drivers/keepalive_async.py) over real loopback HTTP.

With httptools installed, `astream` (and a host's async verbs on the default pool) send
on kept asyncio connections and read the answer as it arrives; without it, httpcore's
async pool serves them. These pin what the kept connections rely on: streams arrive in
pieces and their connection is kept only when read to the end, a stream left early or
cancelled drops its connection at once, a cut or silent server is a ProviderError or a
timeout, a connection the server closed while idle is replaced, and informational
answers are skipped.
"""

from __future__ import annotations

import asyncio

import pytest
from test_keepalive import BytesServer, _json_reply

from toolnexus import astream, create_client
from toolnexus.core.errors import ProviderError, RunTimeoutError
from toolnexus.drivers.keepalive_async import AsyncKeepAlivePool
from toolnexus.testing import fake_provider

pytest.importorskip("httptools")


def client_of(url: str, **options):
    options = {"retries": 0, "api_key": "sk-secret-123", "model": "m", **options}
    return create_client(base_url=url, **options)


def kept(client) -> list:
    """The idle connections of the running loop's default async pool."""
    pool = client.runtime.atransport().pool
    assert isinstance(pool, AsyncKeepAlivePool)
    return [conn for free in pool.free.values() for _, conn in free]


async def texts(client, prompt: str, **kw) -> str:
    return "".join([e["delta"] async for e in astream(client, prompt, **kw) if e["type"] == "text"])


def test_streams_arrive_in_pieces_on_one_kept_connection():
    with fake_provider(lambda body, dialect: {"content": "kept and streamed"}, chunk=3) as fp:
        client = client_of(fp.url)

        async def go():
            deltas = [e["delta"] async for e in astream(client, "one") if e["type"] == "text"]
            assert "".join(deltas) == "kept and streamed" and len(deltas) > 1
            [first] = kept(client)
            assert await texts(client, "two") == "kept and streamed"
            assert kept(client) == [first]  # the same connection served both

        asyncio.run(go())
        client.close()


def test_a_stream_left_early_or_cancelled_drops_its_connection():
    with fake_provider(lambda body, dialect: {"content": "z" * 3000}, chunk=40) as fp:
        client = client_of(fp.url)

        async def go():
            events = astream(client, "one")
            async for e in events:
                if e["type"] == "text":
                    break
            await events.aclose()
            assert kept(client) == []  # not kept half-read
            task = asyncio.ensure_future(texts(client, "two"))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert kept(client) == []
            assert await texts(client, "three") == "z" * 3000

        asyncio.run(go())
        client.close()


def test_a_cut_stream_is_a_provider_error_and_a_silent_one_times_out():
    def script(body, dialect):
        last = body["messages"][-1]["content"]
        return {"stall": 5} if last == "silent" else {"content": "w" * 400, "stream_drop": True}

    with fake_provider(script, chunk=20) as fp:
        client = client_of(fp.url, read_timeout_ms=300)

        async def go():
            with pytest.raises(ProviderError, match="RemoteProtocolError|ended"):
                await texts(client, "cut")
            with pytest.raises(ProviderError, match="ReadTimeout"):
                await texts(client, "silent")
            assert kept(client) == []

        asyncio.run(go())
        deadline = client_of(fp.url, timeout_ms=300)
        with pytest.raises(RunTimeoutError):
            asyncio.run(texts(deadline, "silent"))
        client.close()
        deadline.close()


def test_a_connection_closed_while_idle_is_replaced_and_1xx_answers_are_skipped():
    sse = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n"
    events = (b'data: {"choices":[{"index":0,"delta":{"content":"fresh"}}]}\n\n'
              b"data: [DONE]\n\n")  # fmt: skip
    early = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"
    replies = [(early + sse % len(events) + events, True), (_json_reply(), True)]
    with BytesServer(replies, piece=9) as server:
        client = client_of(server.url)

        async def go():
            assert await texts(client, "one") == "fresh"
            for _ in range(500):  # the server closed it (if it was kept, the loop hears so)
                if not any(conn.usable for conn in kept(client)):
                    break
                await asyncio.sleep(0.01)
            assert await texts(client, "two") == "fine"  # a JSON answer on a new connection

        asyncio.run(go())
        client.close()
    assert server.accepted == 2


def test_what_arrives_while_the_caller_holds_a_chunk_is_never_lost():
    """Fails before the fix (found by the service's load test in CI): when the rest of a
    streamed answer, and its end, arrived while the caller was busy with a chunk, the
    rest was dropped and the answer ended short."""
    import threading

    import httpcore

    rest_sent = threading.Event()
    body = b"".join(b"data: piece %d\n\n" % i for i in range(50))
    first, rest = body[:20], body[20:]
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n"

    class TwoParts(BytesServer):
        def answer(self, conn):
            conn.recv(65536)
            conn.sendall(head % len(body) + first)
            self.go.wait(30)
            conn.sendall(rest)
            rest_sent.set()
            conn.recv(1)  # until the client closes

    with TwoParts([(b"", True)]) as server:
        server.go = threading.Event()
        url = httpcore.URL(server.url + "/chat/completions")

        async def go() -> bytes:
            pool = AsyncKeepAlivePool(None, 5, 5.0)
            request = httpcore.Request(b"POST", url, headers=[(b"Host", b"x"),
                                       (b"Accept", b"text/event-stream")])  # fmt: skip
            response = await pool.handle_async_request(request)
            got, stream = [], response.stream
            async for chunk in stream:
                got.append(chunk)
                if len(got) == 1:  # hold the first chunk until the rest is in, and its end
                    server.go.set()
                    while not stream.conn.reader.complete:
                        await asyncio.sleep(0.001)
            await pool.aclose()
            return b"".join(got)

        assert asyncio.run(go()) == body
        assert rest_sent.is_set()


def test_a_loop_that_ends_closes_its_kept_connections():
    """`asyncio.run(aask(...))` again and again (a script, a notebook): each loop's kept
    connection is closed when that loop shuts down, not left to the garbage collector
    (an unclosed transport and a ResourceWarning each)."""
    import gc
    import warnings

    with fake_provider(lambda body, dialect: {"content": "ok"}) as fp:
        client = client_of(fp.url)

        async def once():
            from toolnexus import aask

            assert (await aask(client, "hi"))["text"] == "ok"
            return kept(client)

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(3):
                [conn] = asyncio.run(once())
                assert conn.transport.is_closing()  # closed as its loop shut down
            client.close()
            gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)], seen
