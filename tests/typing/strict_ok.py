"""Correct user code under `mypy --strict`: the verbs' results are typed (no cast needed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from toolnexus import (
    RunResult,
    StreamEvent,
    aask,
    arun,
    ask,
    astream,
    create_in_process_client,
    run,
    stream,
)
from toolnexus.types import ToolCall, Usage


def model(request: dict[str, Any]) -> dict[str, Any]:
    return {"content": "hi"}


client = create_in_process_client(model="m", generate=model)
r: RunResult = run(client, "hi")
total: int = r["usage"]["total_tokens"]
usage: Usage = r["usage"]
cached: int = usage.get("cache_read_tokens", 0)
text: str = r["text"]
ended: str | None = r["stop_reason"]
refused: str | None = r["refusal"]
calls: list[ToolCall] = list(r["tool_calls"])
first_id: str = calls[0]["id"] if calls else ""
again: RunResult = ask(client, "again")


def answer(events: Iterator[StreamEvent]) -> tuple[str, str, int]:
    said, thought, tokens = [], [], 0
    for e in events:
        if e["type"] == "text":
            said.append(e["delta"])
        elif e["type"] == "thinking":
            thought.append(e["delta"])
        elif e["type"] == "refusal":
            said.append(e["delta"])
        elif e["type"] == "usage":
            tokens += e["usage"]["total_tokens"]
        elif e["type"] == "done":
            said.append(e["result"]["text"])
    return "".join(said), "".join(thought), tokens


print(answer(stream(client, "hi")))


async def main() -> int:
    a: RunResult = await arun(client, "hi")
    b: RunResult = await aask(client, "hi")
    events: AsyncIterator[StreamEvent] = astream(client, "hi")
    async for e in events:
        if e["type"] == "done":
            return e["result"]["turns"] + a["turns"] + b["turns"]
    return 0


print(asyncio.run(main()), total, cached, text, ended, refused, first_id, again["model"])
