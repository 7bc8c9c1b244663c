"""The agent loop as pure step functions (sans-I/O); drivers post, execute and store.

state = start(dialect, history, prompt)
while True:
    body  = request(state, ...)                # what to POST
    state, calls = on_turn(state, turn)        # the decoded model turn
    if not calls: break                        # status "done"
    state = on_results(state, calls, results, max_turns)  # may end "incomplete"
    if is_finished(state): break
result(state)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, pmap, pvector

from .tool import tool_result
from .wire import DIALECTS
from .wire.common import ZERO_USAGE, add_usage

__all__ = [
    "start",
    "request",
    "on_turn",
    "on_results",
    "is_finished",
    "result",
    "parse_arguments",
]


def start(dialect: str, history: Sequence, prompt: str) -> PMap:
    """Return the initial loop state: `history` plus the user's prompt."""
    return pmap(
        {
            "dialect": dialect,
            "messages": pvector(history).append(DIALECTS[dialect].user_message(prompt)),
            "turns": 0,
            "tool_calls": pvector(),
            "usage": ZERO_USAGE,
            "text": "",
            "model": None,
            "status": None,
            "limit": None,
            "pending": None,
        }
    )


def request(state: PMap, model: str, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return the request body for the next model call (`tools` in wire shape)."""
    return DIALECTS[state["dialect"]].body(model, state["messages"], tools, system, params)


def parse_arguments(raw: Any) -> tuple[PMap | None, str | None]:
    """Return (args, None) for a JSON object, else (None, why) the model can read.

    >>> parse_arguments('{"a": 1}')[0]["a"], parse_arguments("")[0]
    (1, pmap({}))
    >>> parse_arguments("[1]")[1]
    'arguments must be a JSON object, got list'
    """
    if isinstance(raw, str):
        if not raw.strip():
            return pmap(), None
        try:
            raw = json.loads(raw)
        except ValueError as e:
            return None, f"arguments are not valid JSON ({e})"
    if not isinstance(raw, Mapping):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}"
    from pyrsistent import freeze

    return freeze(dict(raw), strict=False), None


def _call(c: Mapping) -> PMap:
    args, error = parse_arguments(c["arguments"])
    return pmap({"id": c["id"], "name": c["name"], "args": args, "error": error})


def on_turn(state: PMap, turn: Mapping) -> tuple[PMap, tuple[PMap, ...]]:
    """Return the state after a model turn and the tool calls to run (none: the run is done).

    Each call is {id, name, args, error}; a call with an `error` (bad arguments) is
    not executed: `invalid_result` is fed back instead.
    """
    calls = tuple(_call(c) for c in turn["tool_calls"])
    state = state.update(
        {
            "messages": state["messages"].append(turn["message"]),
            "turns": state["turns"] + 1,
            "usage": add_usage(state["usage"], turn["usage"]),
            "text": turn["text"],
            "model": turn.get("model") or state["model"],
        }
    )
    return (state if calls else state.set("status", "done")), calls


def invalid_result(call: Mapping) -> PMap:
    """Return the error result fed back for a call whose arguments could not be used."""
    return tool_result(f"Invalid arguments for tool {call['name']!r}: {call['error']}", True)


def on_results(
    state: PMap, calls: Sequence[Mapping], results: Sequence[Mapping], max_turns: int
) -> PMap:
    """Return the state after the turn's tool results (in call order); may end `incomplete`."""
    codec = DIALECTS[state["dialect"]]
    records = [
        pmap(
            {
                "id": c["id"],
                "name": c["name"],
                "args": c["args"] if c["args"] is not None else pmap(),
                "output": r["output"],
                "is_error": r["is_error"],
                "metadata": r.get("metadata", pmap()),
            }
        )
        for c, r in zip(calls, results, strict=True)
    ]
    state = state.update(
        {
            "messages": state["messages"].extend(codec.tool_result_messages(calls, results)),
            "tool_calls": state["tool_calls"].extend(records),
        }
    )
    if state["turns"] >= max_turns:
        return state.update({"status": "incomplete", "limit": "max_turns"})
    return state


def is_finished(state: PMap) -> bool:
    """Return whether the run has ended."""
    return state["status"] is not None


def result(state: PMap, model: str) -> PMap:
    """Return the RunResult of a finished state."""
    return pmap(
        {
            "text": state["text"],
            "messages": state["messages"],
            "tool_calls": state["tool_calls"],
            "tool_call_count": len(state["tool_calls"]),
            "turns": state["turns"],
            "usage": state["usage"],
            "model": state["model"] or model,
            "status": state["status"],
            "limit": state["limit"],
            "pending": state["pending"],
        }
    )
