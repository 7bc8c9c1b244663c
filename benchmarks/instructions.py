"""Instructions per weather scenario, counted by callgrind: a figure no busy machine moves.

    python benchmarks/instructions.py [--quick] [--arms run-inline,httpx,...]

The scenario of overhead.py (two tool calls, then the answer) on an instant transport
(`httpx.MockTransport` answering from memory), so what is counted is the loop's own work
and httpx's, no network and no server. Each arm runs in its own interpreter under
`valgrind --tool=callgrind`, N scenarios after a warm-up; the count per scenario is
(total at N - total at 0) / N, so start-up and imports cancel out. Arms:
  run-inline   toolnexus.run(), tools one after the other (as the hand-written loops)
  run          toolnexus.run(), a turn's tools offered to threads
  arun-inline  toolnexus.arun() in one event loop, tools one after the other on it (as
               the hand-written async loop calls them)
  arun         toolnexus.arun() in one event loop, plain tools handed to threads
  stream       toolnexus.stream(), consumed whole (SSE answers)
  astream      toolnexus.astream() in one event loop, consumed whole (SSE answers)
  httpx        the same two POSTs by hand on one httpx.Client (the floor)
  httpx-sse    the same streamed by hand on one httpx.Client (stream's floor)
  httpx-async  the same on one httpx.AsyncClient
  httpx-async+threads  the same, its tools in worker threads (arun's like-for-like floor)
Without valgrind on the PATH it says so and exits.
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
ARMS = ("run-inline", "run", "arun-inline", "arun", "stream", "astream", "httpx", "httpx-sse",
        "httpx-async", "httpx-async+threads")  # fmt: skip

# The scenario, run inside the measured interpreter: argv = arm, n.
SCENARIO = r"""
import asyncio, json, sys
import httpx
sys.path.insert(0, sys.argv[3])
import overhead_worker as w
arm, n = sys.argv[1], int(sys.argv[2])
CALLS = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
    "role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                      "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "add",
                                                      "arguments": "{\"a\": 2, \"b\": 2}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
TEXT = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
    "role": "assistant", "content": "It is sunny in Paris, and 2 + 2 = 4."}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
WHOLE = [json.dumps(CALLS).encode(), json.dumps(TEXT).encode()]

def sse(answer):
    m = answer["choices"][0]["message"]
    delta = {"role": "assistant", "content": m["content"]}
    if m.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(m["tool_calls"])]
    chunks = [{"choices": [{"index": 0, "delta": delta}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": answer["choices"][0]["finish_reason"]}]},
              {"choices": [], "usage": answer["usage"]}]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"

STREAMED = [sse(CALLS), sse(TEXT)]

def answer(request):
    body = json.loads(request.content)
    last = body["messages"][-1]
    i = 1 if last.get("role") == "tool" else 0
    if body.get("stream"):
        return httpx.Response(200, content=STREAMED[i], headers={"content-type": "text/event-stream"})
    return httpx.Response(200, content=WHOLE[i], headers={"content-type": "application/json"})

URL = "http://model.test/v1"
if arm.startswith("httpx"):
    hx = httpx.Client(transport=httpx.MockTransport(answer), headers={"Authorization": "Bearer k"})
    post = lambda body: hx.post(URL + "/chat/completions", json=body).json()
    ax = httpx.AsyncClient(transport=httpx.MockTransport(answer), headers={"Authorization": "Bearer k"})
    loop = asyncio.new_event_loop()
    if arm == "httpx":
        one = lambda: w.by_hand(post)
    elif arm == "httpx-sse":
        one = lambda: w.by_hand_streamed(hx, URL + "/chat/completions")
    else:
        threads = arm == "httpx-async+threads"
        one = lambda: loop.run_until_complete(w.by_hand_async(ax, URL + "/chat/completions", threads))
else:
    import toolnexus as tn
    tools = tn.toolkit(tn.define_tool(w.get_weather), tn.define_tool(w.add))
    executor = "inline" if arm.endswith("-inline") else "threads"
    c = tn.create_client(base_url=URL, model="m", api_key="k", tool_executor=executor,
                         transport=httpx.MockTransport(answer))
    loop = asyncio.new_event_loop()
    def streamed():
        for _ in tn.stream(c, w.PROMPT, toolkit=tools):
            pass
    async def astreamed():
        async for _ in tn.astream(c, w.PROMPT, toolkit=tools):
            pass
    one = {"run-inline": lambda: tn.run(c, w.PROMPT, toolkit=tools),
           "run": lambda: tn.run(c, w.PROMPT, toolkit=tools),
           "arun": lambda: loop.run_until_complete(tn.arun(c, w.PROMPT, toolkit=tools)),
           "arun-inline": lambda: loop.run_until_complete(tn.arun(c, w.PROMPT, toolkit=tools)),
           "stream": streamed,
           "astream": lambda: loop.run_until_complete(astreamed())}[arm]
for _ in range(20):
    one()
for _ in range(n):
    one()
"""  # noqa: E501


def _scenario(arm: str, n: int, root: str, under: list[str]) -> str:
    """Run `n` scenarios of `arm` in a new interpreter (`under` a tool); return its dir."""
    where = tempfile.mkdtemp()
    script = os.path.join(where, "scenario.py")
    Path(script).write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
           "PYTHONHASHSEED": "0"}  # fmt: skip
    subprocess.run([*under, sys.executable, script, arm, str(n), str(HERE)], env=env,
                   check=True, capture_output=True)  # fmt: skip
    return where


def callgrind(arm: str, n: int, root: str) -> int:
    """Return the instructions of one interpreter running `n` scenarios of `arm`."""
    out = os.path.join(tempfile.mkdtemp(), "cg.out")
    _scenario(arm, n, root, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    for line in Path(out).read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError("callgrind wrote no totals")


def main(argv: list[str] | None = None) -> dict:
    """Print the instructions per scenario of each arm and the ratios; return them."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="each arm's scenario once, not counted")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--root", default=str(HERE.parent), help="the toolnexus checkout to count")
    a = p.parse_args(argv)
    arms = tuple(a.arms.split(","))
    if a.quick:  # the scenarios still run (so this cannot rot); counting takes minutes
        for arm in arms:
            _scenario(arm, 1, a.root, [])
            print(f"  {arm:12} ran")
        return {arm: None for arm in arms}
    if shutil.which("valgrind") is None:
        print("instructions: skipped (valgrind is not on the PATH)")
        return {}
    n = 50
    per = {arm: (callgrind(arm, n, a.root) - callgrind(arm, 0, a.root)) / n for arm in arms}
    for arm, count in per.items():
        print(f"  {arm:12} {count / 1e6:6.2f}M instructions per scenario")
    for mine, floor in (("run-inline", "httpx"), ("run", "httpx"), ("arun-inline", "httpx-async"),
                        ("arun", "httpx-async"), ("arun", "httpx-async+threads"),
                        ("stream", "httpx-sse")):  # fmt: skip
        if mine in per and floor in per:
            print(f"  {mine}/{floor:12} {per[mine] / per[floor]:5.2f}x")
    return per


if __name__ == "__main__":
    main()
