"""The default transport (toolnexus/drivers/keepalive.py) over real loopback HTTP.

Whole answers go over keep-alive sockets (for the async driver too, in an io thread),
read by httptools when it is installed, else by http.client: every test here runs with
each reader. They pin what that relies on: answers and headers arrive for both drivers,
connections are reused, a connection the server closed while idle or kept past its
expiry is replaced (not failed on), every way HTTP/1.1 ends a body is read (length,
chunks, the server closing), and network and protocol failures come back as
ProviderError / RunTimeoutError like httpcore's do.
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
from toolnexus.drivers import keepalive
from toolnexus.drivers.keepalive import KeepAlivePool
from toolnexus.testing import fake_provider
from toolnexus.testing.fake_provider import openai_response


@pytest.fixture(autouse=True, params=["httptools", "stdlib"])
def reader(request, monkeypatch):
    """Each test with each answer reader: stdlib is what a machine without httptools gets."""
    if request.param == "stdlib":
        monkeypatch.setattr(keepalive, "httptools", None)
    return request.param


def client_of(url: str, **options):
    options = {"retries": 0, "api_key": "sk-secret-123", "model": "m", **options}
    return create_client(base_url=url, **options)


def idle_of(client):
    """The idle keep-alive connections of a client's default pool."""
    pool = client.runtime.transport().pool
    assert isinstance(pool, KeepAlivePool)
    return [tuple(c for _, c in free) for free in pool.idle.free.values()]


def test_the_reader_is_the_one_installed(reader):
    client = client_of("http://127.0.0.1:9/v1")
    read = client.runtime.transport().pool.read
    assert read is {"httptools": keepalive.read_httptools, "stdlib": keepalive.read_stdlib}[reader]


def test_whole_answers_on_both_drivers_reuse_their_connections(reader):
    """The sync driver keeps its connection; `aask` keeps one on the event loop's kept
    connections with httptools (no thread), else it posts on the sync pool's in an io
    thread. Each reuses its own."""
    seen: list[str] = []

    def script(body, dialect):
        seen.append(body["messages"][-1]["content"])
        return {"content": "re: " + body["messages"][-1]["content"]}

    async def twice() -> list:
        assert (await aask(client, "two"))["text"] == "re: two"
        assert (await aask(client, "two again"))["text"] == "re: two again"
        pool = client.runtime.atransport().pool
        return [c for free in getattr(pool, "free", {}).values() for _, c in free]

    with fake_provider(script) as fp:
        client = client_of(fp.url)
        assert ask(client, "one")["text"] == "re: one"
        [(conn,)] = idle_of(client)
        sock = conn.sock
        async_kept = asyncio.run(twice())
        assert len(async_kept) == (1 if reader == "httptools" else 0)
        assert ask(client, "three")["text"] == "re: three"
        # the same keep-alive connection (and socket) served every sync answer
        assert idle_of(client) == [(conn,)]
        assert conn.sock is sock
        client.close()
        # the same request, byte for byte in its headers, as httpcore's own pool sends
        pool = httpcore.ConnectionPool()
        ask(create_client(base_url=fp.url, retries=0, api_key="sk-secret-123", model="m",
                          transport=pool), "one")  # fmt: skip
        pool.close()
    assert seen == ["one", "two", "two again", "three", "one"]
    headers = [r["headers"] for r in fp.requests]
    assert headers[0] == headers[4] == headers[1] and "Bearer sk-secret-123" in str(headers[0])
    assert [r["body"] for r in fp.requests][0] == fp.requests[4]["body"]


def test_streamed_answers_still_stream_on_the_sync_driver():
    with fake_provider(lambda body, dialect: {"content": "streamed reply"}, chunk=4) as fp:
        client = client_of(fp.url)
        deltas = [e["delta"] for e in stream(client, "hi") if e["type"] == "text"]
        client.close()
    assert "".join(deltas) == "streamed reply" and len(deltas) > 1
    assert fp.requests[0]["headers"]["Accept"] == "text/event-stream"


