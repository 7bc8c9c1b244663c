"""`python -m toolnexus demo`: the offline demo (a scripted model, two tools, a store).

It keeps its conversation where `ids` and `show` look (the default --store, or the one
given, in the same forms every command takes), and prints the `show` command for it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

CONVERSATION = "demo"


def scripted_model(request: dict) -> dict:
    """A stand-in model: asks for two tools at once, then answers from their results.

    On a later run it recalls the earlier answer from the conversation it was given.
    """
    msgs = request["messages"]
    last = msgs[-1]
    if last["role"] == "tool":
        results = [m["content"] for m in msgs if m["role"] == "tool"][-2:]
        return {
            "content": f"In Paris it is {results[0]}, and 2 + 2 = {results[1]}.",
            "usage": {"prompt_tokens": 42, "completion_tokens": 12},
        }
    earlier = [m["content"] for m in msgs[:-1] if m["role"] == "assistant" and m.get("content")]
    if earlier:
        return {
            "content": f"You asked me before. Last time I said: {earlier[-1]!r}",
            "usage": {"prompt_tokens": 30, "completion_tokens": 15},
        }
    return {
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "add", "arguments": {"a": 2, "b": 2}},
        ],
        "usage": {"prompt_tokens": 25, "completion_tokens": 8},
    }


def run_demo(store: Mapping, show: str, out=sys.stdout) -> dict:
    """Run one exchange of the demo against `store`; return the RunResult.

    `show` is the command that shows the stored conversation (printed at the end).
    """
    from toolnexus import ask, conversation_store, create_in_process_client, define_tool, toolkit
    from toolnexus.commands.places import describe

    @define_tool
    def get_weather(city: str) -> str:
        """Return the current weather for a city."""
        return {"Paris": "18°C and sunny"}.get(city, "unknown")

    @define_tool
    def add(a: float, b: float) -> str:
        """Add two numbers."""
        total = a + b
        return str(int(total) if total == int(total) else total)

    client = create_in_process_client(model="scripted-demo", generate=scripted_model, store=store)
    before = store["get"](CONVERSATION)
    print(f"store: {describe(store)} (conversation {CONVERSATION!r})", file=out)
    if before:
        print(f"remembered {len(before)} messages from an earlier run", file=out)
    prompt = "What's the weather in Paris and what is 2+2?"
    r = ask(client, prompt, toolkit=toolkit(get_weather, add), id=CONVERSATION)
    for call in r["tool_calls"]:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(call["args"].items()))
        print(f"tool {call['name']}({args}) -> {call['output']}", file=out)
    if not r["tool_calls"]:
        print("tool calls: none this time", file=out)
    print(f"answer: {r['text']}", file=out)
    stored = conversation_store(client)["get"](CONVERSATION)
    print(f"stored messages: {len(stored)}", file=out)
    u = r["usage"]
    print(
        f"turns: {r['turns']}, usage: {u['prompt_tokens']} prompt + "
        f"{u['completion_tokens']} completion = {u['total_tokens']} tokens",
        file=out,
    )
    print(f"see it: {show}", file=out)
    if not before:
        print("run the demo again: it will continue this conversation.", file=out)
    return r


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `demo` command."""
    from .chat import _guarded
    from .places import STORE_HELP

    p = sub.add_parser("demo", help="run the offline demo (no key, no network)")
    p.add_argument("--store", default=None, help=STORE_HELP)
    p.set_defaults(func=_guarded(_demo))


def _demo(args: argparse.Namespace) -> int:
    """Run the demo in --store (any form the other commands take) or the default store."""
    from .places import open_store, show_command

    run_demo(open_store(args.store), show_command(CONVERSATION, args.store))
    return 0
