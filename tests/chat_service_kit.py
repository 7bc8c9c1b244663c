"""What the chat service tests share: the fake model, worker processes, an in-process
server, a cuttable TCP proxy, the backends' environments and a transcript checker."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from toolnexus.core.transcript import dangling, is_tool_result, tool_call_ids

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
        return as_demo(postgres_backend(dsn + schema))

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
        return as_demo(redis_backend(url))

    def cleanup():
        r = redis.Redis.from_url(url)
        keys = list(r.scan_iter(f"toolnexus:*{unique}*"))
        if keys:
            r.delete(*keys)
        r.srem("toolnexus:ids", *[m for m in r.smembers("toolnexus:ids") if unique.encode() in m]
               or [b"-"])  # fmt: skip

    return env, readers, cleanup


BACKENDS = {"postgres": (_postgres, "postgres_dsn"), "redis": (_redis, "redis_url")}


def base_env(fp) -> dict:
    """The worker's provider, and its local demo mode (loopback clients, principal "demo")."""
    return {"TOOLNEXUS_BASE_URL": fp.url, "TOOLNEXUS_MODEL": "fake", "OPENAI_API_KEY": "k",
            "TOOLNEXUS_DEMO": "1"}  # fmt: skip


def as_demo(b: dict) -> tuple:
    """(store, log, close) of a backend bundle as the demo principal's requests see them."""
    from toolnexus.store import namespaced

    log = namespaced("demo", b["log"]) if b["log"] is not None else None
    return namespaced("demo", b["store"]), log, b["close"]


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


@contextmanager
def in_process(env: dict, monkeypatch):
    """The example app served by uvicorn in a thread of this process, with `env`; yield
    an httpx client on it (real loopback HTTP, without a process start per test)."""
    import uvicorn

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
