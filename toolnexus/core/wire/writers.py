"""Writers of neutral items, one per dialect (see translate.py, which reads them).

A neutral item is ("system", text), ("user", text | parts), ("result", id, content,
is_error) or ("assistant", parts, calls, extras, own fields); each writer returns
(messages in its dialect, system texts lifted out of them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from . import gemini as G
from . import parts as P
from . import responses as R
from .common import to_json

__all__ = ["write_openai", "write_anthropic", "write_responses", "part_of", "args_text"]

# Each dialect's own reasoning among an assistant's extras: no other dialect carries it
# (Gemini's "gemini_parts" is its turn as it came, thoughts and signatures: gemini_items).
_REASONING_OF = {"anthropic": frozenset({"thinking", "redacted_thinking"}),
                 "responses": frozenset({"reasoning"}),
                 "gemini": frozenset({"gemini_parts"})}  # fmt: skip
_DROPPED_ON_OPENAI = frozenset().union(*_REASONING_OF.values())


def _server_side(block: Mapping) -> bool:
    """Return whether an Anthropic block is a server tool's (its use, or its result: a
    `*_tool_result` block in an assistant turn). The provider ran it; no other provider
    can take it back, and the answer's text already says what it found."""
    kind = block.get("type")
    return isinstance(kind, str) and (
        kind in ("server_tool_use", "mcp_tool_use", "container_upload")
        or kind.endswith("_tool_result")
    )


def _args_input(raw: Any) -> Mapping:
    """Return tool arguments as the object Anthropic needs (raw JSON text kept if broken)."""
    if isinstance(raw, Mapping):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return FrozenMap()
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    return value if isinstance(value, Mapping) else FrozenMap({"INVALID_JSON": raw})


def args_text(raw: Any) -> str:
    return raw if isinstance(raw, str) else to_json(raw).decode("utf-8")


def part_of(block: Mapping, source: str) -> Mapping:
    """Return the neutral part of a content block; an unknown block becomes a bare part."""
    reader = P.from_openai if source == "openai" else P.from_anthropic
    part = reader(block) or P.from_openai(block) or P.from_anthropic(block) or R.from_part(block)
    return part if part is not None else FrozenMap({"type": block.get("type") or "unknown"})


# ---- writing neutral items in a dialect ------------------------------------------------


def _unsupported_block(block: Mapping, dialect: str, policy: str) -> Mapping:
    return P.unsupported(FrozenMap({"type": block.get("type") or "unknown"}), dialect, policy)


# Each dialect's part writer (the records' `to_part`; this module is below the registry).
_TO_PART = {"openai": P.to_openai, "anthropic": P.to_anthropic, "responses": R.to_part,
            "gemini": G.to_part}  # fmt: skip


def _wire_parts(parts: Sequence[Mapping], dialect: str, policy: str) -> list:
    encode = _TO_PART[dialect]
    out = []
    for p in parts:
        if p.get("type") == "text":
            if p.get("text"):  # an empty text block is rejected, and says nothing
                out.append(encode(FrozenMap({"type": "text", "text": p["text"]}), policy))
        elif p.get("type") in P.MEDIA:
            out.append(encode(p, policy))
        else:  # its placeholder is text, in the dialect's own text part
            out.append(encode(P.unsupported(p, dialect, policy, "no such content there"), policy))
    return out


def _result_content(content: Any, dialect: str, policy: str) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    parts = [part_of(b, "anthropic") for b in content if isinstance(b, Mapping)]
    if dialect == "openai":  # a tool message carries text parts only
        parts = [
            p if p.get("type") == "text" else P.unsupported(p, "openai", policy, "in a tool result")
            for p in parts
        ]
    return pvector(_wire_parts(parts, dialect, policy))


