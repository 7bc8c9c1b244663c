"""The HTTP edge over real sockets: proxies, TLS with a private CA, redirects, decoding,
timeouts, headers, bounds and fork safety, for every verb (issue: real networks).

Every server here is on loopback; each test names what a real network does that our
own fake provider never did.
"""

from __future__ import annotations

import asyncio
import base64
import multiprocessing
import os
import socket
import ssl
import time

import httpx
import pytest
from dialect_kit import STYLES
from edge_servers import EdgeServer, ForwardProxy, chunks, four_verbs, model_answer

from toolnexus import ProviderError, arun, astream, create_client, run, stream
from toolnexus.drivers.transport import MAX_ANSWER_BYTES, USER_AGENT

trustme = pytest.importorskip("trustme")


def _client(url: str, **kw):
    kw.setdefault("retries", 0)
    return create_client(base_url=url, model="m", api_key="sk-edge-secret-123", **kw)


def _header(req: dict, name: str) -> list[str]:
    return [v for k, v in req["headers"] if k.lower() == name]


def _tls_server(ca, client_ca=None, text="over tls"):
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    if client_ca is not None:  # mutual TLS: a client certificate from client_ca is required
        tls.verify_mode = ssl.CERT_REQUIRED
        client_ca.configure_trust(tls)
    return EdgeServer(model_answer(text), tls=tls)


# ---- proxies ------------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_http_proxy_from_the_environment_carries_every_verb(style, monkeypatch):
    with EdgeServer(model_answer("via proxy")) as server, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        # httpx skips proxies for loopback by default only through NO_PROXY: none is set.
        with _client(server.url, style=style) as c:
            assert four_verbs(c) == ["via proxy"] * 4
    assert len(proxy.seen) == 4
    assert all(line.startswith(f"POST {server.url}") for line in proxy.seen)


def test_no_proxy_is_honoured(monkeypatch):
    with EdgeServer(model_answer("direct")) as server, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with _client(server.url) as c:
            assert four_verbs(c) == ["direct"] * 4
    assert proxy.seen == []


def test_the_proxy_option_tunnels_https_with_connect(tmp_path, monkeypatch):
    ca = trustme.CA()
    with _tls_server(ca, text="tunnelled") as server, ForwardProxy() as proxy:
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        with _client(server.url, proxy=proxy.url) as c:
            assert four_verbs(c) == ["tunnelled"] * 4
    assert proxy.seen == [f"CONNECT 127.0.0.1:{server.port} HTTP/1.1"] * len(proxy.seen)
    assert 1 <= len(proxy.seen) <= 4  # connections kept: a tunnel serves several POSTs


def test_proxy_with_a_given_client_is_refused():
    with pytest.raises(ValueError, match="httpx.Client\\(proxy="):
        create_client(base_url="http://h/v1", model="m", proxy="http://p:3128",
                      http_client=httpx.Client())  # fmt: skip


# ---- TLS with a private CA -----------------------------------------------------------


def test_ssl_cert_file_from_the_environment_vouches_for_a_private_ca(tmp_path, monkeypatch):
    ca = trustme.CA()
    with _tls_server(ca) as server:
        with _client(server.url) as c:  # unvouched: refused, never sent in clear
            with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
                run(c, "hi")
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        with _client(server.url) as c:
            assert four_verbs(c) == ["over tls"] * 4


def test_a_given_http_client_with_verify_and_a_client_certificate_serves_every_verb(tmp_path):
    ca, client_ca = trustme.CA(), trustme.CA()
    me = client_ca.issue_cert("toolnexus-client")
    me.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "me.pem"))
    with _tls_server(ca, client_ca=client_ca) as server:
        verify = ssl.create_default_context()
        ca.configure_trust(verify)
        verify.load_cert_chain(str(tmp_path / "me.pem"))
        seen = []
        sync = httpx.Client(verify=verify, event_hooks={"request": [seen.append]})
        asynchronous = httpx.AsyncClient(verify=verify)
        with _client(server.url, http_client=(sync, asynchronous)) as c:
            assert four_verbs(c) == ["over tls"] * 4
        assert len(seen) == 2  # the sync verbs went through the host's client and its hooks
        # Without the client certificate the server refuses the handshake.
        plain = ssl.create_default_context()
        ca.configure_trust(plain)
        with _client(server.url, http_client=httpx.Client(verify=plain)) as c:
            with pytest.raises(ProviderError):
                run(c, "hi")


