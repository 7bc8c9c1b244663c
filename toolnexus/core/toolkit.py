"""Toolkits: immutable collections of tool maps, and their provider adapters."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pyrsistent import pvector

from .frozen import FrozenMap, thaw
from .tool import check_name, tool_result
from .wire import ANTHROPIC, DIALECTS, OPENAI
from .wire.common import message_text

__all__ = [
    "toolkit", "register", "execute", "tool_names", "provider_tool", "provider_tools",
    "to_openai", "to_anthropic", "to_gemini",
]  # fmt: skip

# The one name metrics and spans give every call to a tool the toolkit does not have: a
# model invents names at will, and each as a label or span name would be a new series.
UNKNOWN_TOOL = "_unknown"

# Each dialect's declaration of a tool (the codecs own their shape).
_ENTRIES = {d: codec.tool_entry for d, codec in DIALECTS.items()}

# "tools" keeps registration order; "index" finds a tool by name; "native" holds the
# provider tools (declarations the provider runs itself), in registration order.
# "wire" holds each dialect's request entries (ours, then the provider tools meant for
# that dialect), computed by register.
EMPTY = FrozenMap({"tools": pvector(), "index": FrozenMap(), "skills": pvector(),
                   "native": pvector(), "wire": FrozenMap(), "wire_json": FrozenMap()})  # fmt: skip


def provider_tool(declaration: Mapping, *, style: str | None = None) -> FrozenMap:
    """Return a provider tool: a declaration sent verbatim in the request's `tools`, run
    by the provider itself (Anthropic's `web_search`, code execution; Responses'
    `web_search`, `file_search`), never by the loop. With `style`, it goes to that
    dialect's requests only, so one toolkit can carry each provider's own.

    >>> t = provider_tool({"type": "web_search_20250305", "name": "web_search"},
    ...                   style="anthropic")
    >>> t["style"], t["name"]
    ('anthropic', 'web_search')
    """
    if not isinstance(declaration, Mapping) or not isinstance(declaration.get("type"), str):
        raise ValueError("a provider tool is a declaration with a string 'type', e.g. "
                         f"{{'type': 'web_search'}}, got {declaration!r:.120}")  # fmt: skip
    if declaration["type"] in ("function", "custom"):
        raise ValueError("a function tool is ours to run: declare it with define_tool or tool, "
                         "not provider_tool")  # fmt: skip
    if style is not None and style not in DIALECTS:
        raise ValueError(f"unknown style {style!r}: expected one of {tuple(DIALECTS)} or None")
    name = declaration.get("name")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"a provider tool's name is a string, got {name!r:.60}")
    return FrozenMap({"provider_tool": _verbatim(declaration), "style": style, "name": name})


def _verbatim(declaration: Mapping) -> Mapping:
    """Return a read-only copy of a JSON declaration that keeps its keys' order (a pmap
    iterates in hash order: the provider gets the declaration as it was written)."""
    try:
        text = json.dumps(declaration, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"a provider tool's declaration must be JSON: {e}") from None
    return _readonly(json.loads(text))


def _readonly(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _readonly(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_readonly(v) for v in value)
    return value


def _is_provider_tool(t: Any) -> bool:
    return isinstance(t, Mapping) and "provider_tool" in t and "execute" not in t


def provider_tools(tk: FrozenMap | None, style: str | None = None) -> tuple:
    """Return the provider tools of a toolkit (those sent to `style`'s requests if given)."""
    native = (tk.get("native") or ()) if tk else ()
    return tuple(t for t in native if style is None or t["style"] in (None, style))


_TOOL_KEYS = ("name", "description", "input_schema", "execute")  # what every dialect reads


def _check_tool(t: Any) -> None:
    if not isinstance(t, Mapping):
        raise ValueError(f"not a tool map (needs {', '.join(_TOOL_KEYS)}): {t!r:.200}")
    missing = [k for k in _TOOL_KEYS if k not in t]
    if missing:  # else a KeyError from deep inside the wire declarations
        raise ValueError(
            f"not a tool map (missing {', '.join(missing)}): {t!r:.200}; make one with"
            " tool(name, description, input_schema, execute) or @define_tool"
        )
    check_name(t["name"])  # a map built by hand keeps the APIs' rule too


def register(tk: FrozenMap, *tools: Mapping) -> FrozenMap:
    """Return a new toolkit with `tools` added; a duplicate name is a ValueError."""
    ordered, index = tk["tools"], tk["index"]
    before = native = tk.get("native") or pvector()
    added = []
    for t in tools:
        mine = _is_provider_tool(t)
        if not mine:
            _check_tool(t)
        name = t.get("name")
        # Names are unique across ours and the provider's: the API refuses a repeat.
        if name is not None and (name in index or any(n["name"] == name for n in native)):
            raise ValueError(f"duplicate tool name {name!r}: names must be unique")
        t = t if isinstance(t, FrozenMap) else FrozenMap(t)
        if mine:
            native = native.append(t)
            continue
        ordered, index = ordered.append(t), index.set(t["name"], t)
        added.append(t)
    # Each dialect's declarations ("wire") and their JSON text ("wire_json"), built once
    # per toolkit value rather than on every request; entries already built are kept
    # when a tool is added (the message log's lookup tool, every run).
    old = tk.get("wire") or {}
    wire = FrozenMap(
        {d: _entries(old.get(d), d, make, ordered, added, before, native)
         for d, make in _ENTRIES.items()}
    )  # fmt: skip
    texts = FrozenMap({d: message_text(entries) for d, entries in wire.items()})
    return tk.update(
        {"tools": ordered, "index": index, "native": native, "wire": wire, "wire_json": texts}
    )


def _entries(old: Any, d: str, make: Any, ordered: Any, added: list, before: Any, native: Any):
    """Return a dialect's `tools` entries: ours (those built before kept), then the
    provider tools meant for it, verbatim."""
    theirs = [t["provider_tool"] for t in native if t["style"] in (None, d)]
    had = sum(1 for t in before if t["style"] in (None, d))
    if old is not None and len(old) - had + len(added) == len(ordered):
        ours = (old if not had else old[: len(old) - had]).extend(make(t) for t in added)
    else:
        ours = pvector(make(t) for t in ordered)
    return ours.extend(theirs) if theirs else ours


def toolkit(*tools: Mapping) -> FrozenMap:
    """Return a toolkit value holding `tools` (in order).

    >>> from toolnexus.core.tool import tool
    >>> tk = toolkit(tool("echo", "Echo.", None, lambda a: a.get("s", "")))
    >>> tool_names(tk)
    ('echo',)
    """
    return register(EMPTY, *tools)


def tool_names(tk: FrozenMap | None) -> tuple[str, ...]:
    """Return the tool names of a toolkit, in registration order."""
    return tuple(t["name"] for t in tk["tools"]) if tk else ()


def execute(tk: FrozenMap | None, name: str, args: Mapping):
    """Run tool `name` with `args`; never raises: unknown names and failures are error results."""
    t = tk["index"].get(name) if tk else None
    if t is None:
        available = ", ".join(tool_names(tk)) or "(none)"
        return tool_result(f"Unknown tool {name!r}. Available tools: {available}", True)
    return t["execute"](args)


def _tools(tk: FrozenMap | None):
    return tk["tools"] if tk else ()


def _declared(tk: FrozenMap | None, dialect: Any) -> list[dict]:
    # A dialect's request `tools` (ours, then its provider tools) as plain JSON values.
    return json.loads(message_text(list(dialect.encode_tools(tk)))) if tk else []


def to_openai(tk: FrozenMap | None) -> list[dict]:
    """Return the toolkit as OpenAI chat-completions `tools` entries (its provider tools
    for that style after ours)."""
    return _declared(tk, OPENAI)


def to_anthropic(tk: FrozenMap | None) -> list[dict]:
    """Return the toolkit as Anthropic messages `tools` entries (its provider tools for
    that style after ours)."""
    return _declared(tk, ANTHROPIC)


def to_gemini(tk: FrozenMap | None) -> list[dict]:
    """Return the toolkit as one Gemini `tools` entry of function declarations (or [])."""
    decls = [
        {"name": t["name"], "description": t["description"], "parameters": thaw(t["input_schema"])}
        for t in _tools(tk)
    ]
    return [{"functionDeclarations": decls}] if decls else []
