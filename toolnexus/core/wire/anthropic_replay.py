"""What Anthropic-style requests replay of a model's reasoning, and what they leave out
where the server refuses it (pure; `anthropic` exposes these as its own).

Anthropic signs its thinking blocks and takes them back signed only; compatible servers
(DeepSeek's /anthropic) send thinking without a signature and refuse a tool loop that
does not give it back ("The `content[].thinking` in the thinking mode must be passed
back"). So a transcript keeps every thinking block that led to an answer, and a request
to a server that takes thinking back signed only leaves the unsigned ones out (`omit`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from .common import is_empty_answer, refusal_text, replayable_with

__all__ = [
    "unsigned",
    "leads",
    "lone_thinking",
    "led",
    "led_only",
    "omissions",
    "refused_part",
    "omit",
]


def unsigned(b: Any) -> bool:
    """Return whether a block is a thinking block without a signature."""
    return isinstance(b, Mapping) and b.get("type") == "thinking" and not b.get("signature")


_REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def leads(blocks: Sequence, i: int) -> bool:
    """Return whether the block at `i` is followed by one of the model's output (not more
    reasoning)."""
    return any(
        not (isinstance(b, Mapping) and b.get("type") in _REASONING_BLOCKS) for b in blocks[i + 1 :]
    )


def lone_thinking(m: Mapping) -> bool:
    """Return whether a message holds an unsigned thinking block that leads to nothing."""
    content = m.get("content")
    if type(content) is str or not isinstance(content, (list, tuple, PVector)):
        return False
    return any(unsigned(b) and not leads(content, i) for i, b in enumerate(content))


def led(blocks: list) -> list:
    """Return content blocks without the unsigned thinking blocks that lead to nothing
    (cut while thinking, at max_tokens: never replayable); the same list when none."""
    if not any(map(unsigned, blocks)):
        return blocks
    return [b for i, b in enumerate(blocks) if not unsigned(b) or leads(blocks, i)]


def led_only(m: Mapping) -> Mapping:
    """Return a message without its unsigned thinking blocks that lead to nothing."""
    if not lone_thinking(m):
        return m
    return FrozenMap(m).set("content", pvector(led(list(m["content"]))))


# ---- what a request leaves out where the server refuses it (see core.flow) --------------

# Anthropic's own models take thinking back signed only (a compatible server may not).
_SIGNED_ONLY = ("claude",)


def omissions(model: str) -> frozenset:
    """Return what requests to `model` leave out from the start: unsigned thinking blocks
    for Anthropic's models, which refuse them ("thinking.signature: Field required").

    >>> sorted(omissions("claude-sonnet-4-5")), sorted(omissions("deepseek-v4-pro"))
    (['unsigned_thinking'], [])
    """
    name = model.rpartition("/")[2].lower()  # a gateway's "anthropic/claude-..." too
    return frozenset({"unsigned_thinking"}) if name.startswith(_SIGNED_ONLY) else frozenset()


def refused_part(error: Any) -> str | None:
    """Return what a refusal says the request should leave out ("unsigned_thinking": a
    400 naming a signature, as "messages.1.content.0.thinking.signature: Field required"),
    or None."""
    text = refusal_text(error)
    if text is None:
        return None
    return "unsigned_thinking" if "signature" in text else None


def omit(body: Mapping, names: frozenset) -> Mapping:
    """Return a request body without what `names` says the server refuses (the same
    object when it holds none of it)."""
    messages = body.get("messages")
    if "unsigned_thinking" not in names or not messages:
        return body
    hit = [
        i
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), (list, tuple, PVector)) and any(map(unsigned, m["content"]))
    ]
    if not hit:
        return body
    out = list(messages)
    for i in hit:
        kept = [b for b in out[i]["content"] if not unsigned(b)]
        out[i] = FrozenMap(out[i]).set("content", pvector(kept))
    return {**body, "messages": replayable_with(out, is_empty_answer)}
