"""The example service is safe to copy (issue 39, item 6): an authenticated principal
decides whose conversations a request touches; JSON only on POST (no CSRF from a form);
the body bound holds while reading; no provider text or internal URL in a 502; no lock
file left per id. Over real loopback HTTP to the app, on SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from chat_service_kit import (  # noqa: E402
    Worker,
    _postgres,
    base_env,
    in_process,
    model,
)

from toolnexus.testing import fake_provider  # noqa: E402

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
TOKENS = f"alice={ALICE},bob={BOB}"


@pytest.fixture(scope="module")
def provider():
    with fake_provider(model) as fp:
        yield fp


def _auth_env(provider) -> dict:
    env = {k: v for k, v in base_env(provider).items() if k != "TOOLNEXUS_DEMO"}
    return {**env, "TOOLNEXUS_AUTH": "examples.chat_service.auth:bearer_tokens",
            "TOOLNEXUS_TOKENS": TOKENS}  # fmt: skip


def _as(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path, unique):
    if request.param == "sqlite":
        yield {"TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
        return
    env, _, cleanup = _postgres(request.getfixturevalue("postgres_dsn"), unique, tmp_path)
    try:
        yield env
    finally:
        cleanup()


def test_a_principal_touches_only_its_own_conversations(provider, database, monkeypatch):
    with in_process({**_auth_env(provider), **database}, monkeypatch) as http:
        for headers in ({}, _as("not-a-token"), {"authorization": f"Basic {ALICE}"}):
            r = http.post("/conversations/chat/messages", json={"text": "x"}, headers=headers)
            assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthenticated")
            assert r.headers["www-authenticate"] == "Bearer"
            assert http.get("/conversations/chat", headers=headers).status_code == 401
            assert http.delete("/conversations/chat", headers=headers).status_code == 401
        r = http.post("/conversations/chat/messages", json={"text": "alice's plan"},
                      headers=_as(ALICE))  # fmt: skip
        assert r.status_code == 200, r.text
        # Bob, under the same conversation name, sees nothing of Alice's.
        assert http.get("/conversations/chat", headers=_as(BOB)).status_code == 404
        hist = http.get("/conversations/chat/history", headers=_as(BOB))
        assert hist.json()["entries"] == []
        gone = http.delete("/conversations/chat", headers=_as(BOB)).json()
        assert gone["log_entries_removed"] == 0
        mine = http.get("/conversations/chat", headers=_as(ALICE)).json()["messages"]
        assert [m["content"] for m in mine] == ["alice's plan", "re: alice's plan"]
        alice_log = http.get("/conversations/chat/history", headers=_as(ALICE)).json()
        assert [e["text"] for e in alice_log["entries"]] == ["alice's plan", "re: alice's plan"]


def test_the_service_refuses_to_start_without_authentication(provider, tmp_path):
    env = {k: v for k, v in base_env(provider).items() if k != "TOOLNEXUS_DEMO"}
    env["TOOLNEXUS_DATABASE"] = f"sqlite:{tmp_path / 'chat.db'}"
    worker = Worker(env, tmp_path / "worker.log").start()
    try:
        worker.proc.wait(30)
    finally:
        worker.stop()
    assert worker.proc.returncode != 0
    assert "will not serve without authentication" in (tmp_path / "worker.log").read_text()


def test_the_demo_mode_answers_loopback_clients_only(provider, tmp_path, monkeypatch):
    env = {**base_env(provider), "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
    with in_process(env, monkeypatch) as http:
        assert http.post("/conversations/u/messages", json={"text": "hi"}).status_code == 200
        # Another address of this host stands in for a client from elsewhere.
        other = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=str(http.base_url), transport=other, timeout=10) as far:
            r = far.get("/conversations/u")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthenticated")


def test_a_post_that_is_not_json_is_refused_before_anything_is_stored(
    provider, tmp_path, monkeypatch
):
    env = {**base_env(provider), "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
    with in_process(env, monkeypatch) as http:
        for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            r = http.post("/conversations/u/messages", content=b'{"text": "x"}',
                          headers={"content-type": ct})  # fmt: skip
            assert (r.status_code, r.json()["error"]["code"]) == (415, "not_json"), ct
        assert http.get("/conversations/u").status_code == 404
        ok = http.post("/conversations/u/messages", content=b'{"text": "x"}',
                       headers={"content-type": "application/json; charset=utf-8"})  # fmt: skip
        assert ok.status_code == 200


def _raw(port: int, head: bytes, body: bytes, wait: float = 10.0) -> bytes:
    """Send `head` and `body` without finishing the body; return what the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(head + body)
        try:
            return s.recv(65536)
        except TimeoutError:
            return b""


def test_the_body_bound_holds_while_reading(provider, tmp_path, monkeypatch):
    """A body past 64 KiB is refused after 64 KiB are read, whether it declares its
    length or comes chunked: the server does not wait for (or hold) the rest."""
    env = {**base_env(provider), "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
    with in_process(env, monkeypatch) as http:
        port = http.base_url.port
        start = time.monotonic()
        head = (b"POST /conversations/u/messages HTTP/1.1\r\nhost: x\r\n"
                b"content-type: application/json\r\n")  # fmt: skip
        declared = _raw(port, head + b"content-length: 268435456\r\n\r\n", b"{" * 1000)
        chunk = b"x" * 8192
        chunked = _raw(port, head + b"transfer-encoding: chunked\r\n\r\n",
                       (b"2000\r\n" + chunk + b"\r\n") * 12)  # 96 KiB, never ended # fmt: skip
        elapsed = time.monotonic() - start
    assert declared.startswith(b"HTTP/1.1 413"), declared[:200]
    assert chunked.startswith(b"HTTP/1.1 413"), chunked[:200]
    assert elapsed < 5  # answered at the bound, not after a read timeout


def test_a_502_shows_no_provider_text_nor_url(tmp_path, monkeypatch):
    def broken(body, dialect):
        return {"status": 500, "body": '{"error": "db at 10.0.0.7:5432 refused: internal"}'}

    with fake_provider(broken) as fp:
        env = {**base_env(fp), "TOOLNEXUS_RETRIES": "0",
               "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}  # fmt: skip
        with in_process(env, monkeypatch) as http:
            r = http.post("/conversations/u/messages", json={"text": "x"})
            sse = http.post("/conversations/u/messages", json={"text": "x"},
                            headers={"accept": "text/event-stream"})  # fmt: skip
    assert (r.status_code, r.json()["error"]["code"]) == (502, "provider_error")
    for text in (r.text, sse.text):
        assert "10.0.0.7" not in text and "internal" not in text.replace("the server log", "")
        assert fp.url not in text and "127.0.0.1" not in text


def test_no_lock_file_is_left_per_id(provider, tmp_path, monkeypatch):
    from toolnexus.backends.file.lock import lock_directory

    env = {**base_env(provider), "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
    with in_process(env, monkeypatch) as http:
        for i in range(10):
            assert http.post(f"/conversations/u{i}/messages", json={"text": "x"}).status_code == 200
    assert list(lock_directory(tmp_path / "chat.db").iterdir()) == []
