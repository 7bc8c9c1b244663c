"""The role-and-content shape the chat dialects share: its neutral reader and its
tool-call algebra.

Rule 1: pure; reads a message by its shape only. A chat-completions assistant message
calls tools through `tool_calls` and is answered by `tool` messages, one per call; a
Messages assistant message holds `tool_use` blocks and is answered by ONE user message
of `tool_result` blocks (results first). Both dialects' records point here for reading
(`read`), for the algebra (`call_ids`, `result_ids`, `gathers`, `close`,
`keep_results`) and for whether a message is right as it is (`native_chat`,
`native_blocks`); their writers are their own (writers.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyrsistent import pvector

from ..frozen import FrozenMap, freeze
from .writers import part_of

__all__ = [
    "read",
    "call_ids",
    "result_ids",
    "gathers",
    "close",
    "keep_results",
    "native_chat",
    "native_blocks",
    "CHAT_BLOCKS",
    "CHAT_ROLES",
]

# Content part types only chat completions has ("text" is both's).
CHAT_BLOCKS = frozenset({"image_url", "input_audio", "file", "refusal"})
CHAT_ROLES = frozenset({"system", "developer", "tool"})
_MEDIA_BLOCKS = frozenset({"image", "document"})  # Messages' media blocks
_SYSTEM_ROLES = frozenset({"system", "developer"})
# What the writers read of a chat message and tool call; the rest is the provider's
# own (reasoning_content, extra_content, ...), kept in chat, dropped elsewhere.
_READ_MESSAGE = frozenset({"role", "content", "tool_calls"})
_READ_CALL = frozenset({"id", "type", "function"})


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _blocks(message: Mapping) -> list:
    content = message.get("content")
    return [b for b in content if isinstance(b, Mapping)] if _is_list(content) else []


# ---- the algebra -----------------------------------------------------------------------


def call_ids(message: Mapping) -> tuple[str, ...]:
    """Return the ids of the tool calls an assistant message makes (either shape)."""
    calls = message.get("tool_calls") or ()
    if not _is_list(calls):
        calls = ()  # not a list of calls (check_message refuses it where messages come in)
    ids = [c.get("id") for c in calls if isinstance(c, Mapping)]
    ids += [b.get("id") for b in _blocks(message) if b.get("type") == "tool_use"]
    return tuple(i for i in ids if isinstance(i, str))


def result_ids(message: Mapping) -> tuple:
    """Return the ids of the tool calls a message answers (a tool message, or a user
    message's tool_result blocks)."""
    role = message.get("role")
    if role == "tool":
        return (message.get("tool_call_id"),)
    if role == "user":
        return tuple(
            b.get("tool_use_id") for b in _blocks(message) if b.get("type") == "tool_result"
        )
    return ()


def gathers(message: Mapping) -> bool:
    """Return whether a results message holds all of its turn's results (a user message
    of tool_result blocks does; a tool message answers one call)."""
    return message.get("role") == "user"


def _result_block(id: str, text: str) -> FrozenMap:
    return FrozenMap({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": True})


def close(
    caller: Mapping, gathered: Mapping | None, ids: Sequence[str], text: str
) -> tuple[FrozenMap | None, list[FrozenMap]]:
    """Return error results `text` for the calls `ids` of `caller` left open: (the
    turn's gathered results message with them merged in, or None; messages to append)."""
    if caller.get("tool_calls"):
        made = [FrozenMap({"role": "tool", "tool_call_id": i, "content": text}) for i in ids]
        return None, made
    if gathered is None:
        return None, [
            FrozenMap({"role": "user", "content": pvector(_result_block(i, text) for i in ids)})
        ]
    # All results of a turn in ONE user message, results before any text.
    blocks = _blocks(gathered)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    others = [b for b in blocks if b.get("type") != "tool_result"]
    made = [_result_block(i, text) for i in ids]
    return _with_content(gathered, results + made + others), []


def _with_content(message: Mapping, blocks: Sequence) -> FrozenMap:
    # A frozen transcript may still hold plain dicts (freeze_transcript keeps a pvector as is).
    return FrozenMap(message).set("content", freeze(list(blocks)))


def keep_results(message: Mapping, wanted: Callable[[Any], bool]) -> FrozenMap | None:
    """Return `message` with only the results whose call id is `wanted` (asked once per
    result, in order), or None when nothing is left; the same object when all are."""
    if message.get("role") == "tool":
        return message if wanted(message.get("tool_call_id")) else None
    blocks = _blocks(message)
    kept = [b for b in blocks if b.get("type") != "tool_result" or wanted(b.get("tool_use_id"))]
    if len(kept) == len(blocks):
        return message
    return _with_content(message, kept) if kept else None


# ---- right as it is --------------------------------------------------------------------


def native_chat(message: Mapping) -> bool:
    """Return whether a message is right for chat completions as it is (ids aside)."""
    if message.get("role") == "assistant":
        return bool(message.get("content") or message.get("tool_calls") or message.get("refusal"))
    return True


def native_blocks(message: Mapping) -> bool:
    """Return whether a message is right for Messages as it is: user or assistant, non-empty
    text or blocks of its own (no empty text block), nothing else."""
    if message.get("role") not in ("user", "assistant") or set(message) - {"role", "content"}:
        return False
    content = message.get("content")
    if isinstance(content, str):
        return bool(content)
    blocks = _blocks(message)
    return (
        bool(blocks)
        and len(blocks) == len(content)
        and all(b.get("type") not in CHAT_BLOCKS for b in blocks)
        and all(b.get("text") for b in blocks if b.get("type") == "text")
    )


# ---- the neutral items -----------------------------------------------------------------


def _content_parts(content: Any) -> list:
    if isinstance(content, str):
        return [FrozenMap({"type": "text", "text": content})]
    source = "openai" if any(b.get("type") in CHAT_BLOCKS for b in content) else "anthropic"
    return [part_of(b, source) for b in content if isinstance(b, Mapping)]


def _joined(content: Any) -> str:
    return "".join(b.get("text") or "" for b in _blocks({"content": content}))


def read(m: Mapping, ids: Mapping) -> list[tuple]:
    """Return the neutral items of a role-and-content message (see view.py), each call
    and result id as `ids` maps it."""
    role = m.get("role")
    if role in _SYSTEM_ROLES:
        content = m.get("content")
        return [("system", content if isinstance(content, str) else _joined(content))]
    if role == "tool":
        i = m.get("tool_call_id")
        return [("result", ids.get(i, i), m.get("content"), False)]
    if role == "assistant":
        return [("assistant", *_assistant(m, ids))]
    content = m.get("content")
    if isinstance(content, str):
        return [("user", content)]
    out, rest = [], []
    for b in _blocks(m):
        if b.get("type") == "tool_result":
            i = b.get("tool_use_id")
            out.append(("result", ids.get(i, i), b.get("content"), bool(b.get("is_error"))))
        else:
            rest.append(b)
    return out + ([("user", _content_parts(rest))] if rest else [])


def _assistant(m: Mapping, ids: Mapping) -> tuple[list, list, list, dict]:
    """Return (content parts, calls as (id, name, raw args, the call's own fields),
    blocks only Messages has, the message's own fields: what only chat carries)."""
    content, calls, extras = m.get("content"), [], []
    parts = [FrozenMap({"type": "text", "text": content})] if isinstance(content, str) else []
    own = {k: v for k, v in m.items() if k not in _READ_MESSAGE}
    for c in m.get("tool_calls") or ():
        fn = c.get("function") or {}
        mine = {k: v for k, v in c.items() if k not in _READ_CALL}
        calls.append((ids.get(c.get("id"), c.get("id")), fn.get("name", ""),
                      fn.get("arguments"), mine))  # fmt: skip
    for b in _blocks(m):
        kind = b.get("type")
        if kind == "tool_use":
            calls.append((ids.get(b.get("id"), b.get("id")), b.get("name", ""), b.get("input"), {}))
        elif kind in ("text", "refusal") or kind in CHAT_BLOCKS:
            parts.append(part_of(b, "openai" if kind != "text" else "anthropic"))
        elif kind in _MEDIA_BLOCKS:  # what a model drew or quoted: a part, as Gemini's are
            parts.append(part_of(b, "anthropic"))
        else:
            extras.append(b)
    return parts, calls, extras, own
