"""Pure checks of the tool calls a model sent, before anything runs them.

A model's output is untrusted: its arguments may be JSON nested 100,000 deep and its
tool name a JSON list. Each check returns a reason the model can read (fed back as
an error result, so the run goes on) instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .frozen import FrozenMap, freeze
from .wire.jsonload import MAX_DEPTH, load

__all__ = ["parse_arguments", "name_error", "ARGUMENT_DEPTH"]

ARGUMENT_DEPTH = MAX_DEPTH  # deeper arguments are refused, never decoded
ARGUMENT_BYTES = 4 * 1024 * 1024
_SCALARS = frozenset({str, int, float, bool, type(None)})


def parse_arguments(raw: Any) -> tuple[FrozenMap | None, str | None]:
    """Return (args, None) for a JSON object, else (None, why) the model can read.

    Bounded: text nested deeper than ARGUMENT_DEPTH or longer than 4 MiB is refused
    without decoding (no RecursionError); a mapping given as is must be that shallow too.

    >>> parse_arguments('{"a": 1}')[0]["a"], parse_arguments("")[0]
    (1, FrozenMap({}))
    >>> parse_arguments("[1]")[1]
    'arguments must be a JSON object, got list'
    >>> parse_arguments("[" * 100_000)[1]
    'arguments are not valid JSON (JSON nested deeper than 100 levels)'
    """
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", "replace")
    if isinstance(raw, str):
        if not raw.strip():
            return FrozenMap(), None
        try:
            raw = load(raw, ARGUMENT_DEPTH, ARGUMENT_BYTES)
        except ValueError as e:
            return None, f"arguments are not valid JSON ({e})"
    if type(raw) is not dict and not isinstance(raw, Mapping):  # a decoded object: no ABC look
        return None, f"arguments must be a JSON object, got {type(raw).__name__}"
    if all(type(v) in _SCALARS for v in raw.values()):
        return FrozenMap(raw), None  # flat, the usual case: nothing nested to freeze
    if _deeper_than(raw, ARGUMENT_DEPTH):
        return None, f"arguments nested deeper than {ARGUMENT_DEPTH} levels"
    return freeze(dict(raw)), None


def _deeper_than(value: Any, limit: int) -> bool:
    """Return whether a decoded value nests deeper than `limit` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, Mapping):
            children = v.values()
        elif isinstance(v, (list, tuple)):
            children = v
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children)
    return False


def name_error(name: Any) -> str | None:
    """Return why a tool call's name cannot name a tool (not a non-empty string), else None.

    >>> name_error("add") is None, name_error(["a"]), name_error("")
    (True, 'tool name must be a string, got list', 'tool name is empty')
    """
    if not isinstance(name, str):
        return f"tool name must be a string, got {type(name).__name__}"
    if not name:
        return "tool name is empty"
    return None
