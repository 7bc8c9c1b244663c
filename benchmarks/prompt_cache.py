"""How much of a long conversation's prompt a provider's prefix cache can reuse, per cap.

    python benchmarks/prompt_cache.py            # 400 exchanges
    python benchmarks/prompt_cache.py --quick    # 60 exchanges, a smoke run

A conversation runs exchange after exchange through the real loop and a real store
(`capped_store(40, in_memory_store())` against `capped_store(40, in_memory_store(),
keep=30)`), an in-process model answering; one exchange in four calls a tool first
(so cuts must fall on turn boundaries). Every request the model gets is recorded.

A provider caches the prompts it has seen by prefix (OpenAI and DeepSeek automatically,
Anthropic at its cache breakpoints): a request's *stable prefix* is the longest run of
leading messages equal to the previous request's. The figure is the share of all prompt
tokens (estimated as characters / 4, the system prompt included) that lie in a stable
prefix. With `capped_store(40)` the front moves on every save once past 40 messages,
so only the tool turns' second requests reuse anything; with `keep=30` the front holds
for ten messages between cuts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from toolnexus import ask, create_in_process_client, define_tool, toolkit
from toolnexus.store import capped_store, in_memory_store

SYSTEM = "You are a careful assistant for a travel agency. " * 20  # about 250 tokens


@define_tool
def lookup(city: str) -> str:
    """Look up facts about a city."""
    return f"{city}: population 700,000; airport 20 km north; trams and buses. " * 3


def _tokens(message: dict) -> int:
    return max(1, len(json.dumps(message, ensure_ascii=False)) // 4)


def _prefix(a: list, b: list) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def conversation(store: dict, exchanges: int) -> list[list[dict]]:
    """Run `exchanges` exchanges on one id over `store`; return every request's messages."""
    seen: list[list[dict]] = []

    def model(request: dict) -> dict:
        messages = request["messages"]
        seen.append(messages)
        last = messages[-1]
        question = last["content"] if last["role"] == "user" else ""
        if question.startswith("[tool]"):
            return {"tool_calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}]}
        return {"content": f"About your question ({len(messages)} messages so far): " * 8}

    client = create_in_process_client(model="scripted", generate=model, store=store,
                                      system_prompt=SYSTEM)  # fmt: skip
    tk = toolkit(lookup)
    for i in range(exchanges):
        tag = "[tool] " if i % 4 == 3 else ""
        ask(client, f"{tag}Question {i}: what about the trip? " * 6, toolkit=tk, id="long")
    return seen


def stable_share(requests: list[list[dict]]) -> dict:
    """Return {prompt_tokens, stable_tokens, share} over a conversation's requests."""
    total = stable = 0
    previous: list[dict] = []
    for messages in requests:
        sizes = [_tokens(m) for m in messages]
        total += sum(sizes)
        stable += sum(sizes[: _prefix(previous, messages)])
        previous = messages
    return {"prompt_tokens": total, "stable_tokens": stable, "share": stable / total}


def measure(exchanges: int) -> dict:
    """Return the report: the stable share of prompt tokens under each cap."""
    arms = {
        "capped_store(40)": capped_store(40, in_memory_store()),
        "capped_store(40, keep=30)": capped_store(40, in_memory_store(), keep=30),
    }
    report: dict = {"exchanges": exchanges, "arms": {}}
    for name, store in arms.items():
        report["arms"][name] = stable_share(conversation(store, exchanges))
    return report


def show(report: dict) -> None:
    """Print the report as a small table."""
    print(f"{report['exchanges']} exchanges on one conversation (tokens ~ characters / 4)")
    for name, arm in report["arms"].items():
        print(f"  {name:<28} {arm['share']:6.1%} of {arm['prompt_tokens']:>9,} prompt tokens"
              " in a stable prefix")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> dict:
    """Run the benchmark; print and return the report."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="60 exchanges")
    p.add_argument("-n", type=int, default=None, help="exchanges (default 400)")
    args = p.parse_args(argv)
    report = measure(args.n or (60 if args.quick else 400))
    show(report)
    return report


if __name__ == "__main__":
    main()
