"""Pure transcript algebra: JSON freeze/thaw (more to come: turn groups, trim, repair)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, freeze, pvector, thaw

__all__ = ["FORMAT_VERSION", "freeze_transcript", "thaw_transcript", "dumps", "loads"]

FORMAT_VERSION = 1


class TranscriptFormatError(ValueError):
    """Raised when data is not a transcript this version of toolnexus can read."""


def freeze_transcript(messages: Sequence[Mapping] | None) -> PVector:
    """Return `messages` as an immutable pvector of pmaps (a no-op on frozen input).

    >>> freeze_transcript([{"role": "user", "content": "hi"}])
    pvector([pmap({'role': 'user', 'content': 'hi'})])
    """
    if messages is None:
        return pvector()
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TranscriptFormatError(f"a transcript is a list of messages, got {type(messages)}")
    for m in messages:
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            raise TranscriptFormatError(f"not a message (a map with a string 'role'): {m!r:.200}")
    return freeze(messages, strict=False) if not isinstance(messages, PVector) else messages


def thaw_transcript(messages: Sequence[Mapping]) -> list[dict]:
    """Return a transcript as plain lists and dicts (JSON-ready)."""
    return thaw(messages)


def dumps(messages: Sequence[Mapping]) -> str:
    """Return the versioned JSON document of a transcript."""
    return json.dumps(
        {"version": FORMAT_VERSION, "messages": thaw(messages)},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _migrate(doc: Any) -> list:
    """Return the message list of any known format version (a bare list is version 0)."""
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, Mapping) or "version" not in doc:
        raise TranscriptFormatError("not a transcript document (no 'version')")
    if doc["version"] != FORMAT_VERSION:
        raise TranscriptFormatError(
            f"unknown transcript format version {doc['version']!r}"
            f" (this toolnexus reads 0..{FORMAT_VERSION})"
        )
    return doc.get("messages")


def loads(text: str | bytes) -> PVector:
    """Return the frozen transcript of a versioned JSON document (TranscriptFormatError if not)."""
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as e:
        raise TranscriptFormatError(f"not JSON: {e}") from None
    return freeze_transcript(_migrate(doc))