# ---- a given client or transport is used by every verb --------------------------------


def test_a_sync_transport_serves_the_async_verbs_too():
    with EdgeServer(model_answer("mine")) as server:
        seen = []

        class Counting(httpx.HTTPTransport):
            def handle_request(self, request):
                seen.append(request.url.path)
                return super().handle_request(request)

        with _client(server.url, transport=Counting()) as c:
            assert four_verbs(c) == ["mine"] * 4
        assert len(seen) == 4  # arun and astream did not bypass it


def test_a_sync_http_client_alone_serves_every_verb():
    with EdgeServer(model_answer("host client")) as server:
        seen = []
        mine = httpx.Client(event_hooks={"request": [seen.append]})
        with _client(server.url, http_client=mine) as c:
            assert four_verbs(c) == ["host client"] * 4
        assert len(seen) == 4
        assert not mine.is_closed  # the host's client is the host's to close


def test_an_async_http_client_alone_refuses_the_sync_verbs_clearly():
    with EdgeServer(model_answer("async")) as server:
        with _client(server.url, http_client=httpx.AsyncClient()) as c:
            assert asyncio.run(arun(c, "hi"))["text"] == "async"
            with pytest.raises(TypeError, match="async-only.*http_client=\\(httpx.Client"):
                run(c, "hi")


