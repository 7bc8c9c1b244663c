"""How the client's CPU per turn grows with the history, against one json.dumps of it.

    python benchmarks/turn_growth.py [--quick]

One exchange (one model turn, a text answer) on a conversation of N messages, for N in
10, 1,000 and 3,000. The model is an httpx.MockTransport that answers at once without
reading the request, so what is measured is the client's own work: load, translate and
repair, encode the request, decode the answer, save. Printed: the median process CPU of
one exchange per N, and the growth from 10 to N messages as a multiple of the CPU of one
`json.dumps` of the N-message history (issue 13's yardstick: at most 1.2x, aim under
0.5x). Two paths:

  memo     the conversation was saved by this client's runtime (in-memory store): its
           messages and their JSON text are reused, only the new ones are encoded
  history  the same (frozen) history passed as `history=` each time: translated,
           repaired and encoded once per exchange (what a durable store's fresh objects
           cost on each load, on top of decoding them)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import httpx
from pyrsistent import thaw

import toolnexus as tn
from toolnexus.core.transcript import freeze_transcript
from toolnexus.store import in_memory_store
from toolnexus.testing import openai_response, text_reply

ANSWER = json.dumps(openai_response(text_reply("Noted."))).encode()
WORDS = "the quick brown fox jumps over the lazy dog while the model keeps talking "


def history(n: int) -> list[dict]:
    """Return n alternating user/assistant messages of about 150 characters each."""
    role = ("user", "assistant")
    return [{"role": role[i % 2], "content": f"{i}: {WORDS * 2}"} for i in range(n)]


def client(store: dict) -> tn.Client:
    """Return a client whose model answers at once, never reading the request."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=ANSWER,
                                    headers={"content-type": "application/json"}))  # fmt: skip
    return tn.create_client(base_url="http://model.test/v1", model="m", store=store,
                            transport=transport)  # fmt: skip


def cpu(fn) -> float:
    """Return the process CPU seconds of one call."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def memo_path(n: int, rounds: int) -> float:
    """Median CPU of an exchange on a conversation this client saved (n messages before)."""
    store = in_memory_store()
    c = client(store)
    seed = history(n - 2)
    out = []
    for i in range(rounds):
        cid = f"c{i}"
        store["save"](cid, seed)
        tn.run(c, "warm up", id=cid)  # now saved by this runtime: n messages, remembered
        out.append(cpu(lambda cid=cid: tn.run(c, "one more", id=cid)))
    return statistics.median(out)


def history_path(n: int, rounds: int) -> float:
    """Median CPU of an exchange given the n-message history as `history=`."""
    c = client(in_memory_store())
    given = freeze_transcript(history(n))  # as a store's get returns it
    tn.run(c, "warm up", history=given)
    return statistics.median(cpu(lambda: tn.run(c, "one more", history=given))
                             for _ in range(rounds))  # fmt: skip


def dumps(n: int, rounds: int) -> float:
    """Median CPU of one json.dumps of an n-message history (plain dicts)."""
    plain = thaw(tn.run(client(in_memory_store()), "x", history=history(n))["messages"])
    return statistics.median(cpu(lambda: json.dumps(plain)) for _ in range(rounds))


def main(argv: list[str] | None = None) -> dict:
    """Print the figures; return them."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few rounds, to check it runs")
    a = p.parse_args(argv)
    rounds = 3 if a.quick else 40
    sizes = (10, 1000) if a.quick else (10, 1000, 3000)
    figures: dict = {}
    for path, measure in (("memo", memo_path), ("history", history_path)):
        base = measure(sizes[0], rounds)
        for n in sizes:
            spent = base if n == sizes[0] else measure(n, rounds)
            json_cpu = dumps(n, rounds)
            growth = (spent - base) / json_cpu if n != sizes[0] else 0.0
            figures[(path, n)] = {"cpu_ms": spent * 1e3, "growth_x_dumps": growth}
            dumps_ms = json_cpu * 1e3
            print(
                f"  {path:8} {n:5} messages  {spent * 1e3:7.3f} ms CPU  "
                f"growth from {sizes[0]}: {growth:5.2f}x json.dumps ({dumps_ms:.3f} ms)"
            )
    return figures


if __name__ == "__main__":
    main()
