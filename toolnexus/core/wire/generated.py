"""The in-process client's answers (`create_in_process_client`'s `generate`), read into a
turn of the openai shape: the shape that client speaks. Pure: values in, values out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..frozen import FrozenMap
from .common import unique_id
from .openai import _turn
from .openai_read import args_text as _args_text

__all__ = ["parse_generated", "STYLE"]

STYLE = "openai"  # the dialect whose message shape an in-process client speaks


def parse_generated(out: Mapping, turn_no: int) -> FrozenMap:
    """Return the normalized turn of an in-process `generate` result.

    `out` is {"content": str} or {"tool_calls": [{"id"?, "name", "arguments"}]}, with an
    optional "usage"; missing call ids become call_<turn>_<index>.
    """
    if not isinstance(out, Mapping):
        raise ValueError(f"generate must return a mapping, got {type(out).__name__}: {out!r:.100}")
    raw = out.get("tool_calls") or []
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"generate's 'tool_calls' must be a list, got {raw!r:.100}")
    calls, taken = [_generated_call(c, turn_no, i) for i, c in enumerate(raw)], set()
    for call in calls:  # distinct within the turn: two calls sharing an id get `id_2`, ...
        call["id"] = unique_id(call["id"], taken)
    text = out.get("content") or ""
    if not isinstance(text, str):
        raise ValueError(f"generate's 'content' must be a string, got {text!r:.100}")
    finish = "tool_calls" if calls else "stop"
    return _turn(text, calls, out.get("usage"), finish, out.get("model"))


def _generated_call(c: Any, turn_no: int, i: int) -> dict:
    """Return one tool call of a `generate` result, or a ValueError that says what is wrong."""
    if not isinstance(c, Mapping) or not isinstance(c.get("name"), str) or not c["name"]:
        raise ValueError(f"generate's tool call {i} needs a string 'name': {c!r:.100}")
    id, args = c.get("id"), c.get("arguments") or {}
    if id is not None and not isinstance(id, str):
        raise ValueError(f"generate's tool call {i} has a non-string 'id': {id!r:.60}")
    if not isinstance(args, (str, Mapping)):
        raise ValueError(f"generate's tool call {i} 'arguments' must be a map or JSON text")
    return {"id": id or f"call_{turn_no}_{i}", "name": c["name"], "arguments": _args_text(args)}
