"""The example chat service under load: throughput and latency against a 50 ms fake model.

    python benchmarks/service/load.py [--quick] [--store postgres|redis|sqlite]
                                      [--workers 1,2] [--clients 8,32,128] [--seconds 4]
    python benchmarks/service/load.py --instructions [--store ...] [--env KEY=VALUE]

The fake provider (a subprocess) answers every request after a fixed 50 ms, so what is
measured is the service's own cost: HTTP in, the conversation lock, the store load and
save, the message log, the HTTP call out. N workers are N uvicorn processes on their
own ports sharing only the store; virtual clients (closed loop, keep-alive, one asyncio
task each, a minimal HTTP/1.1 client so the load generator stays light) are spread
over the workers, each talking in its own conversations (a new one every 8 messages).

For each point: requests/s, p50/p99, the p50 overhead over the 50 ms model, throughput
as a share of the ideal (clients / 50 ms), and the CPU used by workers and provider.
A "direct" row per client count is the same load sent straight to the provider: the
floor this machine and harness can reach at all.

Wall-clock figures on a shared machine drift by 10-20% between runs. `--instructions`
gives a repeatable one instead: it runs one worker under valgrind's callgrind, sends
warm-up requests, then counts the instructions the worker executes per request (4
clients at a time, user space only: the kernel's share of CPU is not in it). Use it to
compare two versions of the code; it needs valgrind and takes a minute or two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LATENCY = 0.050
APPS = {"tuned": "benchmarks.service.app:app", "example": "examples.chat_service.app:app"}
APP = [APPS["tuned"]]  # the app the workers run (--app)
RUN_TAG = [""]  # every conversation id of a run starts with it (the cleanup finds them)
TICKS = os.sysconf("SC_CLK_TCK")


# ---- processes ------------------------------------------------------------------------


def serve_provider(latency: float) -> None:
    """Run the fake provider until stdin closes (the benchmark's subprocess)."""
    from http.server import ThreadingHTTPServer

    sys.path.insert(0, str(ROOT))
    from toolnexus.testing import fake_provider

    # The stdlib's listen backlog is 5: a burst of new connections would see SYNs dropped
    # and retried a second later. This process serves only the benchmark.
    ThreadingHTTPServer.request_queue_size = 1024
    with fake_provider(
        lambda body, dialect: {"content": "ok"}, delay=latency, validate=False
    ) as fp:
        print(fp.url, flush=True)
        sys.stdin.read()


def serve_light_provider(latency: float) -> None:
    """Run a light fake provider until stdin closes: one asyncio task per connection.

    The same OpenAI wire format as `fake_provider` (a JSON chat completion after a fixed
    latency), without its per-request thread and email-parser headers: on a machine
    where the provider shares the cores with the workers, the provider's own CPU (about
    0.4 ms a request for fake_provider here) is taken from the service being measured.
    A real provider runs elsewhere. Whole answers only (the benchmark sends no SSE).
    """
    sys.path.insert(0, str(ROOT))
    from toolnexus.testing.fake_provider import openai_response

    body = json.dumps(openai_response({"content": "ok"}, "fake")).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    answer = head % len(body) + body

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in request.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                json.loads(await reader.readexactly(length))  # a real server reads the body
                await asyncio.sleep(latency)
                writer.write(answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}/v1", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(main())


def start_provider(latency: float, kind: str = "light") -> tuple[subprocess.Popen, str]:
    flag = "--serve-light-provider" if kind == "light" else "--serve-provider"
    proc = subprocess.Popen(
        [sys.executable, __file__, flag, str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, proc.stdout.readline().strip()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_worker(env: dict, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "uvicorn", APP[0], "--host",
           "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
           "--backlog", "1024"]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env})


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"worker on port {port} exited ({proc.returncode})")
            try:
                if http.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"worker on port {port} not ready")


