"""Instructions of a cold exchange per store, counted by callgrind, against one json.dumps.

    python benchmarks/cold_instructions.py [--sizes 10,1000,3000] [--stores history,sqlite,...]

The `cold` rows of turn_growth.py (an exchange on a conversation this process never saw: a
new client over a new store value) as instruction counts, which a busy machine does not
move (wall-clock on 2 shared cores does). Each figure runs in its own interpreter under
`valgrind --tool=callgrind`: the same setup (K conversations of n messages saved), then 0
or K cold exchanges; the count per exchange is the difference / K, so start-up, imports
and setup cancel out. The yardstick is counted the same way: K json.dumps of the history.
Printed per store: the instructions per exchange at each size and the growth from the
first size, in json.dumps (what issue 35 bounds: at most 1.0x, aim 0.5x). Stores:
history (`history=`), sqlite (a temporary file), postgres, redis (TOOLNEXUS_TEST_POSTGRES_DSN,
TOOLNEXUS_TEST_REDIS_URL).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
K = 4

# Run inside the measured interpreter: argv = store, n, k (exchanges to run, 0..K).
SCENARIO = r"""
import json, os, sys, tempfile, uuid
sys.path.insert(0, sys.argv[4])
import turn_growth as tg
import toolnexus as tn
from toolnexus.core.transcript import freeze_transcript
store, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
K = int(sys.argv[5])
if store == "dumps":
    plain = tg._plain(n)
    for _ in range(k):
        json.dumps(plain)
    sys.exit(0)
if store == "history":
    c = tg.client(tn.store.in_memory_store())
    given = freeze_transcript(tg.history(n))
    tn.run(c, "warm up", history=given)
    for _ in range(k):
        tn.run(c, "one more", history=given)
    sys.exit(0)
tmp = tempfile.mkdtemp()
if store == "sqlite":
    make = lambda: tn.store.sqlite_store(os.path.join(tmp, "chat.db"))
elif store == "postgres":
    from psycopg_pool import ConnectionPool
    table = f"toolnexus_cg_{uuid.uuid4().hex[:8]}"
    dsn = os.environ["TOOLNEXUS_TEST_POSTGRES_DSN"]
    pool = ConnectionPool(dsn, min_size=1, max_size=2, open=True)
    make = lambda: tn.store.postgres_store(pool, table)
else:
    import redis
    conn = redis.Redis.from_url(os.environ["TOOLNEXUS_TEST_REDIS_URL"])
    prefix = f"toolnexus-cg:{uuid.uuid4().hex[:8]}:"
    make = lambda: tn.store.redis_store(conn, prefix=prefix)
def cold(cid, prompt):
    # A new store value per exchange, closed (and so dropped) after it, on every store:
    # what it read is not kept alive for the collector to walk in later exchanges.
    s = make()
    tn.run(tg.client(s), prompt, id=cid)
    s.get("close", lambda: None)()
writer = make()
ids = [f"cold-{i}" for i in range(K + 1)]
for cid in ids:
    writer["save"](cid, tg.history(n - 2))
cold(ids[-1], "warm up")  # imports and first-use costs, not counted
for cid in ids[:k]:
    cold(cid, "one more")
for cid in ids:
    writer["delete"](cid)
writer.get("close", lambda: None)()
if store == "postgres":
    with pool.connection() as c:
        c.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")
    pool.close()
"""


def _scenario(store: str, n: int, k: int, under: list[str]) -> None:
    """Run the scenario in a new interpreter (`under` a tool, e.g. valgrind)."""
    where = Path(tempfile.mkdtemp())
    (where / "scenario.py").write_text(SCENARIO)
    path = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path}
    argv = [sys.executable, str(where / "scenario.py"), store, str(n), str(k), str(HERE), str(K)]
    subprocess.run([*under, *argv], env=env, check=True, capture_output=True)


def count(store: str, n: int, k: int) -> int:
    """Return the instructions of one interpreter running the scenario."""
    out = Path(tempfile.mkdtemp()) / "cg.out"
    _scenario(store, n, k, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    for line in out.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError("callgrind wrote no totals")


def per_exchange(store: str, n: int) -> float:
    """Return the instructions of one exchange (or one json.dumps) at n messages."""
    return (count(store, n, K) - count(store, n, 0)) / K


def main(argv: list[str] | None = None) -> dict:
    """Print the counts and growths; return {(store, n): instructions}."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10,1000,3000")
    p.add_argument("--stores", default="history,sqlite,postgres,redis")
    p.add_argument("--quick", action="store_true", help="each scenario once, not counted")
    a = p.parse_args(argv)
    if a.quick:  # the scenarios still run (so this cannot rot); counting takes minutes
        for store in ("dumps", *a.stores.split(",")):
            _scenario(store, 10, 1, [])
            print(f"  {store:9} ran")
        return {}
    if shutil.which("valgrind") is None:
        print("cold_instructions: skipped (valgrind is not on the PATH)")
        return {}
    sizes = [int(x) for x in a.sizes.split(",")]
    dumps = {n: per_exchange("dumps", n) for n in sizes[1:]}
    out: dict = {}
    for store in a.stores.split(","):
        for n in sizes:
            out[(store, n)] = per_exchange(store, n)
        for n in sizes[1:]:
            growth = (out[(store, n)] - out[(store, sizes[0])]) / dumps[n]
            print(f"  {store:9} {n:5} messages  {out[(store, n)] / 1e6:7.2f}M instructions  "
                  f"growth from {sizes[0]}: {growth:5.2f}x json.dumps "
                  f"({dumps[n] / 1e6:.2f}M)")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
