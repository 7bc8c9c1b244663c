"""The stored document of a transcript: versioned JSON, read back strictly (the file
store's files, the plaintext inside `encrypted`)."""

from __future__ import annotations

import json

from pyrsistent import PVector

from ..core import transcript as tx
from ..core.frozen import thaw
from ..core.wire.jsonload import load

__all__ = ["parse_document", "document_text"]


def parse_document(raw: bytes) -> tuple[PVector, str | None]:
    """Return (transcript, the id written inside or None) of a stored document.

    Raises TranscriptFormatError for anything else: bytes that are not UTF-8 or not
    JSON, an unknown version, a missing or non-list "messages" (never read as empty).

    >>> parse_document(b'{"version": 1, "id": "a", "messages": []}')
    (pvector([]), 'a')
    """
    try:
        doc = load(raw.decode("utf-8"))  # bounded depth and size: never a RecursionError
    except UnicodeDecodeError as e:
        raise tx.TranscriptFormatError(f"not UTF-8: {e}") from None
    except ValueError as e:
        raise tx.TranscriptFormatError(f"not JSON: {e}") from None
    if isinstance(doc, list):  # format version 0: a bare message list
        return tx.freeze_transcript(doc), None
    if not isinstance(doc, dict) or "version" not in doc:
        raise tx.TranscriptFormatError("not a transcript document (no 'version')")
    if doc["version"] != tx.FORMAT_VERSION:
        raise tx.TranscriptFormatError(f"unknown transcript format version {doc['version']!r}")
    messages, stored = doc.get("messages"), doc.get("id")
    if not isinstance(messages, list):
        raise tx.TranscriptFormatError(f"'messages' is {type(messages).__name__}, not a list")
    if stored is not None and not isinstance(stored, str):
        raise tx.TranscriptFormatError(f"'id' is {type(stored).__name__}, not a string")
    return tx.freeze_transcript(messages), stored


def document_text(id: str | None, transcript: PVector) -> str:
    """Return the file's text; refused (TranscriptFormatError) if `parse_document` could
    not read it back (over its size bound, or not UTF-8)."""
    if id is None:
        return tx.readable(tx.dumps(transcript), "the conversation's file")
    messages = tx.json_text(thaw(transcript))
    # The id ASCII-escaped: any str (a lone surrogate too) stays valid UTF-8 on disk.
    doc = f'{{"version":{tx.FORMAT_VERSION},"id":{json.dumps(id)},"messages":{messages}}}'
    return tx.readable(doc, "the conversation's file")
