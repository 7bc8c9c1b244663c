"""The copyable example chat service (examples/chat_service) proven with real parts.

Two uvicorn workers (subprocesses on two loopback ports) share conversations through the
real PostgreSQL, then the real Redis (one TOOLNEXUS_DATABASE each, library defaults
otherwise); a loopback fake provider answers with a little latency. Concurrent clients,
double submits on both workers at once, one worker
SIGKILLed mid-load and restarted; afterwards the database is read directly. Backend
outages are made with a TCP proxy the test cuts and restores (the real servers are
shared and never stopped), and with workers pointed at a closed port or a wrong DSN.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from toolnexus.core.transcript import dangling, is_tool_result, tool_call_ids  # noqa: E402
from toolnexus.testing import fake_provider  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the example is run from the repository root, as documented
    sys.path.insert(0, str(ROOT))

EXAMPLE = "examples.chat_service.app:app"
TUNED = "benchmarks.service.app:app"  # the tuned deployment the benchmark measures

# ---- the fake model: deterministic answers that name the question --------------------


def answer_for(text: str) -> str:
    """The final answer the fake model gives to a user message (a tool call first for #add)."""
    return f"re: {text}" + (" = 5" if "#add" in text else "")


def model(body: dict, dialect: str) -> dict:
    """Answer the last user message; "#add" asks for the add tool first."""
    messages = body["messages"]
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if messages[-1]["role"] == "tool":
        return {"content": f"re: {user} = {messages[-1]['content']}"}
    if "#add" in user:
        return {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}
    return {"content": answer_for(user)}


# ---- processes, servers and a cuttable proxy -----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Worker:
    """One service worker: `python -m uvicorn examples.chat_service.app:app` on its own port."""

    def __init__(self, env: dict, log: Path, app: str = EXAMPLE):
        self.env, self.port, self.log, self.proc, self.app = env, free_port(), log, None, app

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Worker:
        cmd = [sys.executable, "-m", "uvicorn", self.app,
               "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
               "--no-access-log"]  # fmt: skip
        out = open(self.log, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, **self.env}, stdout=out, stderr=out
        )
        out.close()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(f"worker exited: {self.log.read_text()[-2000:]}")
                try:
                    if http.get(self.url + "/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.03)
        raise AssertionError(f"worker not ready: {self.log.read_text()[-2000:]}")

    def wait_ready_or_up(self, timeout: float = 30.0) -> None:
        """Wait until the worker answers /health at all (its database may be down: 503)."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=20) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(f"worker exited: {self.log.read_text()[-2000:]}")
                try:
                    http.get(self.url + "/health")
                    return
                except httpx.HTTPError:
                    time.sleep(0.03)
        raise AssertionError(f"worker not up: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def serving(env: dict, app: str = EXAMPLE):
    """Serve `app` with `env` in a uvicorn subprocess; yield its base URL."""
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"chat-{os.getpid()}-{free_port()}.log"
    worker = Worker(env, log, app).start()
    try:
        worker.wait_ready_or_up()
        yield worker.url
    finally:
        worker.stop()
        log.unlink(missing_ok=True)


class Proxy:
    """A TCP proxy to a real server that the test can cut (refused, live links reset)."""

    def __init__(self, host: str, port: int):
        self.target, self.port = (host, port), free_port()
        self.links: set = set()
        self.guard = threading.Lock()
        self.restore()

    def restore(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self.server,), daemon=True).start()

    def cut(self) -> None:
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self.server.close()
        with self.guard:
            links, self.links = self.links, set()
        for s in links:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.guard:
                self.links |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def via(url: str, port: int) -> str:
    """Return `url` with its port replaced (to go through the proxy or to a closed port)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = netloc[-1].rsplit(":", 1)[0] + f":{port}"
    return urlunsplit(parts._replace(netloc="@".join([*netloc[:-1], host])))


# ---- backends: the env of a worker, and direct readers of what it stored ---------------


def _postgres(dsn: str, unique: str, tmp_path: Path, dsn_for_worker: str | None = None):
    """The worker's TOOLNEXUS_DATABASE: the library's default tables, in a schema of the
    test's own (chosen by the DSN's search_path, as any deployment may)."""
    import psycopg

    from toolnexus.store import postgres_backend

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {unique}")
    sep = "&" if "?" in dsn else "?"
    schema = f"{sep}options=-csearch_path%3D{unique}%2Cpublic"  # pg_trgm lives in public
    env = {"TOOLNEXUS_DATABASE": (dsn_for_worker or dsn) + schema}

    def readers():
        b = postgres_backend(dsn + schema)
        return b["store"], b["log"], b["close"]

    def cleanup():
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {unique} CASCADE")

    return env, readers, cleanup


def _redis(url: str, unique: str, tmp_path: Path, url_for_worker: str | None = None):
    """The worker's TOOLNEXUS_DATABASE: the library's default key prefix; the test's
    conversation ids all contain `unique`, so its keys are found and removed after."""
    import redis

    from toolnexus.store import redis_backend

    env = {"TOOLNEXUS_DATABASE": url_for_worker or url}

    def readers():
        b = redis_backend(url)
        return b["store"], b["log"], b["close"]

    def cleanup():
        r = redis.Redis.from_url(url)
        keys = list(r.scan_iter(f"toolnexus:*{unique}*"))
        if keys:
            r.delete(*keys)
        r.srem("toolnexus:ids", *[m for m in r.smembers("toolnexus:ids") if unique.encode() in m]
               or [b"-"])  # fmt: skip

    return env, readers, cleanup


BACKENDS = {"postgres": (_postgres, "postgres_dsn"), "redis": (_redis, "redis_url")}


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


def base_env(fp) -> dict:
    return {"TOOLNEXUS_BASE_URL": fp.url, "TOOLNEXUS_MODEL": "fake", "OPENAI_API_KEY": "k"}


# ---- checking a stored conversation ------------------------------------------------------


def exchanges(transcript) -> list[tuple[str, str]]:
    """Return [(user text, final answer)] of a transcript, asserting its shape on the way.

    Shape: user, then any number of (assistant tool calls, their results), then one
    assistant answer; no tool result without its call, no call left unanswered.
    """
    d = dangling(transcript)
    assert d["unanswered"] == () and d["orphaned"] == (), d
    out, open_user = [], None
    for m in transcript:
        if m["role"] == "user":
            assert open_user is None, f"two user messages in a row: {open_user!r}"
            open_user = m["content"]
        elif is_tool_result(m) or tool_call_ids(m):
            assert open_user is not None, "a tool step outside an exchange"
        else:
            assert m["role"] == "assistant" and open_user is not None, m
            out.append((open_user, m["content"]))
            open_user = None
    assert open_user is None, f"an exchange left without its answer: {open_user!r}"
    return out


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
    library's default ttl (30 s): waiters on that conversation wait for it."""
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


def test_bad_input_is_a_clear_4xx_and_sse_history_delete_work(provider, tmp_path):
    env = {**base_env(provider), "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
    with serving(env) as base, httpx.Client(base_url=base, timeout=10) as http:
        bad = [
            ("POST", "/conversations//messages", {"json": {"text": "x"}}, 400, "bad_id"),
            ("POST", "/conversations/" + "a" * 129 + "/messages", {"json": {"text": "x"}},
             400, "bad_id"),
            ("POST", "/conversations/a%20b/messages", {"json": {"text": "x"}}, 400, "bad_id"),
            ("POST", "/conversations/a%2Fb/messages", {"json": {"text": "x"}}, 400, "bad_id"),
            ("POST", "/conversations/u/messages", {"content": b"{not json"}, 400, "bad_json"),
            ("POST", "/conversations/u/messages", {"json": ["text"]}, 400, "bad_json"),
            ("POST", "/conversations/u/messages", {"json": {}}, 422, "missing_text"),
            ("POST", "/conversations/u/messages", {"json": {"text": " "}}, 422, "bad_text"),
            ("POST", "/conversations/u/messages", {"json": {"text": 7}}, 422, "bad_text"),
            ("POST", "/conversations/u/messages", {"content": b"x" * 70_000}, 413, "too_large"),
            ("GET", "/conversations/u/history?since=2026-13-01", {}, 400, "bad_date"),
            ("GET", "/conversations/u/history?until=yesterdayish", {}, 400, "bad_date"),
            ("GET", "/conversations/u/history?limit=0", {}, 400, "bad_limit"),
            ("GET", "/conversations/u/history?contain=x", {}, 400, "bad_query"),
            ("GET", "/conversations/", {}, 400, "bad_id"),
            ("GET", "/conversations/nobody", {}, 404, "not_found"),
            ("GET", "/nowhere", {}, 404, "not_found"),
            ("PUT", "/health", {}, 405, "method_not_allowed"),
        ]  # fmt: skip
        for method, path, kw, status, code in bad:
            r = http.request(method, path, **kw)
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), (path, r.text)
            assert "Traceback" not in r.text

        assert http.post("/conversations/u/messages", json={"text": "hello"}).json()["text"] == (
            "re: hello"
        )
        with http.stream("POST", "/conversations/u/messages", json={"text": "sum #add"},
                         headers={"accept": "text/event-stream"}) as r:  # fmt: skip
            assert r.headers["content-type"].startswith("text/event-stream")
            kinds = [b.split("\n")[0] for b in r.read().decode().split("\n\n") if b]
        assert {"event: tool_call", "event: tool_result", "event: text"} <= set(kinds)
        assert kinds[-1] == "event: done"
        transcript = http.get("/conversations/u").json()["messages"]
        assert exchanges(transcript) == [("hello", "re: hello"), ("sum #add", "re: sum #add = 5")]
        hits = http.get("/conversations/u/history", params={"contains": "SUM", "since": "today"})
        assert [e["text"] for e in hits.json()["entries"]] == ["sum #add", "re: sum #add = 5"]
        assert http.get("/conversations/u/history?until=2000-01-01").json()["entries"] == []
        assert (
            http.get("/conversations/u/history?limit=1").json()["entries"][0]["direction"] == "ai"
        )

        gone = http.delete("/conversations/u").json()
        assert gone == {"conversation_id": "u", "deleted": True, "log_entries_removed": 4}
        assert http.get("/conversations/u").status_code == 404
        assert http.get("/conversations/u/history").json()["entries"] == []
        assert http.get("/health").json()["status"] == "ok"


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


# ---- every bad input is a 4xx: named cases and a property over the routes -------------

SECRET = "sk-test-never-shown-0123456789"


def secret_model(body: dict, dialect: str) -> dict:
    """Like `model`; "#leak" asks for the tool, then fails with the key in the error body."""
    messages = body["messages"]
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if "#leak" in user and messages[-1]["role"] == "tool":
        return {"status": 500, "body": json.dumps({"error": f"bad key {SECRET}"})}
    if "#leak" in user:
        return {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}
    return model(body, dialect)


@contextmanager
def in_process(env: dict, monkeypatch):
    """The example app served by uvicorn in a thread of this process, with `env`; yield
    an httpx client on it (real loopback HTTP, without a process start per test)."""
    from examples.chat_service.app import app

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the app did not start"
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield http
    finally:
        server.should_exit = True
        thread.join(15)


def assert_clean(r, allowed: set[int] = frozenset({200})) -> None:
    """A response is an answer or a JSON error of the table: no 500 but store_corrupt."""
    assert "Traceback" not in r.text and SECRET not in r.text, r.text
    if r.status_code in allowed:
        return
    code = r.json()["error"]["code"]
    assert r.status_code != 500 or code == "store_corrupt", (r.status_code, r.text)
    assert r.status_code < 500 or code in {"store_unavailable", "busy"}, (r.status_code, r.text)


@pytest.mark.parametrize(
    "method, path, body, status, code",
    [
        ("GET", "/conversations/u/history?since=0001-01-01T00:00%2B05:00", None, 400, "bad_date"),
        ("GET", "/conversations/u/history?until=9999-12-31T23:59:59-05:00", None, 400, "bad_date"),
        ("GET", "/conversations/u/history?limit=%C2%B2", None, 400, "bad_limit"),
        ("GET", "/conversations/u/history?limit=%D9%A3", None, 400, "bad_limit"),
        ("GET", "/conversations/u/history?contains=a%00b", None, 400, "bad_query"),
        ("POST", "/conversations/u/messages", b"[" * 60_000, 400, "bad_json"),
        ("POST", "/conversations/u/messages", b'{"text": "' + b"[" * 30_000 + b'"}', 200, None),
        ("POST", "/conversations/u/messages", b'{"a":' * 9_000 + b"1" + b"}" * 9_000, 400,
         "bad_json"),
        ("POST", "/conversations/u/messages", b'{"text": "a\\ud800b"}', 422, "bad_text"),
        ("POST", "/conversations/u/messages", b'{"text": "a\\u0000b"}', 422, "bad_text"),
    ],
)  # fmt: skip
def test_the_inputs_that_gave_500s_are_a_clear_4xx(
    method, path, body, status, code, provider, postgres_dsn, unique, tmp_path, monkeypatch
):
    """On PostgreSQL: out-of-range dates (OverflowError), non-ASCII digits (int() fails),
    deep JSON (RecursionError), lone surrogates (UnicodeEncodeError) and NUL (DataError)
    each answered 500 in the previous example; each is now a 4xx of the table."""
    env, _, cleanup = _postgres(postgres_dsn, unique, tmp_path)
    try:
        with in_process({**base_env(provider), **env}, monkeypatch) as http:
            r = http.request(method, path, content=body)
            assert r.status_code == status, r.text
            if code is not None:
                assert r.json()["error"]["code"] == code
            assert_clean(r)
    finally:
        cleanup()


def test_no_input_gets_a_500_or_a_traceback(provider, postgres_dsn, unique, tmp_path, monkeypatch):
    """Any id, any query values and any body bytes, on every route and method, on
    PostgreSQL (which refuses NUL): an answer or a JSON error of the table; never a 500
    (but store_corrupt) nor a traceback."""
    from urllib.parse import quote, urlencode

    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    # Mostly valid ids and GETs of /history, so most examples get past the id check to
    # the query; any text as an id, and every route and method, all the same.
    valid = st.from_regex(r"[a-z0-9._:@-]{1,8}", fullmatch=True)
    ids = st.one_of(valid, valid, st.text(max_size=140))
    hard = st.sampled_from(["today", "0001-01-01T00:00+05:00", "9999-12-31T23:59:59-05:00",
                            "²", "a\x00b", "\ud800", "2026-13-01", " "])  # fmt: skip
    values = st.one_of(hard, hard, hard, st.text(max_size=40), st.integers(-5, 5000).map(str))
    queries = st.fixed_dictionaries(
        {}, optional=dict.fromkeys(["contains", "since", "until", "limit", "x"], values)
    )
    json_text = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.sampled_from(["text", "a"]), inner, max_size=2)),
        max_leaves=8,
    ).map(json.dumps)  # fmt: skip
    texts = st.text(max_size=30).map(lambda t: json.dumps({"text": t}).encode())
    bodies = st.one_of(st.binary(max_size=200), json_text.map(str.encode), texts)
    routes = st.sampled_from(["/history", "/history", "/messages", ""])
    methods = st.sampled_from(["GET", "GET", "POST", "DELETE", "PUT"])
    env, _, cleanup = _postgres(postgres_dsn, unique, tmp_path)
    try:
        with in_process({**base_env(provider), **env}, monkeypatch) as http:
            many = settings(max_examples=max(30, settings.default.max_examples), deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])  # fmt: skip

            def request(method: str, path: str, query: dict, body: bytes) -> None:
                query = urlencode(query, errors="surrogatepass")  # a lone surrogate: as its bytes
                assert_clean(http.request(method, path + "?" + query, content=body))

            @many
            @given(methods, ids, routes, queries, bodies)
            def any_request(method, id, route, query, body):
                request(method, "/conversations/" + quote(id, safe="") + route, query, body)

            # The cases first (hypothesis seldom draws a list's far end), then any.
            @many
            @given(queries)
            @example({"since": "0001-01-01T00:00+05:00"})
            @example({"until": "9999-12-31T23:59:59-05:00"})
            @example({"limit": "²"})
            @example({"contains": "a\x00b"})
            @example({"contains": "\ud800"})
            def any_history_query(query):
                request("GET", "/conversations/u/history", query, b"")

            @many
            @given(bodies)
            @example(b"[" * 5000)
            @example(b'{"text": ' + b"[" * 5000 + b"}")
            @example(b'{"text": "\\ud800"}')
            @example(b'{"text": "\\u0000"}')
            def any_message_body(body):
                request("POST", "/conversations/u/messages", {}, body)

            any_request()
            any_history_query()
            any_message_body()
    finally:
        cleanup()


def test_the_sse_error_event_never_shows_the_key(tmp_path, monkeypatch):
    """A provider failing mid-stream with the key in its error body: the error event says
    what failed, without the key (scrubbed by the library and again by the app)."""
    with fake_provider(secret_model) as fp:
        env = {**base_env(fp), "OPENAI_API_KEY": SECRET, "TOOLNEXUS_RETRIES": "0",
               "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}  # fmt: skip
        with in_process(env, monkeypatch) as http:
            headers = {"accept": "text/event-stream"}
            r = http.post("/conversations/s/messages", json={"text": "x #leak"}, headers=headers)
    assert r.status_code == 200 and "event: tool_result" in r.text
    assert "event: error" in r.text and '"provider_error"' in r.text
    assert SECRET not in r.text and "Traceback" not in r.text
