"""Ready-made hooks. `compactor` is a before_llm hook that summarizes old turns.

A hook is a plain function in the client's `hooks` dict (before_llm, after_llm,
before_tool, after_tool); see `loop.run_flow` for what each receives and returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from .core.frozen import FrozenMap
from .core.transcript import freeze_transcript, is_system, safe_cuts
from .core.wire import view

__all__ = ["compactor", "estimate_tokens", "extractive_summary"]

SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"


def estimate_tokens(messages: Sequence[Mapping]) -> int:
    """Return a rough token count of messages (4 characters a token, the common rule).

    >>> estimate_tokens([{"role": "user", "content": "x" * 40}])
    18
    """
    from .core.frozen import thaw

    return len(json.dumps(thaw(list(messages)), ensure_ascii=False)) // 4


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [p.get("text") or "" for p in content or () if p.get("type") == "text"]


def _text_of(message: Mapping) -> str:
    """Return what a message says, in any dialect (read through the neutral view): its
    text, the tools it calls, the results it carries."""
    said: list[str] = []
    for item in view.read(message):
        if item[0] == "result":
            said.append(f"[tool result: {item[2]}]")
        elif item[0] == "assistant":
            said += _texts(item[1]) + [f"[called {call[1]}]" for call in item[2]]
        else:  # what the system or a user said
            said += _texts(item[1])
    return " ".join(p for p in said if p)


def extractive_summary(messages: Sequence[Mapping], max_chars: int = 4000) -> str:
    """Return a short summary without a model: each message's role and first words.

    Over `max_chars`, the most recent lines are kept.
    """
    lines = [f"- {m['role']}: {_text_of(m)[:100]}" for m in messages if _text_of(m)]
    text = "\n".join(lines)
    return text if len(text) <= max_chars else "...\n" + text[-max_chars:]


def _with_summary(summary: str, tail: PVector) -> PVector:
    """Return the tail led by the summary as a user message (merged into a leading user
    message, so roles still alternate under either dialect)."""
    text = SUMMARY_PREFIX + summary
    if tail and tail[0].get("role") == "user" and "content" not in tail[0]:
        return tail.set(0, _led_by(text, tail[0]))  # a message of its dialect's own shape
    if tail and tail[0].get("role") == "user":
        first = tail[0]
        content = first["content"]
        if isinstance(content, str):
            merged = first.set("content", f"{text}\n\n{content}")
        else:  # a text part of the kind the message's own parts are (input_text: Responses)
            kind = "input_text" if any(str(p.get("type")).startswith("input_")
                                       for p in content) else "text"  # fmt: skip
            merged = first.set(
                "content", pvector([FrozenMap({"type": kind, "text": text})]) + content
            )
        return tail.set(0, merged)
    return pvector([FrozenMap({"role": "user", "content": text})]) + tail


def _led_by(text: str, message: Mapping) -> Mapping:
    """Return a user message of a dialect's own shape (Gemini's parts) with `text` first,
    read and written back through the neutral view."""
    record = view.record_of(message)
    said = [p for item in view.read(message) if item[0] == "user" for p in _parts(item[1])]
    led = [("user", [FrozenMap({"type": "text", "text": text}), *said])]
    (written,) = record.write(led, "text")[0]
    return written


def _parts(content: Any) -> list:
    return [FrozenMap({"type": "text", "text": content})] if isinstance(content, str) else content


def compact(
    messages: Sequence[Mapping],
    max_tokens: int,
    keep_tail: int | None = None,
    summarize: Callable[[Sequence[Mapping]], str] = extractive_summary,
    count_tokens: Callable[[Sequence[Mapping]], int] = estimate_tokens,
) -> PVector:
    """Return `messages` with the older body replaced by one summary (pure).

    Keeps a leading system message and a recent tail starting at a safe cut (never a
    tool result whose call was cut away). At or below `max_tokens` returns the input.
    `keep_tail` is the tail's message budget; None keeps the longest safe tail that
    fits in half of `max_tokens`. Returns a new transcript; does not modify the input.
    """
    t = freeze_transcript(messages)
    if count_tokens(t) <= max_tokens:
        return t
    head = t[:1] if t and is_system(t[0]) else t[:0]
    cuts = [i for i in safe_cuts(t) if i > len(head)]  # a tail that leaves something to sum
    if not cuts:
        return t
    if keep_tail is not None:
        fitting = [i for i in cuts if len(t) - i <= keep_tail]
    else:
        fitting = [i for i in cuts if count_tokens(t[i:]) <= max_tokens // 2]
    cut = fitting[0] if fitting else cuts[-1]
    return head + _with_summary(summarize(t[len(head) : cut]), t[cut:])


def compactor(
    max_tokens: int,
    keep_tail: int | None = None,
    summarize: Callable[[Sequence[Mapping]], str] = extractive_summary,
    count_tokens: Callable[[Sequence[Mapping]], int] = estimate_tokens,
) -> Callable[[Mapping], Any]:
    """Return a before_llm hook that compacts the transcript when it exceeds `max_tokens`.

    Use it as `create_client(..., hooks={"before_llm": compactor(8000, summarize=...)})`;
    `summarize(messages) -> str` may call a model. The compacted transcript is what the
    run returns and stores.
    """
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if keep_tail is not None and (not isinstance(keep_tail, int) or keep_tail < 1):
        raise ValueError(f"keep_tail must be a positive integer or None, got {keep_tail!r}")

    def before_llm(ctx: Mapping) -> dict | None:
        messages = ctx["messages"]
        if count_tokens(messages) <= max_tokens:
            return None
        return {"messages": compact(messages, max_tokens, keep_tail, summarize, count_tokens)}

    return before_llm
