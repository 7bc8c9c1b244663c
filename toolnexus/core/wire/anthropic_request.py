"""Anthropic requests in their published shape: what a replayed block may hold (citations
without response-only fields), prompt-cache breakpoints, a prompt of content parts. Pure;
`anthropic` (the dialect's codec) exposes these as its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from .common import is_empty_text_block

__all__ = [
    "request_citation",
    "request_text",
    "cache_tools",
    "cache_body",
    "EPHEMERAL",
    "MAX_BREAKPOINTS",
    "user_message_parts",
]

# What a request's citation may hold, by type (the published request schemas: a response
# citation adds fields such as `file_id` that a request refuses). Required and nullable:
# the titles, filled with null when a response left them out.
_CITATION_KEYS = {
    "char_location": ("type", "cited_text", "document_index", "document_title",
                      "start_char_index", "end_char_index"),
    "page_location": ("type", "cited_text", "document_index", "document_title",
                      "start_page_number", "end_page_number"),
    "content_block_location": ("type", "cited_text", "document_index", "document_title",
                               "start_block_index", "end_block_index"),
    "web_search_result_location": ("type", "cited_text", "encrypted_index", "title", "url"),
    "search_result_location": ("type", "cited_text", "search_result_index", "source",
                               "start_block_index", "end_block_index", "title"),
}  # fmt: skip
_TITLES = ("document_title", "title")


def request_citation(c: Any) -> Any:
    """Return a response citation cut to what a request's citation may hold.

    >>> request_citation({"type": "char_location", "cited_text": "x", "document_index": 0,
    ...     "document_title": "", "start_char_index": 0, "end_char_index": 1, "file_id": "f"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'type': 'char_location', 'cited_text': 'x', 'document_index': 0, 'document_title': None,
     'start_char_index': 0, 'end_char_index': 1}
    """
    keys = _CITATION_KEYS.get(c.get("type")) if isinstance(c, Mapping) else None
    if keys is None:
        return c  # a kind this version does not know: as sent
    out = {k: c[k] for k in keys if k in c}
    for k in _TITLES:  # required, nullable, at least one character when a string
        if k in keys and not out.get(k):
            out[k] = None
    return out


def request_text(b: Mapping) -> Mapping:
    """Return a text block whose citations a request accepts (the same block if they do)."""
    cited = b.get("citations")
    if not isinstance(cited, (list, tuple, PVector)):
        return b
    cut = [request_citation(c) for c in cited]
    return b if all(x == c for x, c in zip(cut, cited, strict=True)) else {**b, "citations": cut}


# ---- prompt caching (create_client(prompt_cache=True)) ------------------------------------

EPHEMERAL = FrozenMap({"type": "ephemeral"})
MAX_BREAKPOINTS = 4  # the API refuses a request with more cache_control marks
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def cache_tools(tools: Sequence) -> Sequence:
    """Return the request's tools with a cache breakpoint on the last one (once per run)."""
    if not tools or "cache_control" in tools[-1]:
        return tools
    # A read-only dict, not a pmap: the entry keeps its order (a provider tool's, verbatim).
    marked = MappingProxyType({**tools[-1], "cache_control": EPHEMERAL})
    return pvector([*tools[:-1], marked])


def _marks(value: Any) -> int:
    """Return how many cache_control marks a body part holds (blocks, tools, system)."""
    if isinstance(value, Mapping):
        content = value.get("content")
        own = 1 if value.get("cache_control") else 0
        return own + (_marks(content) if not isinstance(content, str) else 0)
    if isinstance(value, (list, tuple, PVector)):
        return sum(_marks(v) for v in value)
    return 0


def _marked_message(m: Mapping) -> Mapping | None:
    """Return message `m` with a breakpoint on its last block (None: nothing to mark)."""
    content = m.get("content")
    if isinstance(content, str):
        block = FrozenMap({"type": "text", "text": content, "cache_control": EPHEMERAL})
        return FrozenMap(m).set("content", pvector([block])) if content.strip() else None
    blocks = list(content or ())
    for i in range(len(blocks) - 1, -1, -1):
        b = blocks[i]
        if isinstance(b, Mapping) and b.get("type") not in _UNMARKABLE:
            if b.get("cache_control"):
                return None
            blocks[i] = FrozenMap(b).set("cache_control", EPHEMERAL)
            return FrozenMap(m).set("content", pvector(blocks))
    return None


def cache_body(body: Mapping, conversation_id: str | None) -> Mapping:
    """Return a request body with cache breakpoints on its last message and its system
    prompt (the last tool's comes from `cache_tools`), never more than four in all.

    The messages of the state are not changed: only this body's copy of the last one.
    """
    budget = MAX_BREAKPOINTS - _marks(body.get("tools")) - _marks(body["messages"])
    budget -= _marks(body["system"]) if isinstance(body.get("system"), (list, PVector)) else 0
    out = dict(body)
    messages = body["messages"]
    if budget > 0 and messages:
        last = _marked_message(messages[-1])
        if last is not None:
            out["messages"] = [*messages[:-1], last]
            budget -= 1
    system = body.get("system")
    if budget > 0 and isinstance(system, str) and system:
        out["system"] = [FrozenMap({"type": "text", "text": system, "cache_control": EPHEMERAL})]
    return out


# ---- content parts: a prompt that is a list of parts --------------------------------


def user_message_parts(
    parts: Sequence[Mapping], on_unsupported_part: str = "error", max_part_bytes: int | None = None
) -> FrozenMap:
    """Return a user message whose content is a list of `text`, `image` and `document` blocks.

    Parts are upstream's (`toolnexus.parts`); each is checked and held to `max_part_bytes`.
    Audio cannot go: it follows `on_unsupported_part` ("error" | "text").

    >>> user_message_parts([{"type": "text", "text": "hi"}])["content"][0]["text"]
    'hi'
    """
    from .parts import check_part_size, check_parts, to_anthropic

    checked = [check_part_size(p, max_part_bytes) for p in check_parts(parts)]
    blocks = (to_anthropic(p, on_unsupported_part) for p in checked)
    kept = pvector(b for b in blocks if not is_empty_text_block(b))
    return FrozenMap({"role": "user", "content": kept})