def _openai_result(i: Any, content: Any, policy: str, media: list) -> FrozenMap:
    """Return the tool message of a result; its media parts (Anthropic tool_result image
    or document blocks) join `media`, for the user message after the turn's results."""
    if isinstance(content, (list, tuple, PVector)):
        parts = [part_of(b, "anthropic") for b in content if isinstance(b, Mapping)]
        if any(p.get("type") in P.MEDIA and p.get("type") != "audio" for p in parts):
            shown = [p for p in parts if p.get("type") in ("text", *P.MEDIA)]
            media.extend(p for p in shown if p.get("type") != "text")
            return FrozenMap({"role": "tool", "tool_call_id": i, "content": P.tool_text(shown)})
    body = _result_content(content, "openai", policy)
    return FrozenMap({"role": "tool", "tool_call_id": i, "content": body})


def _media_message(media: list) -> list[FrozenMap]:
    if not media:
        return []
    note = FrozenMap({"type": "text", "text": "Attached by the tools above:"})
    content = pvector([note, *(P.to_openai(p, "text") for p in media)])
    media.clear()
    return [FrozenMap({"role": "user", "content": content})]


def _openai_messages(items: list[tuple], policy: str) -> list[FrozenMap]:
    out: list = []
    media: list = []  # tool results' media, sent after the turn's results
    for item in items:
        kind = item[0]
        if kind != "result":
            out.extend(_media_message(media))
        if kind == "system":
            out.append(FrozenMap({"role": "system", "content": item[1]}))
        elif kind == "user":
            content = item[1]
            if not isinstance(content, str):
                content = pvector(_wire_parts(content, "openai", policy))
            if content:
                out.append(FrozenMap({"role": "user", "content": content}))
        elif kind == "result":
            _, i, content, _error = item
            out.append(_openai_result(i, content, policy, media))
        else:
            out.extend(_openai_assistant(*item[1:], policy))
    return out + _media_message(media)


def _text_only(parts: list, dialect: str, policy: str) -> list:
    """Return an assistant turn's parts for a dialect whose assistant turns carry text
    alone: each media part is refused or stands as its placeholder text, per `policy`."""
    why = "an assistant turn there carries text only"
    return [
        P.unsupported(p, dialect, policy, why) if p.get("type") in P.MEDIA else p for p in parts
    ]


def _openai_assistant(
    parts: list, calls: list, extras: list, own: Mapping, policy: str
) -> list[FrozenMap]:
    parts = _text_only(parts, "openai", policy)
    for b in extras:
        if b.get("type") not in _DROPPED_ON_OPENAI and not _server_side(b):
            parts = [*parts, _unsupported_block(b, "openai", policy)]
    text = "".join(p.get("text") or "" for p in _wire_parts(parts, "openai", policy))
    msg: dict = {**own, "role": "assistant", "content": text or None}
    if calls:
        msg["tool_calls"] = pvector(
            FrozenMap({**mine, "id": i, "type": "function",
                  "function": FrozenMap({"name": name, "arguments": args_text(raw)})})
            for i, name, raw, mine in calls
        )  # fmt: skip
    return [FrozenMap(msg)] if (text or calls or own.get("refusal")) else []


def _anthropic_messages(items: list[tuple], policy: str) -> tuple[list[FrozenMap], list[str]]:
    out: list = []
    system: list = []
    results: list = []  # the tool_result blocks waiting to go as one user message

    def flush() -> None:
        if results:
            out.append(FrozenMap({"role": "user", "content": pvector(results)}))
            results.clear()

    for item in items:
        kind = item[0]
        if kind == "result":
            _, i, content, error = item
            block = {"type": "tool_result", "tool_use_id": i,
                     "content": _result_content(content, "anthropic", policy)}  # fmt: skip
            results.append(FrozenMap({**block, "is_error": True} if error else block))
            continue
        flush()
        if kind == "system":
            if item[1]:
                system.append(item[1])
        elif kind == "user":
            content = item[1]
            if not isinstance(content, str):
                content = pvector(_wire_parts(content, "anthropic", policy))
            if content:
                out.append(FrozenMap({"role": "user", "content": content}))
        else:
            out.extend(_anthropic_assistant(*item[1:], policy))
    flush()
    return out, system


