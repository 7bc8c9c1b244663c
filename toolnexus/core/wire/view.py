"""The neutral view: any dialect's messages read into one form, and written back.

Rule 1: pure; reads messages only through the registry's records. Every feature that
reads what a conversation says (translation, `show()`, the compactor, the GenAI export
and OpenTelemetry's content capture, the transcript algebra) reads it here, never a
dialect's shape. A message's items:

    ("system", text)
    ("user", text | [part, ...])                       parts as in toolnexus.parts
    ("assistant", [part, ...], [call, ...], [extra, ...], {own fields})
        call: (id, name, arguments: JSON text or an object, {the call's own fields})
        extra: what only its dialect carries (reasoning, server tools' blocks)
    ("result", call id, content: text or a list of blocks, is_error)

    >>> items([{"role": "user", "content": "hi"},
    ...        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1",
    ...         "name": "f", "input": {"x": 1}}]}])[1][2][0][:3]
    ('t1', 'f', {'x': 1})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..frozen import FrozenMap
from . import DIALECTS
from .dialect import Dialect
from .writers import part_of

__all__ = ["items", "read", "write", "transcript_of", "prompt_message", "record_of", "call_ids",
           "result_ids", "call_names", "content_part"]  # fmt: skip

_NO_IDS = FrozenMap()
# Dialects whose messages are their own shape, asked first; the rest share one shape.
_OWNERS = tuple(d for d in DIALECTS.values() if d.owns is not None)
_SHAPED = next(d for d in DIALECTS.values() if d.owns is None)


def record_of(message: Mapping) -> Dialect:
    """Return the record that reads `message`: the dialect whose own shape it is, else
    the role-and-content one."""
    for d in _OWNERS:
        if d.owns(message):
            return d
    return _SHAPED


def read(message: Mapping, ids: Mapping = _NO_IDS) -> list[tuple]:
    """Return the neutral items of one message (call and result ids mapped by `ids`)."""
    return record_of(message).read(message, ids)


def items(transcript: Sequence[Mapping]) -> list[tuple]:
    """Return the neutral items of a transcript in any dialect (mixed ones too)."""
    return [item for m in transcript if isinstance(m, Mapping) for item in read(m)]


def write(
    neutral: Sequence[tuple], dialect: str, on_unsupported_part: str = "error"
) -> tuple[list[FrozenMap], list[str]]:
    """Return neutral items as messages of `dialect`, and the system texts it lifts out
    of its messages (Messages' top-level `system`)."""
    return DIALECTS[dialect].write(list(neutral), on_unsupported_part)


def transcript_of(
    neutral: Sequence[tuple], dialect: str, on_unsupported_part: str = "error"
) -> list[FrozenMap]:
    """Return neutral items as messages of `dialect`, each system item kept in place as a
    system message (as the loop saves them; a request lifts them where it must)."""
    out: list[FrozenMap] = []
    pending: list[tuple] = []
    for item in [*neutral, ("system", None)]:  # the last one only flushes
        if item[0] != "system":
            pending.append(item)
            continue
        out += write(pending, dialect, on_unsupported_part)[0] if pending else []
        pending.clear()
        if item[1] is not None:
            out.append(FrozenMap({"role": "system", "content": item[1]}))
    return out


def call_ids(message: Mapping) -> tuple[str, ...]:
    """Return the ids of the tool calls an assistant message makes, in any dialect."""
    if message.get("role") != "assistant":
        return ()
    return record_of(message).call_ids(message)


def result_ids(message: Mapping) -> tuple:
    """Return the ids of the tool calls a message answers, in any dialect."""
    return record_of(message).result_ids(message)


def call_names(transcript: Sequence[Mapping]) -> dict[Any, str]:
    """Return {call id: tool name} of every call a transcript makes."""
    return {c[0]: c[1] for item in items(transcript) if item[0] == "assistant" for c in item[2]}


def content_part(block: Mapping) -> Mapping:
    """Return the neutral part of one content block of any dialect (a tool result's
    blocks, say); a block no dialect reads becomes a bare part of its type."""
    return part_of(block, "anthropic")


def prompt_message(
    dialect: str,
    prompt: str | Sequence[Mapping],
    *,
    on_unsupported_part: str = "error",
    max_part_bytes: int | None = None,
) -> FrozenMap:
    """Return the user message of a prompt in a dialect: a string, or a list of parts.

    >>> prompt_message("anthropic", [{"type": "text", "text": "hi"}])["content"][0]["type"]
    'text'
    """
    codec = DIALECTS[dialect]
    if isinstance(prompt, str):
        return codec.user_message(prompt)
    return codec.user_message_parts(prompt, on_unsupported_part, max_part_bytes)
