"""The registry's rows for the tests, and what a request says, read in any dialect.

A test meant for every dialect is parametrized over `STYLES` (the registry's rows, in
its order), so a new row runs it without an edit. What a request carries is read off
its body into the neutral view (`sent`), so a test asserts what went out without
knowing the dialect's shape. A table a test cannot derive from the record is checked
by `covers`: a row it lacks fails loudly rather than being skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from toolnexus.core.wire import DIALECTS, view

__all__ = ["STYLES", "covers", "url_of", "path_of", "sent", "transcript_of", "said", "calls",
           "results", "text_of", "declared_tools", "mixed", "RING", "others"]  # fmt: skip

STYLES = tuple(DIALECTS)  # every row of the registry, the default first
# Each row with the next one (the last with the first): every row once on each side of a
# pair, for tests of two dialects in turn that need not run every pair.
RING = tuple(zip(STYLES, STYLES[1:] + STYLES[:1], strict=True))

_TOOL_ROLE = "tool"


def covers(table: Collection, what: str = "table") -> Collection:
    """Return `table` (a mapping by dialect, or the dialects some cases name) after
    asserting it names every dialect of the registry and no other, so a new dialect
    fails here instead of being skipped."""
    assert set(table) == set(DIALECTS), f"{what} must cover the registry: {sorted(table)}"
    return table


def others(home: str) -> tuple[str, ...]:
    """Return every row of the registry but `home` (the dialect a transcript was made in:
    the ones that continue it from another dialect)."""
    assert home in DIALECTS, home
    return tuple(d for d in STYLES if d != home)


def mixed(n: int, start: int = 0) -> tuple[str, ...]:
    """Return `n` distinct rows of the registry from the `start`th on (wrapping round),
    for a chain of clients of different dialects."""
    assert n <= len(STYLES), f"the registry has {len(STYLES)} rows, not {n}"
    return tuple(STYLES[(start + i) % len(STYLES)] for i in range(n))


def url_of(style: str, base_url: str, model: str = "m") -> str:
    """Return the URL a dialect's (whole) request for `model` goes to, off its record."""
    d = DIALECTS[style]
    return d.model_url(base_url, model) if d.model_url else d.url(base_url)


def path_of(style: str, base_url: str, model: str = "m") -> str:
    """Return the path of `url_of`."""
    return urlsplit(url_of(style, base_url, model)).path


def _input_messages(items: Sequence[Mapping]) -> list[dict]:
    """Regroup a Responses request's `input` items into the transcript's messages: a run
    of output items is one assistant turn, a run of outputs one results message."""
    out: list[dict] = []
    for item in items:
        kind = item.get("type")
        if kind in (None, "message") and item.get("role") in ("user", "system", "developer"):
            out.append({"role": item["role"], "content": item.get("content")})
            continue
        role = _TOOL_ROLE if kind == "function_call_output" else "assistant"
        if out and out[-1]["role"] == role and "items" in out[-1]:
            out[-1]["items"].append(item)
        else:
            out.append({"role": role, "items": [item]})
    return out


def _content_messages(c: Mapping) -> list[dict]:
    """Return a Gemini request content as the transcript's messages (roles ours): a
    user content holding answers and words (joined in a request) is split in order."""
    parts = list(c.get("parts") or ())
    if c.get("role") == "model":
        return [{"role": "assistant", "parts": parts}]
    out: list[dict] = []
    for p in parts:
        role = _TOOL_ROLE if isinstance(p, Mapping) and "functionResponse" in p else "user"
        if out and out[-1]["role"] == role:
            out[-1]["parts"].append(p)
        else:
            out.append({"role": role, "parts": [p]})
    return out


def _system(system: Any) -> list[dict]:
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    if isinstance(system, Mapping):  # Gemini's systemInstruction: a content of text parts
        system = system.get("parts") or ()
    if isinstance(system, Sequence) and system:
        return [{"role": "system", "content": "".join(b.get("text", "") for b in system)}]
    return []


def transcript_of(body: Mapping) -> list[dict]:
    """Return the messages a request body carries, in the transcript's shape of its
    dialect (a system text lifted out of the messages put back first)."""
    if "contents" in body:
        head = _system(body.get("systemInstruction"))
        return head + [m for c in body["contents"] for m in _content_messages(c)]
    if "input" in body:
        head = _system(body.get("instructions"))
        return head + _input_messages(list(body["input"]))
    return _system(body.get("system")) + list(body["messages"])


def sent(body: Mapping) -> list[tuple]:
    """Return the neutral items (view.py) of what a request body carries."""
    return view.items(transcript_of(body))


def text_of(content: Any) -> str:
    """Return the text of a neutral content: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))


def said(items: Sequence[tuple]) -> list[str]:
    """Return the text of each user and assistant item, in order."""
    return [text_of(i[1]) for i in items if i[0] in ("user", "assistant")]


def calls(items: Sequence[tuple]) -> list[tuple]:
    """Return (id, name) of every call the items make, in order."""
    return [(c[0], c[1]) for i in items if i[0] == "assistant" for c in i[2]]


def results(items: Sequence[tuple]) -> list[tuple]:
    """Return (call id, text) of every result the items carry, in order."""
    return [(i[1], text_of(i[2])) for i in items if i[0] == "result"]


def declared_tools(body: Mapping) -> list[str]:
    """Return the names of the tools a request declares, in order, whatever the nesting
    of its dialect's tool entries (a schema names its properties as keys, never "name")."""
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, Mapping):
            if isinstance(x.get("name"), str):
                out.append(x["name"])
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, Sequence) and not isinstance(x, str):
            for v in x:
                walk(v)

    walk(body.get("tools") or ())
    return out
