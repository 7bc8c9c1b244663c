"""What routing costs: sticky against round-robin routing in the copyable chat service.

    python benchmarks/service/routing.py [--quick] [--store postgres|redis|sqlite]
        [--workers 4] [--conversations 300] [--messages 1000] [--clients 16]
        [--seconds 20] [--modes sticky,round-robin] [--env KEY=VALUE]

The example service (examples/chat_service) runs as N uvicorn workers on their own ports
sharing one database (its store, lock and message log), against the light fake model of
load.py (a fixed 50 ms). L conversations are filled through the store directly to about
`--messages` messages each, before any worker starts; L is chosen larger than what a
worker remembers (the runtime's memo: MEMO_BYTES of JSON, MEMO_SIZE conversations; the
store's own memo: 256 ids), and small enough that a worker's share of them under sticky
routing fits.

Closed-loop clients each cycle through conversations of their own (every conversation
is live: it comes back once per cycle), and send each request
  sticky        to the conversation's own worker: crc32 of its id, modulo N
  round-robin   to the next worker, one counter over all requests (a load balancer's
                round-robin: a conversation's next message lands anywhere)
Per mode the workers are started fresh; one pass over every conversation warms them
(and is not measured: under either routing a worker's first sight of a conversation is
cold), then a window of `--seconds` is measured. Printed per mode: the workers' CPU per
request (ms; from /proc, as load.py), requests/s, p50, each worker's peak RSS (VmHWM)
and its RSS before the first request; then round-robin / sticky. On a shared machine
trust CPU per request over requests/s; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.service import load  # noqa: E402

WORDS = "the quick brown fox jumps over the lazy dog while the model keeps talking "


def history(n: int) -> list[dict]:
    """Return n alternating user/assistant messages of about 150 characters each (as
    benchmarks/turn_growth.py: about 188 bytes of JSON a message)."""
    role = ("user", "assistant")
    return [{"role": role[i % 2], "content": f"{i}: {WORDS * 2}"} for i in range(n)]


def fill(url: str, ids: list[str], messages: int) -> float:
    """Save a `messages`-long transcript under each id (the example's namespace "demo:")
    through the store directly; return the seconds it took."""
    from toolnexus.core.transcript import freeze_transcript
    from toolnexus.store import open_backend

    t0 = time.perf_counter()
    db = open_backend(url)
    try:
        given = freeze_transcript(history(messages))  # one value: encoded once
        for cid in ids:
            db["store"]["save"](load.DEMO + cid, given)
    finally:
        db["close"]()
    return time.perf_counter() - t0


def status_kb(pid: int) -> dict[str, int]:
    """Return {VmRSS, VmHWM} of a process in KiB (Linux /proc)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


def router(mode: str, workers: int):
    """Return route(conversation id) -> worker index for a routing mode."""
    if mode == "sticky":
        return lambda cid: zlib.crc32(cid.encode()) % workers
    turn = itertools.count()
    return lambda cid: next(turn) % workers


async def client(convs, ports, route, start: int, stop: float | None, out: list) -> None:
    """Send one message per conversation in turn, from convs[start], until `stop` (or once
    round when stop is None); append (t0, seconds, status, worker) to out."""
    conns: dict[int, tuple] = {}
    k = start
    try:
        while (k - start < len(convs)) if stop is None else (time.perf_counter() < stop):
            cid = convs[k % len(convs)]
            w = route(cid)
            body = b'{"text": "message %d"}' % k
            t0 = time.perf_counter()
            try:
                if w not in conns:
                    conns[w] = await asyncio.open_connection("127.0.0.1", ports[w])
                reader, writer = conns[w]
                path = f"/conversations/{cid}/messages"
                status = await load.post(reader, writer, f"127.0.0.1:{ports[w]}", path, body)
            except (OSError, asyncio.IncompleteReadError):
                status = 0
                conns.pop(w, None)
            out.append((t0, time.perf_counter() - t0, status, w))
            k += 1
    finally:
        for _, writer in conns.values():
            writer.close()


async def one_pass(convs_of: list, ports: list, route) -> list:
    """Every client sends one message to each of its conversations."""
    out: list = []
    await asyncio.gather(*(client(c, ports, route, 0, None, out) for c in convs_of))
    return out


async def window(convs_of, ports, route, pids, settle: float, seconds: float) -> dict:
    """Run the clients for settle + seconds; measure the last `seconds`."""
    out: list = []
    start = time.perf_counter()
    begin, end = start + settle, start + settle + seconds
    tasks = [asyncio.create_task(client(c, ports, route, 0, end, out)) for c in convs_of]
    await asyncio.sleep(max(0.0, begin - time.perf_counter()))
    cpu0, db0, machine0 = (
        {p: load.cpu_seconds(p) for p in pids},
        load.database_cpu(),
        load.machine_busy(),
    )
    await asyncio.sleep(max(0.0, end - time.perf_counter()))
    cpu = {p: load.cpu_seconds(p) - c for p, c in cpu0.items()}
    db1, machine = load.database_cpu(), load.machine_busy()
    db = sum(db1[p] - c for p, c in db0.items() if p in db1)
    await asyncio.gather(*tasks)
    inside = [(dt, s, w) for t0, dt, s, w in out if begin <= t0 and t0 + dt <= end]
    ok = sorted(dt for dt, s, _ in inside if s == 200)
    if not ok:
        raise RuntimeError(f"no successful request in the window: {out[:5]}")
    return {
        "requests": len(ok),
        "rps": len(ok) / seconds,
        "p50_ms": statistics.median(ok) * 1000,
        "errors": sum(1 for _, s, _ in inside if s != 200),
        "per_worker_requests": [
            sum(1 for _, s, x in inside if x == w and s == 200) for w in range(len(ports))
        ],  # fmt: skip
        "worker_cpu_s": [cpu[p] for p in pids],
        "database_cpu_ms_per_request": 1000 * db / len(ok),
        "machine_busy_pct": round(
            100 * (machine[0] - machine0[0]) / max(1, machine[1] - machine0[1])
        ),
    }


def run_mode(mode: str, env: dict, a, convs_of: list) -> dict:
    """Start the workers fresh, warm them with one pass, measure a window; stop them."""
    ports = [load.free_port() for _ in range(a.workers)]
    procs = [load.start_worker(env, p) for p in ports]
    try:
        for p, proc in zip(ports, procs, strict=True):
            load.wait_ready(p, proc, timeout=60)
        pids = [proc.pid for proc in procs]
        rss0 = [status_kb(p)["VmRSS"] for p in pids]
        route = router(mode, a.workers)
        t0 = time.perf_counter()
        warm = asyncio.run(one_pass(convs_of, ports, route))
        warm_s = time.perf_counter() - t0
        if any(s != 200 for _, _, s, _ in warm):
            raise RuntimeError(
                f"{mode}: the warm-up pass failed: {[x for x in warm if x[2] != 200][:3]}"
            )
        load_avg = os.getloadavg()
        r = asyncio.run(window(convs_of, ports, route, pids, a.settle, a.seconds))
        mem = [status_kb(p) for p in pids]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(20)
    cpu = r.pop("worker_cpu_s")
    return {
        "mode": mode,
        **r,
        "worker_cpu_ms_per_request": 1000 * sum(cpu) / r["requests"],
        "worker_cpu_pct": [round(100 * c / a.seconds) for c in cpu],
        "rss_start_mb": [round(k / 1024) for k in rss0],
        "rss_end_mb": [round(m["VmRSS"] / 1024) for m in mem],
        "peak_rss_mb": [round(m["VmHWM"] / 1024) for m in mem],
        "warm_pass_s": warm_s,
        "load_avg_1m": load_avg[0],
    }


def print_mode(r: dict) -> None:
    print(
        f"  {r['mode']:11s} {r['worker_cpu_ms_per_request']:6.2f} ms worker CPU/request "
        f"(database {r['database_cpu_ms_per_request']:.2f})  {r['rps']:6.1f} req/s  "
        f"p50 {r['p50_ms']:6.1f} ms  errors {r['errors']}  requests per worker "
        f"{r['per_worker_requests']}  peak RSS MB {r['peak_rss_mb']} (at start "
        f"{r['rss_start_mb']})  machine {r['machine_busy_pct']}% busy, load {r['load_avg_1m']:.1f}"
    )


def parse(argv: list[str] | None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 workers, SQLite, small: a check")
    p.add_argument("--store", choices=["postgres", "redis", "sqlite"], default="postgres")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--conversations", type=int, default=300)
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--settle", type=float, default=1.0)
    p.add_argument("--modes", default="sticky,round-robin")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the workers")
    a = p.parse_args(argv)
    if a.quick:  # the runtime's bound made small, so round-robin passes it here too
        a.store, a.workers, a.conversations, a.messages = "sqlite", 2, 8, 40
        a.clients, a.seconds, a.settle = 4, 1.5, 0.3
        a.env = ["TOOLNEXUS_MEMO_BYTES=40000", *a.env]
    return a


def main(argv: list[str] | None = None) -> dict:
    """Run both routings, print the figures and their ratio, return them."""
    a = parse(argv)
    load.APP[0] = load.APPS["example"]
    tag = load.RUN_TAG[0] = "route" + uuid.uuid4().hex[:8]
    ids = [f"{tag}-{i}" for i in range(a.conversations)]
    convs_of = [ids[j :: a.clients] for j in range(a.clients)]
    provider, url = load.start_provider(load.LATENCY)
    report: dict = {"store": a.store, "workers": a.workers, "conversations": a.conversations,
                    "messages": a.messages, "clients": a.clients, "modes": {}}  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env, cleanup = load.example_env(a.store, tag, tmp)
            env = {**env, "TOOLNEXUS_BASE_URL": url, "TOOLNEXUS_MODEL": "fake",
                   "TOOLNEXUS_API_KEY": "k", "OPENAI_API_KEY": "k",
                   **dict(kv.split("=", 1) for kv in a.env)}  # fmt: skip
            try:
                report["fill_s"] = fill(env["TOOLNEXUS_DATABASE"], ids, a.messages)
                print(f"routing, {a.store}, {a.workers} workers, {a.conversations} conversations "
                      f"of {a.messages} messages (filled in {report['fill_s']:.1f} s), "
                      f"{a.clients} clients, {a.seconds:g} s windows")  # fmt: skip
                for mode in a.modes.split(","):
                    report["modes"][mode] = r = run_mode(mode, env, a, convs_of)
                    print_mode(r)
            finally:
                cleanup()
    finally:
        provider.stdin.close()
        provider.wait(10)
    modes = report["modes"]
    if {"sticky", "round-robin"} <= set(modes):
        ratio = (modes["round-robin"]["worker_cpu_ms_per_request"]
                 / modes["sticky"]["worker_cpu_ms_per_request"])  # fmt: skip
        report["round-robin/sticky"] = ratio
        print(f"  round-robin / sticky: {ratio:.2f}x worker CPU per request")
    return report


if __name__ == "__main__":
    main()
