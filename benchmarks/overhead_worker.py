"""One arm of overhead.py's upstream comparison, alone in its own interpreter.

    python benchmarks/overhead_worker.py ARM BASE_URL [UPSTREAM_DIR]

ARM is one of this checkout's toolnexus: `run`, `run-inline`, `arun`, `arun-inline`,
`stream`, `anthropic` (`run` on a style="anthropic" client) or `anthropic-stream` (the
`stream` arms consume `stream()` whole); or upstream's: `upstream` or `upstream-` + one
of `stream`, `anthropic`, `anthropic-stream` (toolnexus 0.21.0 from PyPI, installed with
its dependencies into UPSTREAM_DIR, e.g. by `pip install --target DIR toolnexus==0.21.0`:
the same scenario by its own `run` and `stream`); or a hand-written loop, no toolnexus
at all: `httpx` (on one httpx.Client: what any library whose requests go through httpx
costs at the least, so `httpx/upstream` bounds what `run/upstream` can reach),
`httpx-sse` (streamed), `httpx-async` (on one httpx.AsyncClient, tools called inline) or
`httpx-async+threads` (the same, tools in worker threads as arun runs plain tools).
Both packages are named `toolnexus`, so they never share an interpreter: an upstream
worker drops our editable finder from `sys.meta_path`, puts UPSTREAM_DIR first on
`sys.path`, and refuses to run if the `toolnexus` it imported is not the one in
UPSTREAM_DIR.

The scenario is overhead.py's: turn 1 calls get_weather and add, turn 2 answers. This
file imports no toolnexus at module level and nothing from overhead.py (which imports
ours), so the scenario's prompt, tools and floor loop live here and overhead.py takes
them from this file.

Protocol, one JSON line each way: the worker first writes
`{"file", "version", "text", "outputs"}` from one warm-up scenario; then for each line
`n` the parent writes, it runs the scenario n times and writes `[wall, cpu]`: the
seconds they took and the CPU seconds this process spent on them, all its threads
(timed in here, so the pipe is not part of it). EOF ends it. Anything the library
prints goes to stderr, never into the protocol.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

PROMPT = "What's the weather in Paris and what is 2+2?"


def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


FUNCS = {"get_weather": get_weather, "add": add}
# The tools as the wire declares them: what tn.to_openai(toolkit) gives for the two
# functions (test_benchmarks_quick checks they agree), written out so this file needs
# no toolnexus for the floor.
TOOL_DEFS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Return the weather for a city.",
        "parameters": {"type": "object", "required": ["city"],
                       "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers.",
        "parameters": {"type": "object", "required": ["a", "b"],
                       "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}},
]  # fmt: skip


def by_hand(post) -> tuple[str, list]:
    """The floor's loop: POST, call the tools by hand, POST again; (text, tool outputs)."""
    messages, outputs = [{"role": "user", "content": PROMPT}], []
    while True:
        data = post({"model": "m", "messages": messages, "tools": TOOL_DEFS})
        msg = data["choices"][0]["message"]
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg["content"], outputs
        for c in msg["tool_calls"]:
            out = FUNCS[c["function"]["name"]](**json.loads(c["function"]["arguments"]))
            outputs.append(out)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})


def by_hand_streamed(hx, url: str) -> tuple[str, list]:
    """The streaming floor on an httpx.Client: SSE lines parsed by hand, tool-call
    fragments joined by index; (text, tool outputs)."""
    messages, outputs = [{"role": "user", "content": PROMPT}], []
    while True:
        # The same body run's stream sends: it asks for the usage chunk (one more event
        # for the server to write and for this loop to read).
        body = {"model": "m", "messages": messages, "tools": TOOL_DEFS, "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        text, calls = [], {}
        with hx.stream("POST", url, json=body) as resp:
            for line in resp.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices") or ():
                    delta = choice.get("delta") or {}
                    text.append(delta.get("content") or "")
                    for frag in delta.get("tool_calls") or ():
                        c = calls.setdefault(frag["index"], {"id": "", "name": "", "args": ""})
                        c["id"] = frag.get("id") or c["id"]
                        fn = frag.get("function") or {}
                        c["name"] = fn.get("name") or c["name"]
                        c["args"] += fn.get("arguments") or ""
        if not calls:
            return "".join(text), outputs
        ordered = [calls[i] for i in sorted(calls)]
        tool_calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["args"]},
            }
            for c in ordered
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for c in ordered:
            out = FUNCS[c["name"]](**json.loads(c["args"]))
            outputs.append(out)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})


async def by_hand_async(ax, url: str, threads: bool = False) -> tuple[str, list]:
    """The async floor: the same loop on an httpx.AsyncClient; (text, tool outputs).

    With `threads`, the tools run in worker threads (gathered), as arun runs plain tools
    so that a slow one cannot block the event loop: the like-for-like floor.
    """
    messages, outputs = [{"role": "user", "content": PROMPT}], []
    while True:
        resp = await ax.post(url, json={"model": "m", "messages": messages, "tools": TOOL_DEFS})
        msg = resp.json()["choices"][0]["message"]
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg["content"], outputs
        calls = [
            (FUNCS[c["function"]["name"]], json.loads(c["function"]["arguments"]))
            for c in msg["tool_calls"]
        ]
        if threads:
            outs = await asyncio.gather(*(asyncio.to_thread(fn, **args) for fn, args in calls))
        else:
            outs = [fn(**args) for fn, args in calls]
        outputs.extend(outs)
        for c, out in zip(msg["tool_calls"], outs, strict=True):
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})


