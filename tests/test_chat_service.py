"""The copyable example chat service (examples/chat_service) proven with real parts.

Two uvicorn workers (subprocesses on two loopback ports) share conversations through the
real PostgreSQL, then the real Redis (one TOOLNEXUS_DATABASE each, library defaults
otherwise); a loopback fake provider answers with a little latency. Concurrent clients,
double submits on both workers at once, one worker SIGKILLed mid-load and restarted;
afterwards the database is read directly. Backend outages are made with a TCP proxy the
test cuts and restores (the real servers are shared and never stopped), and with
workers pointed at a closed port or a wrong DSN. Bad input: test_chat_service_input.py.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from chat_service_kit import (  # noqa: E402
    BACKENDS,
    TUNED,
    Proxy,
    Worker,
    answer_for,
    base_env,
    exchanges,
    free_port,
    model,
    serving,
    via,
)

from toolnexus.testing import fake_provider  # noqa: E402


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, unique, tmp_path):
    """(name, server URL, make(worker_url=None) -> (env, readers, cleanup)) of one real server."""
    make, fixture = BACKENDS[request.param]
    url = request.getfixturevalue(fixture)
    cleanups = []

    def build(worker_url: str | None = None):
        made = make(url, unique, tmp_path, worker_url)
        cleanups.append(made[2])
        return made

    yield request.param, url, build, unique
    for c in cleanups:
        c()


@pytest.fixture(scope="module")
def provider():
    with fake_provider(model, delay=0.03) as fp:
        yield fp


# ---- driving the service -------------------------------------------------------------------


class Outcomes:
    """What every request got: thread-safe lists of (conversation, text, worker, result)."""

    def __init__(self):
        self.guard = threading.Lock()
        self.rows: list[tuple[str, str, int, object, float]] = []

    def add(self, cid: str, text: str, worker: int, result: object) -> None:
        with self.guard:
            self.rows.append((cid, text, worker, result, time.monotonic()))

    def accepted(self, cid: str) -> list[str]:
        return [t for c, t, _, r, _ in self.rows if c == cid and r == 200]

    def count(self) -> int:
        with self.guard:
            return len(self.rows)


def send(http: httpx.Client, base: str, cid: str, text: str, sse: bool = False) -> object:
    """POST one message; return 200, another status, or the name of a connection error."""
    url = f"{base}/conversations/{cid}/messages"
    try:
        if not sse:
            r = http.post(url, json={"text": text}, timeout=90)
            if r.status_code == 200:
                assert r.json()["text"] == answer_for(text)
            return r.status_code
        headers = {"accept": "text/event-stream"}
        with http.stream("POST", url, json={"text": text}, headers=headers, timeout=90) as r:
            if r.status_code != 200:
                return r.status_code
            events = [b for b in r.read().decode().split("\n\n") if b.strip()]
        last = dict(line.split(": ", 1) for line in events[-1].splitlines())
        data = json.loads(last["data"])
        if last["event"] == "error":
            return data["status"]
        assert last["event"] == "done" and data["text"] == answer_for(text), last
        return 200
    except httpx.TransportError as e:  # the worker died under us, or was dead already
        return type(e).__name__


def test_two_workers_share_conversations_under_load_and_sigkill(backend, provider, tmp_path):
    """Every accepted message is stored exactly once, in order, the log (PostgreSQL; Redis
    has none) agrees with the transcripts, and no request gets a 5xx; only requests to
    the SIGKILLed worker fail. A Redis lock its dead holder kept expires after the
    library's default ttl (10 s; renewed every third of it while held): waiters on that
    conversation wait for it."""
    name, _, build, unique = backend
    env, readers, _ = build()
    env = {**base_env(provider), **env}
    workers = [Worker(env, tmp_path / f"w{i}.log").start() for i in range(2)]
    try:
        for w in workers:
            w.wait_ready()
        n_conv, n_msgs = 12, 5
        cids = [f"c{i}-{unique}-{os.urandom(3).hex()}" for i in range(n_conv)]
        outcomes, killed_at = Outcomes(), [None]
        total = n_conv * n_msgs
        victim = workers[1]

        kill_guard = threading.Lock()

        # One client shared by all threads: building an httpx.Client costs ~50 ms of CPU.
        http = httpx.Client(limits=httpx.Limits(max_connections=64))

        def client(i: int, cid: str) -> None:
            with ThreadPoolExecutor(1) as other:
                for k in range(n_msgs):
                    text = f"{cid} m{k}" + (" #add" if (i + k) % 3 == 0 else "")
                    w = (i + k) % 2
                    # Double submits, both workers at once: early (both alive) for half the
                    # conversations, and later (maybe straddling the kill) for a few.
                    if (k == 1 and i % 2 == 0) or (k == 3 and i % 4 == 1):
                        twin = f"{cid} m{k}b"
                        f = other.submit(send, http, workers[1 - w].url, cid, twin, True)
                        outcomes.add(cid, text, w, send(http, workers[w].url, cid, text))
                        outcomes.add(cid, twin, 1 - w, f.result())
                    else:
                        outcomes.add(cid, text, w, send(http, workers[w].url, cid, text))
                    with kill_guard:
                        if outcomes.count() >= total * 0.4 and killed_at[0] is None:
                            killed_at[0] = time.monotonic()
                            victim.kill()  # mid-load: its requests in flight die with it
                            victim.start()  # and it comes back while the others go on

        with ThreadPoolExecutor(n_conv) as pool:
            list(pool.map(client, range(n_conv), cids))

        rows = outcomes.rows
        assert killed_at[0] is not None
        statuses = Counter(r for *_, r, _ in rows)
        assert not [r for r in statuses if isinstance(r, int) and r >= 500], statuses
        failed = [(c, t, w, r, at) for c, t, w, r, at in rows if r != 200]
        # Only requests to the killed worker failed, and only once it was being killed.
        assert failed and all(w == 1 and not isinstance(r, int) for _, _, w, r, _ in failed)
        assert all(at >= killed_at[0] for *_, at in failed)
        assert any(w == 0 and r == 200 and at > killed_at[0] for _, _, w, r, at in rows)

        # Restarted, the worker continues every conversation.
        victim.wait_ready()
        last = [(cid, f"{cid} after restart") for cid in cids]
        with ThreadPoolExecutor(8) as pool:
            done = pool.map(lambda c: send(http, victim.url, *c), last)
            for (cid, text), result in zip(last, done, strict=True):
                outcomes.add(cid, text, 1, result)
        assert all(r == 200 for *_, r, _ in outcomes.rows[len(rows) :])
        http.close()
    finally:
        for w in workers:
            w.stop()

    store, log, close = readers()
    failed_texts = {t for _, t, _, r, _ in outcomes.rows if r != 200}
    sent = Counter((c, t) for c, t, *_ in outcomes.rows)
    assert max(sent.values()) == 1  # every text is unique, so "exactly once" is meaningful
    for cid in cids:
        pairs = exchanges(store["get"](cid))
        users = [u for u, _ in pairs]
        assert all(a == answer_for(u) for u, a in pairs)  # no answer mixed into another turn
        assert len(users) == len(set(users))  # no message twice
        accepted = outcomes.accepted(cid)
        assert set(accepted) <= set(users)  # no accepted turn lost
        assert set(users) - set(accepted) <= failed_texts  # extras: died after saving only
        # One client's sequential messages keep their order (a double submit's twin aside).
        mine = [u for u in users if not u.endswith("b")]
        assert mine == [t for c, t, *_ in outcomes.rows if c == cid and t in mine]
        if log is None:  # Redis: the bundle has no message log
            continue
        entries = log["query"](conversation_id=cid)
        logged = [e["text"] for e in entries if e["direction"] == "user"]
        answers = [e["text"] for e in entries if e["direction"] == "ai"]
        assert len(logged) == len(set(logged))  # the log holds each message once
        assert set(accepted) <= set(logged) <= set(users)  # log and transcript agree
        assert sorted(answers) == sorted(answer_for(u) for u in logged)
    close()


def failing_model(body: dict, dialect: str) -> dict:
    """Answer like `model`, but fail on cue: #fail a 500, #drop no response, #slow too late."""
    user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if "#fail" in user:
        return {"status": 500, "body": '{"error": "the model broke"}'}
    if "#drop" in user:
        return {"drop": True}
    if "#slow" in user:
        return {"stall": 3}
    return {"content": answer_for(user)}


