"""What the loop costs over a bare HTTP loop, on the weather scenario, against loopback.

    python benchmarks/overhead.py [--quick] [--rounds N]

Scenario: turn 1 asks for get_weather {city: "Paris"} and add {a: 2, b: 2}; turn 2
answers. Arms, interleaved in one process so machine noise hits all alike:
  run        toolnexus.run() with an openai-style client
  httpx      the same two POSTs by hand on one httpx.Client, tools called by hand
  http.client  the same on the standard library's keep-alive HTTPConnection
Prints the median seconds per scenario of each arm and the ratios, the time of
`import toolnexus` over `import httpx` (fresh interpreters), and peak RSS.
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

import httpx

import toolnexus as tn
from toolnexus.testing import fake_provider

PROMPT = "What's the weather in Paris and what is 2+2?"
CALLS = {
    "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "add", "arguments": {"a": 2, "b": 2}},
    ]
}
ANSWER = {"content": "It is sunny in Paris, and 2 + 2 = 4."}


def script(body: dict, dialect: str) -> dict:
    """Answer with the two calls, then (once their results are in) with the text."""
    return ANSWER if body["messages"][-1]["role"] == "tool" else CALLS


def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


TOOLS = tn.toolkit(tn.define_tool(get_weather), tn.define_tool(add))
FUNCS = {"get_weather": get_weather, "add": add}
TOOL_DEFS = tn.to_openai(TOOLS)


def by_hand(post) -> str:
    """The floor's loop: POST, call the tools by hand, POST again."""
    messages = [{"role": "user", "content": PROMPT}]
    while True:
        data = post({"model": "m", "messages": messages, "tools": TOOL_DEFS})
        msg = data["choices"][0]["message"]
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg["content"]
        for c in msg["tool_calls"]:
            out = FUNCS[c["function"]["name"]](**json.loads(c["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})


def arms(base_url: str) -> dict:
    """Return the benchmark arms: name -> fn() running one scenario."""
    client = tn.create_client(base_url=base_url, model="m", api_key="k")
    hx = httpx.Client(headers={"Authorization": "Bearer k"})
    url = base_url + "/chat/completions"
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port)

    def httpx_post(body):
        return hx.post(url, json=body).json()

    def stdlib_post(body):
        conn.request(
            "POST",
            parts.path,
            body=json.dumps(body),
            headers={"Authorization": "Bearer k", "content-type": "application/json"},
        )
        return json.loads(conn.getresponse().read())

    return {
        "run": lambda: tn.run(client, PROMPT, toolkit=TOOLS)["text"],
        "httpx": lambda: by_hand(httpx_post),
        "http.client": lambda: by_hand(stdlib_post),
    }


def measure(rounds: int) -> dict[str, float]:
    """Return the median seconds per scenario of each arm, interleaved."""
    with fake_provider(script) as fp:
        fns = arms(fp.url)
        for fn in fns.values():  # warm up connections and caches
            assert fn() == ANSWER["content"]
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def import_time(module: str, n: int) -> float:
    """Return the median seconds to import `module` in a fresh interpreter."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
        for _ in range(n)
    ]  # fmt: skip
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print the report, return the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few rounds, to check it runs")
    p.add_argument("--rounds", type=int, default=300)
    a = p.parse_args(argv)
    rounds = 5 if a.quick else a.rounds
    med = measure(rounds)
    imp_tn = import_time("toolnexus", 2 if a.quick else 9)
    imp_hx = import_time("httpx", 2 if a.quick else 9)
    report = {
        "median_ms": {k: v * 1000 for k, v in med.items()},
        "run/httpx": med["run"] / med["httpx"],
        "run/http.client": med["run"] / med["http.client"],
        "httpx/http.client": med["httpx"] / med["http.client"],
        "import toolnexus/httpx": imp_tn / imp_hx,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(f"weather scenario, {rounds} rounds, median per scenario:")
    for k, v in report["median_ms"].items():
        print(f"  {k:12s} {v:8.3f} ms")
    for k in ("run/httpx", "run/http.client", "httpx/http.client", "import toolnexus/httpx"):
        print(f"  {k:24s} {report[k]:.2f}x")
    print(f"  import: toolnexus {imp_tn * 1000:.1f} ms, httpx {imp_hx * 1000:.1f} ms")
    print(f"  peak RSS {report['peak_rss_mb']:.1f} MB")
    return report


if __name__ == "__main__":
    main()