def machine_busy() -> tuple[float, float]:
    """Return (busy, total) CPU time of the whole machine so far (Linux /proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def database_cpu() -> dict[int, float]:
    """Return {pid: CPU seconds} of every PostgreSQL and Redis server process (Linux /proc)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().startswith(("postgres", "redis-server")):
                    out[int(entry.name)] = cpu_seconds(int(entry.name))
            except OSError:  # the process ended meanwhile
                pass
    return out


def cpu_seconds(pid: int) -> float:
    """Return the user+system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


# ---- the load generator -------------------------------------------------------------------


async def post(reader, writer, host: str, path: str, body: bytes) -> int:
    """Send one keep-alive POST and read the whole response; return its status."""
    writer.write(
        b"POST %s HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (path.encode(), host.encode(), len(body), body)
    )
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(head[9:12])


async def virtual_client(
    n: int, target: tuple[str, int, str], tag: str, stop: float, out: list, delay: float = 0.0
):
    """Send messages in a closed loop until `stop`; append (start, seconds, status) to out.

    `delay` staggers the first request, so clients do not all start in the same instant.
    """
    host, port, prefix = target
    reader = writer = None
    k = 0
    await asyncio.sleep(delay)
    while time.perf_counter() < stop:
        path = f"{prefix}/{tag}-{n}-{k // 8}/messages" if prefix else "/v1/chat/completions"
        body = (
            json.dumps({"text": f"message {k}"}).encode()
            if prefix
            else json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
        )
        t0 = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            status = await post(reader, writer, f"{host}:{port}", path, body)
        except (OSError, asyncio.IncompleteReadError):
            status, writer = 0, None
        out.append((t0, time.perf_counter() - t0, status))
        k += 1
    if writer is not None:
        writer.close()


async def drive(
    targets: list, clients: int, warmup: float, seconds: float, pids: list, herd: bool = False
) -> dict:
    """Run `clients` virtual clients over `targets`; measure the window after warmup."""
    tag = RUN_TAG[0] + uuid.uuid4().hex[:8]
    out: list = []
    start = time.perf_counter()
    begin, end = start + warmup, start + warmup + seconds
    # Starts spread over one model latency: with a fixed latency, clients that start
    # together stay in step, and every request of a step arrives in the same instant
    # (a burst of work that real, unsynchronised clients do not make). --herd keeps it.
    spread = 0.0 if herd else LATENCY / clients
    tasks = [
        asyncio.create_task(virtual_client(i, targets[i % len(targets)], tag, end, out, i * spread))
        for i in range(clients)
    ]
    await asyncio.sleep(max(0.0, begin - time.perf_counter()))
    cpu0, machine0, me0 = {pid: cpu_seconds(pid) for pid in pids}, machine_busy(), os.times()
    db0 = database_cpu()
    await asyncio.sleep(max(0.0, end - time.perf_counter()))
    cpu = {pid: (cpu_seconds(pid) - c) / seconds for pid, c in cpu0.items()}
    db1 = database_cpu()  # server processes alive through the window (pooled sessions)
    db = sum(db1[pid] - c for pid, c in db0.items() if pid in db1) / seconds
    machine, me = machine_busy(), os.times()
    busy = (machine[0] - machine0[0]) / max(1, machine[1] - machine0[1])
    await asyncio.gather(*tasks)
    window = [(dt, s) for t0, dt, s in out if begin <= t0 and t0 + dt <= end]
    ok = sorted(dt for dt, s in window if s == 200)
    if not ok:
        raise RuntimeError(f"no successful request in the window: {out[:5]}")
    p50, p99 = statistics.median(ok), ok[min(len(ok) - 1, int(len(ok) * 0.99))]
    rps = len(ok) / seconds
    return {
        "clients": clients,
        "rps": rps,
        "ideal_pct": 100 * rps / (clients / LATENCY),
        "p50_ms": p50 * 1000,
        "p99_ms": p99 * 1000,
        "overhead_p50_ms": (p50 - LATENCY) * 1000,
        "errors": sum(1 for _, s in window if s != 200),
        "cpu": cpu,
        # Share of all the machine's cores busy (every process, ours and others').
        "machine_busy_pct": round(100 * busy),
        "database_cpu_pct": round(100 * db),
        "loadgen_cpu_pct": round(100 * (me.user + me.system - me0.user - me0.system) / seconds),
    }


# ---- instructions per request (callgrind) -----------------------------------------------


def callgrind_total(path: str) -> int:
    """Return the instruction count of a callgrind output file (its `totals:` line).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".cg", delete=False) as f:
    ...     _ = f.write("events: Ir\\ntotals: 1234\\n")
    >>> callgrind_total(f.name)
    1234
    """
    for line in Path(path).read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise ValueError(f"{path} has no totals line")


async def _sequence(port: int, tag: str, requests: int, clients: int) -> None:
    async def one(n: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for k in range(requests // clients):
            body = json.dumps({"text": f"message {k}"}).encode()
            path = f"/conversations/{tag}-{n}-{k // 8}/messages"
            status = await post(reader, writer, f"127.0.0.1:{port}", path, body)
            if status != 200:
                raise RuntimeError(f"request failed with {status}")
        writer.close()

    await asyncio.gather(*(one(n) for n in range(clients)))


def instructions_per_request(
    env: dict, requests: int = 200, clients: int = 4, keep: str | None = None
) -> float:
    """Return the instructions one worker executes per exchange, counted by callgrind."""
    import shutil

    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--instructions needs valgrind (callgrind) on the PATH")
    port, out = free_port(), os.path.join(tempfile.mkdtemp(), "callgrind.out")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p", sys.executable,
           "-m", "uvicorn", APP[0], "--port", str(port),
           "--log-level", "warning", "--no-access-log"]  # fmt: skip
    env = {**env, "TOOLNEXUS_BACKEND_TIMEOUT": "30"}  # everything is slow under valgrind
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc, timeout=600)
        asyncio.run(_sequence(port, "warm" + uuid.uuid4().hex[:6], 8 * clients, clients))
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], capture_output=True)
        asyncio.run(_sequence(port, "run" + uuid.uuid4().hex[:6], requests, clients))
        # A dump holds what ran since the previous one: exactly the measured requests.
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], capture_output=True)
        if keep:  # the dump itself, for callgrind_annotate
            shutil.copy(f"{out}.{proc.pid}.2", keep)
        return callgrind_total(f"{out}.{proc.pid}.2") / (requests // clients * clients)
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)


# ---- the benchmark -------------------------------------------------------------------------


DEMO = "demo:"  # the example's local demo mode keeps every id under the principal "demo"


def example_env(store: str, tag: str, tmp: str) -> tuple[dict, callable]:
    """Return the copyable example's environment (TOOLNEXUS_DATABASE), and a cleanup.

    The example keeps the library's default tables and keys; the benchmark's
    conversation ids all start with `tag`, so the cleanup removes exactly those.
    """
    if store == "postgres":
        dsn = os.environ.get("TOOLNEXUS_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1/test")

        def drop() -> None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                for t in ("toolnexus_messages", "toolnexus_messages_heads"):
                    conn.execute(f"DELETE FROM {t} WHERE id LIKE %s", (DEMO + tag + "%",))
                conn.execute(
                    "DELETE FROM toolnexus_log WHERE conversation_id LIKE %s", (DEMO + tag + "%",)
                )

        return {"TOOLNEXUS_DATABASE": dsn, "TOOLNEXUS_DEMO": "1"}, drop
    if store == "redis":
        url = os.environ.get("TOOLNEXUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

        def clean() -> None:
            import redis

            r = redis.Redis.from_url(url)
            keys = list(r.scan_iter(f"toolnexus:*{tag}*"))
            if keys:
                r.delete(*keys)

        return {"TOOLNEXUS_DATABASE": url, "TOOLNEXUS_DEMO": "1"}, clean
    return {"TOOLNEXUS_DATABASE": f"sqlite:{tmp}/chat.db", "TOOLNEXUS_DEMO": "1"}, lambda: None


def store_env(store: str, tag: str, tmp: str) -> tuple[dict, callable]:
    """Return the worker environment of a store kind, and a cleanup function."""
    if APP[0] == APPS["example"]:
        return example_env(store, tag, tmp)
    if store == "postgres":
        dsn = os.environ.get("TOOLNEXUS_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1/test")

        def drop() -> None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                for t in ("_t", "_t_heads", "_l"):
                    conn.execute(f"DROP TABLE IF EXISTS {tag}{t}")

        # Each request in flight holds a lock connection: 24 + 4 per worker stays well
        # under the server's max_connections (100) that other users share.
        env = {"TOOLNEXUS_STORE": dsn, "TOOLNEXUS_STORE_TABLE": f"{tag}_t",
               "TOOLNEXUS_LOG_TABLE": f"{tag}_l", "TOOLNEXUS_MAX_INFLIGHT": "24",
               "TOOLNEXUS_POOL_SIZE": "4"}  # fmt: skip
        return env, drop
    if store == "redis":
        url = os.environ.get("TOOLNEXUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

        def clean() -> None:
            import redis

            r = redis.Redis.from_url(url)
            keys = list(r.scan_iter(f"{tag}:*"))
            if keys:
                r.delete(*keys)

        env = {"TOOLNEXUS_STORE": url, "TOOLNEXUS_STORE_PREFIX": f"{tag}:",
               "TOOLNEXUS_LOG": f"sqlite:{tmp}/log.db",
               "TOOLNEXUS_MAX_INFLIGHT": "128"}  # fmt: skip
        return env, clean
    env = {"TOOLNEXUS_STORE": f"sqlite:{tmp}/chat.db", "TOOLNEXUS_MAX_INFLIGHT": "128"}
    return env, lambda: None


def run_point(env, workers, clients, warmup, seconds, provider, herd=False) -> dict:
    ports = [free_port() for _ in range(workers)]
    procs = [start_worker(env, p) for p in ports]
    try:
        for p, proc in zip(ports, procs, strict=True):
            wait_ready(p, proc)
            # One exchange first: a worker that sets up its tables and log on first use
            # (the example) is measured warm, like one that does so at start (tuned).
            asyncio.run(_sequence(p, RUN_TAG[0] + "warm" + uuid.uuid4().hex[:6], 1, 1))
        targets = [("127.0.0.1", p, "/conversations") for p in ports]
        pids = [proc.pid for proc in procs] + [provider.pid]
        r = asyncio.run(drive(targets, clients, warmup, seconds, pids, herd))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)
    cpu = r.pop("cpu")
    r["worker_cpu_pct"] = [round(100 * cpu[proc.pid]) for proc in procs]
    # CPU per answered request: the figure that decides where a machine saturates.
    r["worker_cpu_ms_per_request"] = 1000 * sum(cpu[proc.pid] for proc in procs) / r["rps"]
    r["database_cpu_ms_per_request"] = 10 * r["database_cpu_pct"] / r["rps"]
    r["provider_cpu_pct"] = round(100 * cpu[provider.pid])
    return {"workers": workers, **r}


def print_row(label: str, r: dict) -> None:
    cpu = r.get("worker_cpu_pct", "")
    per = (
        f"  ms CPU/request: workers {r['worker_cpu_ms_per_request']:.1f} "
        f"database {r['database_cpu_ms_per_request']:.1f}"
        if "worker_cpu_ms_per_request" in r
        else ""
    )
    print(
        f"  {label:9s} {r['clients']:4d} clients  {r['rps']:7.1f} req/s ({r['ideal_pct']:5.1f}% "
        f"of ideal)  p50 {r['p50_ms']:6.1f} ms (+{r['overhead_p50_ms']:5.1f})  p99 "
        f"{r['p99_ms']:6.1f} ms  errors {r['errors']}  cpu%: workers {cpu} provider "
        f"{r.get('provider_cpu_pct', '')} loadgen {r['loadgen_cpu_pct']} database "
        f"{r['database_cpu_pct']} machine {r['machine_busy_pct']}% of {os.cpu_count()} cores" + per
    )


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print the report, return the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one small point on SQLite")
    p.add_argument("--store", choices=["postgres", "redis", "sqlite"], default="postgres")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--clients", default="8,32,128")
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument(
        "--app",
        choices=sorted(APPS),
        default="tuned",
        help="tuned: benchmarks/service/app.py; example: examples/chat_service",
    )
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the workers")
    p.add_argument(
        "--instructions", action="store_true", help="callgrind: instructions per request"
    )
    p.add_argument("--keep", help="with --instructions: copy callgrind's dump to this path")
    p.add_argument(
        "--provider",
        choices=["light", "fake"],
        default="light",
        help="light: an asyncio fake model (default); fake: toolnexus.testing.fake_provider",
    )
    p.add_argument(
        "--herd", action="store_true", help="start all clients at once (they then stay in step)"
    )
    p.add_argument("--serve-provider", type=float, help=argparse.SUPPRESS)
    p.add_argument("--serve-light-provider", type=float, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve_provider is not None:
        serve_provider(a.serve_provider)
        return {}
    if a.serve_light_provider is not None:
        serve_light_provider(a.serve_light_provider)
        return {}
    store = "sqlite" if a.quick else a.store
    APP[0] = APPS[a.app]
    workers = [1] if a.quick else [int(x) for x in a.workers.split(",")]
    clients = [4] if a.quick else [int(x) for x in a.clients.split(",")]
    warmup, seconds = (0.2, 0.5) if a.quick else (1.0, a.seconds)
    provider, url = start_provider(LATENCY, a.provider)
    tag = RUN_TAG[0] = "bench" + uuid.uuid4().hex[:8]
    report: dict = {"store": store, "latency_ms": LATENCY * 1000, "points": [], "direct": []}
    try:
        host, port = url.split("//")[1].split("/")[0].split(":")
        print(
            f"service load, store={store}, {a.provider} fake model, latency {LATENCY * 1000:.0f} ms"
        )
        for c in [] if a.instructions else clients:
            direct = [(host, int(port), "")]
            r = asyncio.run(drive(direct, c, warmup, seconds, [provider.pid], a.herd))
            r["provider_cpu_pct"] = round(100 * r.pop("cpu")[provider.pid])
            report["direct"].append(r)
            print_row("direct", r)
        with tempfile.TemporaryDirectory() as tmp:
            env, cleanup = store_env(store, tag, tmp)
            env = {**env, "TOOLNEXUS_BASE_URL": url, "TOOLNEXUS_MODEL": "fake",
                   "TOOLNEXUS_API_KEY": "k", "OPENAI_API_KEY": "k",
                   "TOOLNEXUS_LOCK_TIMEOUT": "60",
                   **dict(kv.split("=", 1) for kv in a.env)}  # fmt: skip
            try:
                if a.instructions:
                    per = instructions_per_request(env, keep=a.keep)
                    report["instructions_per_request"] = per
                    print(f"  one worker: {per / 1e6:.2f}M instructions per request (callgrind)")
                    return report
                for w in workers:
                    for c in clients:
                        r = run_point(env, w, c, warmup, seconds, provider, a.herd)
                        report["points"].append(r)
                        print_row(f"{w} worker" + ("s" if w > 1 else ""), r)
            finally:
                cleanup()
    finally:
        provider.stdin.close()
        provider.wait(10)
    return report


if __name__ == "__main__":
    main()