def floor_arm(arm: str, base_url: str):
    """Return (scenario fn -> (text, outputs), httpx module) for a hand-written loop:
    `httpx` (whole answers), `httpx-sse` (streamed), `httpx-async` (one event loop) or
    `httpx-async+threads` (the same, its tools in worker threads)."""
    import httpx

    url = base_url + "/chat/completions"
    headers = {"Authorization": "Bearer k"}
    if arm.startswith("httpx-async"):
        ax, loop = httpx.AsyncClient(headers=headers), asyncio.new_event_loop()
        threads = arm == "httpx-async+threads"
        return (lambda: loop.run_until_complete(by_hand_async(ax, url, threads))), httpx
    hx = httpx.Client(headers=headers)
    if arm == "httpx-sse":
        return (lambda: by_hand_streamed(hx, url)), httpx
    return (lambda: by_hand(lambda body: hx.post(url, json=body).json())), httpx


def isolate(upstream_dir: str) -> None:
    """Make `import toolnexus` find UPSTREAM_DIR's package and never ours."""

    # An editable install of ours adds a finder (a class, not an instance) that would
    # resolve `toolnexus.<child>` to our files even under another `toolnexus`.
    def ours(finder) -> bool:
        return (getattr(finder, "__module__", None) or "").startswith("__editable___toolnexus")

    sys.meta_path[:] = [f for f in sys.meta_path if not ours(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not ours(h)]
    sys.path_importer_cache.clear()
    sys.path.insert(0, os.path.abspath(upstream_dir))


def ours_arm(arm: str, base_url: str):
    """Return (scenario fn -> (text, outputs), toolnexus module) for our run, run-inline
    (tools one after the other, as the floor calls them), arun, arun-inline, stream,
    anthropic (run on a style="anthropic" client) or anthropic-stream."""
    import toolnexus as tn

    executor = "inline" if arm.endswith("-inline") else "threads"
    style = "anthropic" if arm.startswith("anthropic") else "openai"
    client = tn.create_client(base_url=base_url, model="m", api_key="k", style=style,
                              tool_executor=executor)  # fmt: skip
    tools = tn.toolkit(tn.define_tool(get_weather), tn.define_tool(add))
    loop = asyncio.new_event_loop()

    def once():
        if arm.startswith("arun"):
            r = loop.run_until_complete(tn.arun(client, PROMPT, toolkit=tools))
        elif arm.endswith("stream"):
            r = [e for e in tn.stream(client, PROMPT, toolkit=tools) if e["type"] == "done"]
            r = r[0]["result"]
        else:
            r = tn.run(client, PROMPT, toolkit=tools)
        return r["text"], [c["output"] for c in r["tool_calls"]]

    return once, tn


def upstream_arm(arm: str, base_url: str, upstream_dir: str):
    """Return (scenario fn -> (text, outputs), toolnexus module) for upstream's run or
    stream (`upstream`, `upstream-stream`), on an openai or anthropic client.

    Upstream's loop is async only (`await client.run(prompt, toolkit)`, `async for` over
    `client.stream(...)`), its toolkit is built by `await create_toolkit(...)`; built-in
    tools off, so the model sees exactly our two tools. One event loop serves every
    scenario, as arun's arm does.
    """
    isolate(upstream_dir)
    import toolnexus as up

    where = os.path.realpath(up.__file__)
    if not where.startswith(os.path.realpath(upstream_dir) + os.sep):
        raise SystemExit(f"upstream worker imported toolnexus from {where}, not {upstream_dir}")
    loop = asyncio.new_event_loop()
    tools = [up.define_tool(get_weather), up.define_tool(add)]
    tk = loop.run_until_complete(up.create_toolkit(extra_tools=tools, builtins=False))
    style = "anthropic" if "anthropic" in arm else "openai"
    client = up.create_client(base_url=base_url, style=style, model="m", api_key="k")

    async def streamed():
        done = None
        async for ev in client.stream(PROMPT, tk):
            if ev["type"] == "done":
                done = ev["result"]
        return done

    def once():
        if arm.endswith("stream"):
            r = loop.run_until_complete(streamed())
        else:
            r = loop.run_until_complete(client.run(PROMPT, tk))
        return r.text, [c["output"] for c in r.tool_calls]

    return once, up


def version_of(mod) -> str:
    """Return the version of the distribution an arm's module comes from."""
    from importlib import metadata

    return metadata.version(mod.__name__)


def main(argv: list[str]) -> None:
    """Serve timing requests for one arm until stdin closes."""
    arm, base_url, *rest = argv
    out, sys.stdout = sys.stdout, sys.stderr  # the protocol owns the real stdout
    if arm.startswith("upstream"):
        once, mod = upstream_arm(arm, base_url, rest[0])
    elif arm.startswith("httpx"):
        once, mod = floor_arm(arm, base_url)
    else:
        once, mod = ours_arm(arm, base_url)
    text, outputs = once()
    hello = {"file": mod.__file__, "version": version_of(mod), "text": text, "outputs": outputs}
    out.write(json.dumps(hello) + "\n")
    out.flush()
    for line in sys.stdin:
        n = int(line)
        t, c = time.perf_counter(), time.process_time()
        for _ in range(n):
            once()
        out.write(json.dumps([time.perf_counter() - t, time.process_time() - c]) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
