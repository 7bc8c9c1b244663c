"""Toolkits: immutable collections of tool maps, and their provider adapters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyrsistent import PMap, pmap, pvector, thaw

from .tool import check_name, tool_result
from .wire import DIALECTS
from .wire.common import message_text

__all__ = [
    "toolkit", "register", "execute", "tool_names",
    "to_openai", "to_anthropic", "to_gemini",
]  # fmt: skip

# The one name metrics and spans give every call to a tool the toolkit does not have: a
# model invents names at will, and each as a label or span name would be a new series.
UNKNOWN_TOOL = "_unknown"

# Each dialect's declaration of a tool (the codecs own their shape).
_ENTRIES = {d: codec.tool_entry for d, codec in DIALECTS.items()}

# "tools" keeps registration order; "index" finds a tool by name.
# "wire" holds each dialect's request entries, computed by register.
EMPTY = pmap({"tools": pvector(), "index": pmap(), "skills": pvector(), "wire": pmap(),
              "wire_json": pmap()})  # fmt: skip


def _check_tool(t: Any) -> None:
    if not isinstance(t, Mapping) or not {"name", "execute"} <= set(t):
        raise ValueError(f"not a tool map (needs name, execute, ...): {t!r}")
    check_name(t["name"])  # a map built by hand keeps the APIs' rule too


def register(tk: PMap, *tools: Mapping) -> PMap:
    """Return a new toolkit with `tools` added; a duplicate name is a ValueError."""
    ordered, index = tk["tools"], tk["index"]
    added = []
    for t in tools:
        _check_tool(t)
        if t["name"] in index:
            raise ValueError(f"duplicate tool name {t['name']!r}: names must be unique")
        t = t if isinstance(t, PMap) else pmap(t)
        ordered, index = ordered.append(t), index.set(t["name"], t)
        added.append(t)
    # Each dialect's declarations ("wire") and their JSON text ("wire_json"), built once
    # per toolkit value rather than on every request; entries already built are kept
    # when a tool is added (the message log's lookup tool, every run).
    old = tk.get("wire") or {}
    wire = pmap(
        {
            d: old[d].extend(make(t) for t in added)
            if d in old and len(old[d]) + len(added) == len(ordered)
            else pvector(make(t) for t in ordered)
            for d, make in _ENTRIES.items()
        }
    )
    texts = pmap({d: message_text(entries) for d, entries in wire.items()})
    return tk.update({"tools": ordered, "index": index, "wire": wire, "wire_json": texts})


def toolkit(*tools: Mapping) -> PMap:
    """Return a toolkit value holding `tools` (in order).

    >>> from toolnexus.core.tool import tool
    >>> tk = toolkit(tool("echo", "Echo.", None, lambda a: a.get("s", "")))
    >>> tool_names(tk)
    ('echo',)
    """
    return register(EMPTY, *tools)


def tool_names(tk: PMap | None) -> tuple[str, ...]:
    """Return the tool names of a toolkit, in registration order."""
    return tuple(t["name"] for t in tk["tools"]) if tk else ()


def execute(tk: PMap | None, name: str, args: Mapping):
    """Run tool `name` with `args`; never raises: unknown names and failures are error results."""
    t = tk["index"].get(name) if tk else None
    if t is None:
        available = ", ".join(tool_names(tk)) or "(none)"
        return tool_result(f"Unknown tool {name!r}. Available tools: {available}", True)
    return t["execute"](args)


def _tools(tk: PMap | None):
    return tk["tools"] if tk else ()


def to_openai(tk: PMap | None) -> list[dict]:
    """Return the toolkit as OpenAI chat-completions `tools` entries."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": thaw(t["input_schema"]),
            },
        }
        for t in _tools(tk)
    ]


def to_anthropic(tk: PMap | None) -> list[dict]:
    """Return the toolkit as Anthropic messages `tools` entries."""
    return [
        {
            "name": t["name"],
            "description": t["description"],
            "input_schema": thaw(t["input_schema"]),
        }
        for t in _tools(tk)
    ]


def to_gemini(tk: PMap | None) -> list[dict]:
    """Return the toolkit as one Gemini `tools` entry of function declarations (or [])."""
    decls = [
        {"name": t["name"], "description": t["description"], "parameters": thaw(t["input_schema"])}
        for t in _tools(tk)
    ]
    return [{"functionDeclarations": decls}] if decls else []
