"""What a process keeps for the conversations it read cold, against their JSON.

    python benchmarks/cold_memory.py [--conversations 60] [--messages 1000] [--stores sqlite,...]

K conversations of N messages (turn_growth's history: about 190 bytes of JSON a message)
are written by one store value, which is then dropped; a fresh client over a new store
value (an empty memo: a worker that never saw them) then does, per store:

  get   read each conversation (`store["get"]`), the result dropped: what the store's
        memo keeps
  run   one exchange on each (`tn.run`: read cold, answered, saved): what the store's
        memo and the runtime's memo keep together
  save  save each (`store["save"]` of the history as plain dicts, which the store
        freezes): what the store's memo keeps of a conversation this process wrote (its
        decoded messages, which the caller made, and their rows)

Measured: the bytes still allocated once the reads are done and the collector has run
(tracemalloc: every Python allocation, exact and the same on every run), against the
JSON of the conversations kept (each message's compact UTF-8 JSON, as its row holds
it). Not RSS: freed arenas are reused and tracemalloc's own tables grow it, so RSS
growth here says little.
Issue 35 item 3 aims at twice the JSON at most. Stores: sqlite (a temporary file),
postgres, redis (TOOLNEXUS_TEST_POSTGRES_DSN, TOOLNEXUS_TEST_REDIS_URL).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import turn_growth as tg  # noqa: E402

import toolnexus as tn  # noqa: E402
from toolnexus.store._encode import encode_message  # noqa: E402


def json_bytes(messages: list) -> int:
    """Return the bytes of each message's row (its compact UTF-8 JSON), summed."""
    return sum(len(encode_message(m).encode()) for m in messages)


def kept(make: Callable[[], dict], k: int, n: int, mode: str) -> dict:
    """Return the bytes a fresh client keeps after `mode` on k conversations of n messages."""
    writer = make()
    ids = [f"mem-{uuid.uuid4().hex[:8]}-{i}" for i in range(k)]
    for cid in ids if mode != "save" else ():
        writer["save"](cid, tg.history(n))
    writer.get("close", lambda: None)()
    del writer
    store = make()
    c = tg.client(store)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for cid in ids:
        if mode == "get":
            store["get"](cid)
        elif mode == "save":
            store["save"](cid, tg.history(n))
        else:
            tn.run(c, "one more", id=cid)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    sizes = [json_bytes(store["get"](cid)) for cid in ids]
    for cid in ids:
        store["delete"](cid)
    store.get("close", lambda: None)()
    return {"held": held, "json": sum(sizes)}


def main(argv: list[str] | None = None) -> dict:
    """Print what is kept per store and mode against its JSON; return the ratios."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conversations", type=int, default=60)
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--stores", default="sqlite,postgres,redis")
    p.add_argument("--modes", default="get,run,save")
    p.add_argument("--quick", action="store_true", help="3 conversations of 20: it runs")
    args = p.parse_args(argv)
    if args.quick:
        args.conversations, args.messages = 3, 20
    found = tg.durable_stores()
    ratios: dict = {}
    for name in args.stores.split(","):
        if name not in found:
            continue
        with found[name]() as make:
            for mode in args.modes.split(","):
                got = kept(make, args.conversations, args.messages, mode)
                ratios[(name, mode)] = got["held"] / got["json"]
                print(
                    f"{name:8} {mode:4} {args.conversations} x {args.messages}: "
                    f"kept {got['held'] / 1e6:.1f} MB for {got['json'] / 1e6:.1f} MB of JSON "
                    f"({got['held'] / got['json']:.2f}x)",
                    flush=True,
                )
    return ratios


if __name__ == "__main__":
    main()