def _anthropic_assistant(
    parts: list, calls: list, extras: list, own: Mapping, policy: str
) -> list[FrozenMap]:
    refusal = own.get("refusal")  # an OpenAI refusal is what the model said: text here
    if isinstance(refusal, str) and refusal:
        parts = [*parts, FrozenMap({"type": "text", "text": refusal})]
    theirs = _REASONING_OF["responses"] | _REASONING_OF["gemini"]
    extras = [b for b in extras if b.get("type") not in theirs]
    blocks = [*extras, *_wire_parts(parts, "anthropic", policy)]
    blocks += [
        FrozenMap({"type": "tool_use", "id": i, "name": name, "input": _args_input(raw)})
        for i, name, raw, _ in calls
    ]
    return [FrozenMap({"role": "assistant", "content": pvector(blocks)})] if blocks else []


def _responses_messages(items: list[tuple], policy: str) -> tuple[list[FrozenMap], list[str]]:
    out: list = []
    results: list = []  # the function_call_output items waiting to go as one message

    def flush() -> None:
        if results:
            out.append(R.results_message(results))
            results.clear()

    for item in items:
        kind = item[0]
        if kind == "result":
            _, i, content, _error = item
            results.append(R.output_item(i, _responses_output(content, policy)))
            continue
        flush()
        if kind == "system":
            if item[1]:
                out.append(FrozenMap({"role": "system", "content": item[1]}))
        elif kind == "user":
            content = item[1]
            if not isinstance(content, str):
                content = pvector(_wire_parts(content, "responses", policy))
            if content:
                out.append(FrozenMap({"role": "user", "content": content}))
        else:
            out.extend(_responses_assistant(*item[1:], policy))
    flush()
    return out, []


def _responses_output(content: Any, policy: str) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    parts = [part_of(b, "anthropic") for b in content if isinstance(b, Mapping)]
    made = _wire_parts(parts, "responses", policy)
    return pvector(made) if made else ""


def _responses_assistant(
    parts: list, calls: list, extras: list, own: Mapping, policy: str
) -> list[FrozenMap]:
    refusal = own.get("refusal")
    parts = _text_only(parts, "responses", policy)
    if isinstance(refusal, str) and refusal:
        parts = [*parts, FrozenMap({"type": "text", "text": refusal})]
    for b in extras:
        reasoning = b.get("type") in _DROPPED_ON_OPENAI  # any dialect's own reasoning
        if not reasoning and not _server_side(b):
            parts = [*parts, _unsupported_block(b, "responses", policy)]
    text = "".join(p.get("text") or "" for p in parts if p.get("type") == "text")
    reasoning = [b for b in extras if b.get("type") in _REASONING_OF["responses"]]
    made = [FrozenMap({"type": "function_call", "call_id": i, "name": name,
                  "arguments": args_text(raw)}) for i, name, raw, _ in calls]  # fmt: skip
    if not reasoning and not made:
        return [FrozenMap({"role": "assistant", "content": text})] if text else []
    said = [FrozenMap({"role": "assistant", "content": text})] if text else []
    return [FrozenMap({"role": "assistant", "items": pvector([*reasoning, *said, *made])})]


def write_openai(items: list[tuple], policy: str) -> tuple[list[FrozenMap], list[str]]:
    """Return neutral items as chat-completions messages (system messages kept in place)."""
    return _openai_messages(items, policy), []


def write_anthropic(items: list[tuple], policy: str) -> tuple[list[FrozenMap], list[str]]:
    """Return neutral items as Messages messages and the system texts lifted out of them."""
    return _anthropic_messages(items, policy)


def write_responses(items: list[tuple], policy: str) -> tuple[list[FrozenMap], list[str]]:
    """Return neutral items as Responses messages (turns of items, results messages)."""
    return _responses_messages(items, policy)