def test_bad_http_options_are_clear_errors():
    for bad, match in [
        ({"http_client": "client"}, "http_client must be an httpx.Client"),
        ({"http_client": (httpx.Client(), httpx.Client())}, "one of each"),
        ({"transport": httpx.Client()}, "goes in http_client="),
        ({"transport": httpx.MockTransport(lambda r: None), "http_client": httpx.Client()},
         "not both"),
        ({"default_query": {"api-version": 1}}, "default_query must map names to strings"),
        ({"proxy": 3128}, "proxy must be a URL"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=match):
            create_client(base_url="http://h/v1", model="m", **bad)


# ---- URLs: query, default_query, userinfo --------------------------------------------


def test_an_azure_style_base_url_keeps_its_query_and_default_query_merges():
    with EdgeServer(model_answer("azure")) as server:
        base = f"http://127.0.0.1:{server.port}/openai/deployments/gpt?api-version=2024-10-21"
        with _client(base) as c:
            assert run(c, "hi")["text"] == "azure"
        with _client(base.split("?")[0], default_query={"api-version": "2025-01-01"}) as c:
            assert run(c, "hi")["text"] == "azure"
    paths = [r["path"] for r in server.requests]
    assert paths == [
        "/openai/deployments/gpt/chat/completions?api-version=2024-10-21",
        "/openai/deployments/gpt/chat/completions?api-version=2025-01-01",
    ]


def test_userinfo_in_the_base_url_is_basic_auth_and_never_shown():
    def refuse(req):
        return 401, {"content-type": "application/json"}, b'{"error": {"message": "no"}}'

    with EdgeServer(refuse) as server:
        base = f"http://gw-user:s3cr%40t-pass@127.0.0.1:{server.port}/v1"
        with _client(base) as c:
            assert "s3cr" not in repr(c) and "gw-user" not in repr(c)
            with pytest.raises(ProviderError) as info:
                run(c, "hi")
    assert "s3cr" not in str(info.value) and "s3cr" not in repr(info.value.url)
    sent = _header(server.requests[0], "authorization")
    assert sent == ["Basic " + base64.b64encode(b"gw-user:s3cr@t-pass").decode()]


# ---- headers -------------------------------------------------------------------------


def test_a_user_agent_is_sent_unless_the_user_sets_one():
    with EdgeServer(model_answer("ua")) as server:
        with _client(server.url) as c:
            four_verbs(c)
        with _client(server.url, headers={"User-Agent": "my-app/2"}) as c:
            run(c, "hi")
    agents = [_header(r, "user-agent") for r in server.requests]
    assert agents == [[USER_AGENT]] * 4 + [["my-app/2"]]


def test_a_user_host_or_content_length_header_is_never_sent_twice():
    with EdgeServer(model_answer("one each")) as server:
        headers = {"Host": "api.example.com", "Content-Length": "5"}
        with _client(server.url, headers=headers) as c:
            assert four_verbs(c) == ["one each"] * 4
    for r in server.requests:
        assert _header(r, "host") == ["api.example.com"]
        assert _header(r, "content-length") == [str(len(r["raw"]))]


# ---- redirects -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [307, 308])
def test_307_and_308_are_followed_with_the_same_method_and_body(status):
    with EdgeServer(model_answer("moved")) as target:

        def moved(req):
            return status, {"location": target.url + "/chat/completions"}, b""

        with EdgeServer(moved) as old:
            with _client(old.url) as c:
                assert four_verbs(c) == ["moved"] * 4
    assert len(target.requests) == 4
    assert all(r["line"].startswith("POST ") and r["json"]["model"] == "m"
               for r in target.requests)  # fmt: skip
    # Another origin: the key does not follow the redirect.
    assert all(_header(r, "authorization") == [] for r in target.requests)


def test_a_redirect_within_the_origin_keeps_the_key_and_loops_are_bounded():
    hops = []

    def loop(req):
        hops.append(req["path"])
        if req["path"].startswith("/v1/"):
            return 308, {"location": "/v2/chat/completions"}, b""
        return 307, {"location": req["path"]}, b""

    with EdgeServer(loop) as server:
        with _client(server.url) as c:
            with pytest.raises(ProviderError, match="more than 5 redirects"):
                run(c, "hi")
    assert len(hops) == 6
    assert _header(server.requests[1], "authorization") == ["Bearer sk-edge-secret-123"]


# ---- decoding, bounds, informational answers -----------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_gzip_answers_are_decoded_whole_and_streamed(style):
    with EdgeServer(model_answer("squeezed", gzipped=True)) as server:
        with _client(server.url, style=style) as c:
            assert four_verbs(c) == ["squeezed"] * 4


def test_an_over_long_answer_is_refused_without_holding_it():
    big = b'{"choices": [{"message": {"content": "' + b"x" * (MAX_ANSWER_BYTES + 10) + b'"}}]}'

    def huge(req):  # close-delimited, so no Content-Length warns us up front
        return (
            200,
            {"content-type": "application/json"},
            chunks(big[i : i + (1 << 20)] for i in range(0, len(big), 1 << 20)),
        )

    with EdgeServer(huge) as server:
        with _client(server.url) as c:
            t0 = time.monotonic()
            with pytest.raises(ProviderError, match="over 33,554,432 bytes"):
                run(c, "hi")
            assert time.monotonic() - t0 < 20


def test_an_over_long_sse_line_is_refused_in_bounded_time():
    line = b"data: " + b"y" * (40 << 20)

    def endless(req):
        return (
            200,
            {"content-type": "text/event-stream"},
            chunks(line[i : i + 16384] for i in range(0, len(line), 16384)),
        )

    with EdgeServer(endless) as server:
        with _client(server.url) as c:
            t0 = time.monotonic()
            with pytest.raises(ProviderError, match="line"):
                list(stream(c, "hi"))
            assert time.monotonic() - t0 < 20


def test_an_early_hints_answer_before_the_answer_is_skipped():
    with EdgeServer(model_answer("after hints")) as server:
        handler = server._server.RequestHandlerClass
        plain = handler.do_POST

        def with_hints(self):
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n")
            plain(self)

        handler.do_POST = with_hints
        with _client(server.url) as c:
            assert four_verbs(c) == ["after hints"] * 4


# ---- timeouts ------------------------------------------------------------------------


def test_a_host_that_never_accepts_fails_after_the_connect_timeout_not_the_read_one():
    # A listener whose backlog is full: the SYN is never answered.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):  # fill the accept queue (and the SYN queue behind it)
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        with _client(f"http://127.0.0.1:{port}/v1", read_timeout_ms=120_000) as c:
            t0 = time.monotonic()
            with pytest.raises(ProviderError, match="ConnectTimeout|timed out"):
                run(c, "hi")
            assert time.monotonic() - t0 < 15
    finally:
        for s in fillers:
            s.close()
        listener.close()


# ---- fork ----------------------------------------------------------------------------


_FORKED: list = []  # the parent's client, inherited by the forked children (never pickled)


def _ask_in_child(n):
    pid = os.getpid()
    return [(pid, run(_FORKED[0], f"pid {pid} #{i}")["text"]) for i in range(n)]


def test_a_client_used_before_fork_never_shares_a_connection_with_its_children():
    def echo(req):
        prompt = req["json"]["messages"][-1]["content"]
        return model_answer(f"answer to {prompt}")(req)

    with EdgeServer(echo) as server:
        with _client(server.url) as c:
            assert run(c, "warm up")["text"] == "answer to warm up"  # a kept connection now
            _FORKED[:] = [c]
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(4) as pool:
                results = pool.map(_ask_in_child, [10] * 8)
            assert run(c, "parent again")["text"] == "answer to parent again"
    for batch in results:
        for i, (pid, text) in enumerate(batch):
            assert text == f"answer to pid {pid} #{i}"


def test_bytes_after_a_complete_answer_are_never_read_into_it():
    with EdgeServer(model_answer("exact")) as server:
        handler = server._server.RequestHandlerClass
        plain = handler.do_POST

        def trailing(self):
            plain(self)
            self.wfile.write(b'{"choices": [{"message": {"content": " INJECTED"}}]}')
            self.close_connection = True

        handler.do_POST = trailing
        # A kept connection the server closed may be picked before its close is seen: a
        # network failure, retried (as by default). What matters: never the junk's text.
        with _client(server.url, retries=2, retry_base_ms=1) as c:
            assert [run(c, "hi")["text"] for _ in range(3)] == ["exact"] * 3


def _refusing_unread(server: EdgeServer) -> EdgeServer:
    """Make `server` answer 413 before it reads the body, then hang up (as a gateway that
    checks Content-Length does)."""

    def refuse_unread(self):
        server.requests.append({"path": self.path})
        self.send_response(413)
        self.send_header("content-type", "application/json")
        body = b'{"error": {"message": "too large"}}'
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    server._server.RequestHandlerClass.do_POST = refuse_unread
    return server


def _verbs_on_one_loop(c, prompt: str) -> list:
    """The four verbs' outcomes for `prompt`: each one's exception (or its text)."""

    def outcome(call):
        try:
            return call()
        except Exception as e:
            return e

    def streamed():
        return [e for e in stream(c, prompt) if e["type"] == "done"][0]["result"]["text"]

    async def both():
        async def astreamed():
            return [e async for e in astream(c, prompt) if e["type"] == "done"][0]

        out = []
        for call in (lambda: arun(c, prompt), astreamed):
            try:
                out.append(await call())
            except Exception as e:
                out.append(e)
        return out

    return [outcome(lambda: run(c, prompt)), outcome(streamed), *asyncio.run(both())]


def test_an_early_refusal_of_a_large_body_is_its_status_not_a_network_failure():
    """Every verb, the async ones too: a 413 sent before the body was read is reported
    once, not retried, and the body is not sent again."""
    with _refusing_unread(EdgeServer(model_answer("unused"))) as server:
        with _client(server.url, retries=2) as c:
            outcomes = _verbs_on_one_loop(c, "x" * (8 << 20))
    for verb, e in zip(("run", "stream", "arun", "astream"), outcomes, strict=True):
        assert isinstance(e, ProviderError), (verb, e)
        assert e.status == 413 and "too large" in str(e), (verb, e)
    assert len(server.requests) == 4  # one each: a 413 is not retried, nothing re-sent


def test_a_large_body_is_answered_on_every_verb():
    from toolnexus.drivers.transport import LARGE_ASYNC_BODY

    with EdgeServer(model_answer("big ok")) as server:
        with _client(server.url) as c:
            assert four_verbs(c, "x" * LARGE_ASYNC_BODY) == ["big ok"] * 4
    assert all(len(r["raw"]) > LARGE_ASYNC_BODY for r in server.requests)


def test_httpx_async_client_loses_an_answer_sent_before_the_body_was_read():
    """Why the async verbs send a large body through the runtime's sync client (from an
    io thread): httpx.Client reports the early 413, httpx.AsyncClient (anyio on asyncio)
    raises ReadError, as asyncio closes a socket whose write failed with the answer unread
    in it. If this test fails, httpx reports it now: LARGE_ASYNC_BODY can go."""
    body = b"x" * (8 << 20)
    with _refusing_unread(EdgeServer(model_answer("unused"))) as server:
        with httpx.Client() as sync:
            assert sync.post(server.url, content=body).status_code == 413

        async def post() -> None:
            async with httpx.AsyncClient() as client:
                await client.post(server.url, content=body)

        with pytest.raises(httpx.ReadError):
            asyncio.run(post())


def test_httpx_default_agent_is_what_we_replace():
    from toolnexus.drivers import transport

    assert httpx.Client().headers["user-agent"] == transport._HTTPX_UA
