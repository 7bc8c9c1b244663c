"""Correct user code: mypy must find no error here (tests/test_typing.py runs it)."""

from __future__ import annotations

from collections.abc import Iterator

import toolz  # type: ignore[import-untyped]  # toolz ships no types

from toolnexus import (
    RunResult,
    Store,
    StreamEvent,
    ToolResult,
    ask,
    create_in_process_client,
    define_tool,
    plain,
    run,
    show,
    stream,
    toolkit,
)
from toolnexus.store import capped_store, check_store, sqlite_store
from toolnexus.types import Transcript, Usage


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


def model(request: dict) -> dict:
    return {"content": "hi"}


def dict_store() -> Store:
    data: dict[str, Transcript] = {}
    return {"get": data.get, "save": data.__setitem__, "desc": "dict"}


def usage_of(r: RunResult) -> int:
    u: Usage = r["usage"]
    return u["total_tokens"]


def texts(events: Iterator[StreamEvent]) -> str:
    out = []
    for e in events:
        if e["type"] == "text":
            out.append(e["delta"])  # narrowed to TextEvent
        elif e["type"] == "done":
            out.append(e["result"]["text"])
    return "".join(out)


def failed(r: ToolResult) -> bool:
    return r["is_error"]


client = create_in_process_client(model="m", generate=model, store=dict_store())
r = run(client, "hi", toolkit=toolkit(add), conversation_id="c1")
a = ask(client, "again", id="c1")
s: Store = check_store(capped_store(40, sqlite_store("/tmp/x.db")))
piped = toolz.pipe(sqlite_store("/tmp/x.db"), capped_store(40))
events = stream(client, "hi")
print(show(r), plain(r["messages"]), a["text"])