class BytesServer:
    """Answers each request with the next of `replies` (exact bytes, sent in pieces of
    `piece` bytes), keeping the connection unless the reply is marked to close it (then
    closed without "connection: close": a client finds out when the connection is idle)."""

    def __init__(self, replies: list[tuple[bytes, bool]], piece: int = 1 << 16):
        self.replies, self.piece, self.accepted = list(replies), piece, 0
        self.closed = threading.Semaphore(0)  # released after each connection is closed
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self.serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def serve(self) -> None:
        while self.replies:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                try:
                    self.answer(conn)
                except OSError:  # the client gave up on this connection and closed it
                    pass
            self.closed.release()

    def answer(self, conn: socket.socket) -> None:
        while self.replies:
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)  # fmt: skip
            while len(body) < length:  # read it all: unread bytes make close a reset
                body += conn.recv(65536)
            reply, close = self.replies.pop(0)
            for i in range(0, len(reply), self.piece):
                conn.sendall(reply[i : i + self.piece])
            if close:
                return

    def __enter__(self) -> BytesServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()


def _json_reply(extra: bytes = b"", chunked: bool = False, length: bool = True) -> bytes:
    body = json.dumps(openai_response({"content": "fine"})).encode()
    if chunked:
        framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7])
                          for i in range(0, len(body), 7)) + b"0\r\n\r\n"  # fmt: skip
        return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n" + extra + b"\r\n" + framed
    size = b"content-length: %d\r\n" % len(body) if length else b""
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + size + extra + b"\r\n" + body


def test_a_connection_the_server_closed_while_idle_is_replaced():
    with BytesServer([(_json_reply(), True)] * 3) as server:
        client = client_of(server.url)
        for n in range(3):
            if n:  # the server closed the last connection: wait until its FIN is here
                assert server.closed.acquire(timeout=30)
                [(conn,)] = idle_of(client)
                assert select.select([conn.sock], [], [], 30)[0]
            assert ask(client, "hi")["text"] == "fine"
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


@pytest.mark.parametrize(
    "reply, kept",
    [
        ((_json_reply(chunked=True), False), True),  # chunks: read to the last, then kept
        ((_json_reply(length=False), True), False),  # until the server closes: not kept
        ((_json_reply(b"connection: close\r\n"), True), False),  # the server says so
        ((_json_reply().replace(b"HTTP/1.1", b"HTTP/1.0", 1), True), False),  # 1.0: not kept
    ],
    ids=["chunked", "until-close", "connection-close", "http-1.0"],
)
def test_each_way_a_body_ends_is_read_and_kept_only_when_it_may_be(reply, kept):
    with BytesServer([reply, (_json_reply(), True)], piece=5) as server:  # 5 bytes a send
        client = client_of(server.url)
        assert ask(client, "one")["text"] == "fine"
        assert [len(free) for free in idle_of(client)] == ([1] if kept else [])
        assert ask(client, "two")["text"] == "fine"
        client.close()
    assert server.accepted == (1 if kept else 2)


@pytest.mark.parametrize(
    "reply",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b'HTTP/1.1 200 OK\r\ncontent-length: 500\r\n\r\n{"partial":',  # cut short
        b"HTTP/1.1 200 OK\r\ncontent-le",  # cut inside the headers
    ],
    ids=["junk", "short-body", "short-headers"],
)
def test_a_broken_answer_is_a_protocol_error_and_the_connection_is_dropped(reply, reader):
    # http.client takes headers cut short by a close as complete (an empty body, so an
    # unreadable answer); httptools calls it what it is.
    lenient = reader == "stdlib" and b"\r\n\r\n" not in reply
    with BytesServer([(reply, True), (_json_reply(), True)]) as server:
        client = client_of(server.url)
        expected = "not readable JSON" if lenient else "RemoteProtocolError"
        with pytest.raises(ProviderError, match=expected) as broken:
            ask(client, "hi")
        assert "sk-secret-123" not in str(broken.value) and idle_of(client) in ([], [()])
        assert ask(client, "again")["text"] == "fine"  # a new connection
        client.close()
    assert server.accepted == 2


def test_a_header_value_with_a_line_break_is_refused_before_sending():
    with BytesServer([(_json_reply(), True)]) as server:
        client = client_of(server.url, headers={"X-Note": "fine"})
        assert ask(client, "hi")["text"] == "fine"
        pool = client.runtime.transport().pool
        evil = [(b"Host", b"x"), (b"X-Evil", b"a\r\nInjected: 1")]
        request = httpcore.Request(b"POST", server.url + "/chat/completions", headers=evil)
        with pytest.raises(httpcore.LocalProtocolError, match="X-Evil"):
            pool.handle_request(request)
        client.close()


