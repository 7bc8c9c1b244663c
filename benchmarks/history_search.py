"""How fast the message log searches 100,000 messages, and what recording costs as it grows.

    python benchmarks/history_search.py            # 100,000 messages (about a minute)
    python benchmarks/history_search.py --quick    # 2,000 messages, a smoke run
    python benchmarks/history_search.py --postgres postgresql://postgres@127.0.0.1/test

Prints the median time of a rare-word `contains` query and of a one-day date-range
query for in_memory_log (a linear scan: the baseline), sqlite_log and, when a DSN is
given (or TOOLNEXUS_TEST_POSTGRES_DSN is set), postgres_log; then the scan/backend
ratios, and the median cost of recording one entry into a log of 1,000 entries vs
one of N. Targets: sqlite >= 20x the scan on the rare word at 100,000; recording at
100,000 <= 2x recording at 1,000.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from toolnexus.history import in_memory_log, make_entry, postgres_log, sqlite_log

RARE = "quetzalcoatl"
END = datetime(2026, 5, 9, tzinfo=UTC)
DAYS = 100


def messages(n: int, seed: int = 7) -> list:
    """Return `n` entries over the last 100 days; exactly 5 of them hold the rare word."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzéüß"
    vocab = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(3000)]
    rare_every = max(n // 5, 1)
    out = []
    for i in range(n):
        words = rng.choices(vocab, k=rng.randint(6, 24))
        if i % rare_every == rare_every // 2:
            words.insert(rng.randrange(len(words)), RARE.upper() if i % 2 else RARE)
        ts = END - timedelta(seconds=rng.uniform(0, DAYS * 86400))
        out.append(
            make_entry(f"conv-{rng.randrange(500)}", " ".join(words), rng.choice(["user", "ai"]),
                       ts, id=f"m{i}")
        )  # fmt: skip
    return out


def fill(log: dict, entries: Sequence) -> None:
    """Record `entries` in batches (one transaction each where the backend has record_many)."""
    for i in range(0, len(entries), 5000):
        log["record_many"](entries[i : i + 5000])


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Return the median wall time of `fn()` in milliseconds (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def search_times(log: dict, repeats: int) -> dict:
    """Return the median ms of the rare-word query and of a one-day date-range query."""
    day = END - timedelta(days=DAYS // 2)
    rare = median_ms(lambda: log["query"](contains=RARE), repeats)
    window = median_ms(
        lambda: log["query"](since=day, until=day + timedelta(days=1) - timedelta(microseconds=1)),
        repeats,
    )
    return {"rare": rare, "range": window}


def record_us(log: dict, count: int) -> float:
    """Return the median microseconds of recording one entry, `count` times, one by one."""
    times = []
    for i in range(count):
        e = make_entry("conv-bench", f"a new message number {i}", "user", END, id=uuid.uuid4().hex)
        t0 = time.perf_counter()
        log["record"](e)
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def _backends(tmp: Path, dsn: str | None) -> dict:
    """Return {name: fn(label) -> (log, cleanup)} for every backend to measure."""

    def memory(label):
        return in_memory_log(), lambda: None

    def sqlite(label):
        log = sqlite_log(tmp / f"{label}.db")
        return log, log["close"]

    found = {"memory": memory, "sqlite": sqlite}
    if dsn:

        def postgres(label):
            table = f"tn_bench_{label}_{uuid.uuid4().hex[:8]}"
            log = postgres_log(dsn, table=table)

            def cleanup():
                import psycopg

                log["close"]()
                with psycopg.connect(dsn) as conn:
                    conn.execute(f'DROP TABLE IF EXISTS "{table}"')

            return log, cleanup

        found["postgres"] = postgres
    return found


def _reachable(dsn: str) -> bool:
    try:
        import psycopg

        psycopg.connect(dsn, connect_timeout=3).close()
        return True
    except Exception:
        return False


def measure(n: int, small: int, repeats: int, record_count: int, dsn: str | None) -> dict:
    """Run every measurement; return the report map."""
    report = {"n": n, "small": small, "median_ms": {}, "record_us": {}, "ratios": {}}
    entries = messages(n)
    with tempfile.TemporaryDirectory() as d:
        for name, open_log in _backends(Path(d), dsn).items():
            log, cleanup = open_log("big")
            try:
                fill(log, entries)
                assert len(log["query"](contains=RARE)) == 5 or n < 5
                report["median_ms"][name] = search_times(log, repeats)
                big = record_us(log, record_count)
            finally:
                cleanup()
            log, cleanup = open_log("small")
            try:
                fill(log, entries[:small])
                report["record_us"][name] = {"small": record_us(log, record_count), "big": big}
            finally:
                cleanup()
    base = report["median_ms"]["memory"]
    for name, t in report["median_ms"].items():
        if name != "memory":
            report["ratios"][f"scan/{name} rare"] = base["rare"] / t["rare"]
            report["ratios"][f"scan/{name} range"] = base["range"] / t["range"]
    for name, r in report["record_us"].items():
        report["ratios"][f"{name} record {n}/{small}"] = r["big"] / r["small"]
    return report


def show(report: dict, out=sys.stdout) -> None:
    """Print the report as a small table."""
    n, small = report["n"], report["small"]
    print(f"message log search over {n:,} messages (median ms)", file=out)
    print(f"{'backend':<10}{'rare word':>12}{'one day':>12}", file=out)
    for name, t in report["median_ms"].items():
        print(f"{name:<10}{t['rare']:>12.3f}{t['range']:>12.3f}", file=out)
    print(f"recording one entry (median µs) at {small:,} vs {n:,} entries", file=out)
    for name, r in report["record_us"].items():
        print(f"{name:<10}{r['small']:>12.1f}{r['big']:>12.1f}", file=out)
    print("ratios:", file=out)
    for key, value in report["ratios"].items():
        print(f"  {key:<32}{value:>10.2f}x", file=out)


def main(argv: Sequence[str] | None = None) -> dict:
    """Run the benchmark; print and return the report."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2,000 messages, few repeats")
    p.add_argument("-n", type=int, default=None, help="messages to search (default 100,000)")
    p.add_argument("--postgres", metavar="DSN", help="also measure postgres_log on this server")
    p.add_argument("--no-postgres", action="store_true", help="skip postgres even if configured")
    args = p.parse_args(argv)
    n = args.n or (2_000 if args.quick else 100_000)
    dsn = None
    if not args.no_postgres:
        dsn = args.postgres or (
            None if args.quick else os.environ.get("TOOLNEXUS_TEST_POSTGRES_DSN")
        )
        if dsn and not _reachable(dsn):
            print("postgres: not reachable, skipped", file=sys.stderr)
            dsn = None
    report = measure(
        n,
        small=min(1_000, n // 10) if args.quick else 1_000,
        repeats=3 if args.quick else 15,
        record_count=40 if args.quick else 400,
        dsn=dsn,
    )
    show(report)
    return report


if __name__ == "__main__":
    main()