def test_provider_failures_are_a_502_or_504_and_save_nothing(tmp_path):
    """The model failing, vanishing or answering too late: a clear 5xx without the key, no
    turn stored, the lock released (the conversation goes on)."""
    secret = "sk-test-do-not-leak-0123456789"
    with fake_provider(failing_model) as fp:
        env = {**base_env(fp), "OPENAI_API_KEY": secret, "TOOLNEXUS_RETRIES": "0",
               "TOOLNEXUS_TIMEOUT_MS": "1000",
               "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}  # fmt: skip
        with serving(env) as base, httpx.Client(base_url=base, timeout=20) as http:
            assert http.post("/conversations/f/messages", json={"text": "hello"}).status_code == 200
            for text, status, code in [("x #fail", 502, "provider_error"),
                                       ("x #drop", 502, "provider_error"),
                                       ("x #slow", 504, "timeout")]:  # fmt: skip
                r = http.post("/conversations/f/messages", json={"text": text})
                assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
                assert secret not in r.text and "Traceback" not in r.text
            with http.stream("POST", "/conversations/f/messages", json={"text": "y #fail"},
                             headers={"accept": "text/event-stream"}) as r:  # fmt: skip
                body = r.read().decode()
            assert r.status_code == 502 or "event: error" in body, body
            assert secret not in body
            r = http.post("/conversations/f/messages", json={"text": "again"})
            assert r.status_code == 200, r.text  # not "busy": every failure released the lock
            transcript = http.get("/conversations/f").json()["messages"]
            assert exchanges(transcript) == [("hello", "re: hello"), ("again", "re: again")]


@pytest.mark.parametrize("kind", ["postgres-closed-port", "postgres-wrong-db", "redis-closed-port"])
def test_an_unreachable_backend_is_a_503(kind, provider, request):
    server = request.getfixturevalue("redis_url" if kind.startswith("redis") else "postgres_dsn")
    url = via(server, free_port()) if kind.endswith("closed-port") else server
    if kind == "postgres-wrong-db":
        url = urlunsplit(urlsplit(server)._replace(path="/toolnexus_no_such_db"))
    with serving({**base_env(provider), "TOOLNEXUS_DATABASE": url}) as base:
        with httpx.Client(base_url=base, timeout=20) as http:
            for method, path in [("POST", "/conversations/u/messages"), ("GET", "/health"),
                                 ("GET", "/conversations/u")]:  # fmt: skip
                r = http.request(method, path, json={"text": "hi"} if method == "POST" else None)
                assert r.status_code == 503, (path, r.text)
                assert r.json()["error"]["code"] == "store_unavailable"
                assert "Traceback" not in r.text
            assert http.post("/conversations/u/messages", json={}).status_code == 422


def test_a_backend_outage_is_a_503_and_the_service_recovers(backend, provider, tmp_path):
    name, server, build, unique = backend
    cid = f"o1-{unique}"
    parts = urlsplit(server)
    proxy = Proxy(parts.hostname, parts.port)
    env, readers, _ = build(via(server, proxy.port))
    try:
        with (
            serving({**base_env(provider), **env}) as base,
            httpx.Client(base_url=base, timeout=30) as http,
        ):

            def post(text: str) -> httpx.Response:
                return http.post(f"/conversations/{cid}/messages", json={"text": text}, timeout=30)

            assert post("before").status_code == 200
            proxy.cut()
            r = post("during #add")
            assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
            assert r.json()["error"]["code"] == "store_unavailable"
            assert http.get("/health").status_code == 503
            proxy.restore()
            deadline, statuses = time.monotonic() + 60, []
            while not statuses or statuses[-1][1] != 200:
                assert time.monotonic() < deadline, f"no recovery: {statuses}"
                text = f"after {len(statuses)} #add"
                statuses.append((text, post(text).status_code))
            assert {s for _, s in statuses} <= {200, 503}, statuses
            assert http.get("/health").status_code == 200
    finally:
        proxy.cut()
    store, log, close = readers()
    users = [u for u, _ in exchanges(store["get"](cid))]
    # Nothing half-written: the outage left no trace, the recovered exchange is there.
    assert users[0] == "before" and users[-1] == statuses[-1][0]
    assert not [u for u in users if u.startswith("during")] and len(users) == len(set(users))
    close()


def test_the_tuned_deployment_still_serves(provider, tmp_path):
    """benchmarks/service (the tuned app the benchmark measures) answers and stores."""
    import doctest

    from benchmarks.service import app, backends

    for module in (app, backends):
        failed, tried = doctest.testmod(module)
        assert tried > 0 and failed == 0, module.__name__
    env = {**base_env(provider), "TOOLNEXUS_API_KEY": "k", "TOOLNEXUS_DRIVER": "threads",
           "TOOLNEXUS_STORE": f"sqlite:{tmp_path / 'tuned.db'}"}  # fmt: skip
    with serving(env, TUNED) as base, httpx.Client(base_url=base, timeout=20) as http:
        assert http.post("/conversations/u/messages", json={"text": "hi"}).json()["text"] == (
            "re: hi"
        )
        assert exchanges(http.get("/conversations/u").json()["messages"]) == [("hi", "re: hi")]