def test_a_client_header_that_would_break_the_framing_is_never_sent():
    with fake_provider(lambda body, dialect: {"content": "ok"}) as fp:
        client = client_of(fp.url, headers={"X-Note": "a\r\nInjected: 1"})
        with pytest.raises(ProviderError, match="LocalProtocolError: invalid header b'X-Note'"):
            ask(client, "hi")
        client.close()
    assert fp.requests == []


def test_a_kept_connection_is_reused_when_the_process_has_over_1024_files_open():
    """Fails on the old main: the idle check was select(), which refuses a descriptor past
    1024 (a busy service has that many sockets), so the second POST raised ValueError."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows at most {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    spare = []
    try:
        with fake_provider(lambda body, dialect: {"content": "ok"}) as fp:
            while not spare or spare[-1] < 1100:  # the next sockets get numbers past 1024
                spare.append(os.open(os.devnull, os.O_RDONLY))
            client = client_of(fp.url)
            assert ask(client, "one")["text"] == "ok"
            [(conn,)] = idle_of(client)
            assert conn.sock.fileno() > 1024
            assert ask(client, "two")["text"] == "ok"  # the idle check of a high descriptor
            assert idle_of(client) == [(conn,)]
            client.close()
    finally:
        for fd in spare:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ---- streamed answers (SSE): on the kept socket with httptools, else on httpcore's pool --


def test_a_streamed_answer_arrives_in_pieces_and_its_connection_is_kept(reader):
    with fake_provider(lambda body, dialect: {"content": "a streamed reply"}, chunk=3) as fp:
        client = client_of(fp.url)
        deltas = [e["delta"] for e in stream(client, "one") if e["type"] == "text"]
        assert "".join(deltas) == "a streamed reply" and len(deltas) > 1
        kept = idle_of(client)
        assert [len(k) for k in kept] == ([1] if reader == "httptools" else [])
        assert ask(client, "two")["text"] == "a streamed reply"  # a whole answer next
        assert idle_of(client) == (kept if reader == "httptools" else [idle_of(client)[0]])
        client.close()


def test_a_stream_left_early_drops_its_connection_and_the_next_one_is_fresh(reader):
    with fake_provider(lambda body, dialect: {"content": "x" * 2000}, chunk=50) as fp:
        client = client_of(fp.url)
        events = stream(client, "one")
        assert next(e for e in events if e["type"] == "text")["delta"]
        events.close()  # the rest of the answer is never read
        assert idle_of(client) in ([], [()])  # not kept half-read
        assert (
            "".join(e["delta"] for e in stream(client, "two") if e["type"] == "text") == "x" * 2000
        )
        client.close()


def test_a_stream_cut_halfway_is_a_protocol_error(reader):
    with fake_provider(lambda body, dialect: {"content": "y" * 500, "stream_drop": True},
                       chunk=20) as fp:  # fmt: skip
        client = client_of(fp.url)
        with pytest.raises(ProviderError, match="RemoteProtocolError|incomplete|ended"):
            for _ in stream(client, "hi"):
                pass
        assert idle_of(client) in ([], [()])
        client.close()


def test_a_stream_whose_body_runs_until_the_server_closes_is_read_whole(reader):
    events = b"".join(
        b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}).encode()
        + b"\n\n" for piece in ("until ", "close")
    ) + b"data: [DONE]\n\n"  # fmt: skip
    reply = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + events
    with BytesServer([(reply, True)], piece=7) as server:
        client = client_of(server.url)
        done = [e for e in stream(client, "hi") if e["type"] == "done"]
        assert done[0]["result"]["text"] == "until close"
        assert idle_of(client) in ([], [()])
        client.close()


@pytest.mark.parametrize("piece", [5, 1 << 16], ids=["in-pieces", "at-once"])
def test_an_informational_answer_first_is_never_taken_for_the_answer(reader, piece):
    """A 103 before the real answer: httptools' reader skips it, http.client's (which skips
    only 100) drops the connection; either way the next request never reads the real
    answer of this one."""
    early = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + _json_reply()
    with BytesServer([(early, False), (_json_reply(), True)], piece=piece) as server:
        client = client_of(server.url)
        if reader == "httptools":
            assert ask(client, "one")["text"] == "fine"
            assert server.accepted == 1  # the same connection goes on
        else:
            with pytest.raises(ProviderError, match="informational answer"):
                ask(client, "one")
        assert ask(client, "two")["text"] == "fine"
        client.close()
