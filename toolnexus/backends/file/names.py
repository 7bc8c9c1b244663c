"""File names of conversation ids: injective, never a path, short enough for every file
system (the file store's documents and the file lock's lock files)."""

from __future__ import annotations

import base64
import hashlib
import re

__all__ = ["file_name_for", "id_for_file_name", "is_digest", "SUFFIX"]

_SAFE = re.compile(r"[A-Za-z0-9_-]{1,100}")
SUFFIX = ".json"
_DIGEST = "~~"  # '~~' + SHA-256 hex: never a base64 name, whose alphabet has no '~'
_MAX_ENCODED = 240  # keeps names (and '.tmp-' + name, name + '.lock') under 255 bytes


def _raw(id: str) -> bytes:
    # surrogatepass: any str is an id, even one holding a lone surrogate.
    return id.encode("utf-8", "surrogatepass")


def file_name_for(id: str) -> str:
    """Return the file name for a conversation id: injective, never a path, at most 246 bytes.

    A safe id (letters, digits, '_' and '-', up to 100) is its own name; any other id
    is '~' + its URL-safe base64 (which cannot collide with a safe name: '~' is not a
    safe character); an id too long for that is '~~' + the SHA-256 of its UTF-8, and
    its file keeps the full id inside, checked on every read.

    >>> file_name_for("user-42"), file_name_for("a/b"), file_name_for("a_b")
    ('user-42.json', '~YS9i.json', 'a_b.json')
    >>> file_name_for("x" * 300)[:4], len(file_name_for("x" * 300))
    ('~~0d', 71)
    """
    if not isinstance(id, str) or id == "":
        raise ValueError(f"a conversation id must be a non-empty string, got {id!r}")
    if _SAFE.fullmatch(id):
        return id + SUFFIX
    raw = _raw(id)
    encoded = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    if len(encoded) <= _MAX_ENCODED:
        return "~" + encoded + SUFFIX
    return _DIGEST + hashlib.sha256(raw).hexdigest() + SUFFIX


def is_digest(name: str) -> bool:
    """Whether a file name is a digest one (its id is only inside the file)."""
    return name.startswith(_DIGEST)


def id_for_file_name(name: str) -> str | None:
    """Return the id a file name stands for; None if not one of ours or a digest name.

    (A digest name's id is only inside its file: `file_store`'s "ids" reads it there.)
    """
    if not name.endswith(SUFFIX) or is_digest(name):
        return None
    stem = name[: -len(SUFFIX)]
    if stem.startswith("~"):
        pad = "=" * (-len(stem[1:]) % 4)
        try:
            return base64.urlsafe_b64decode(stem[1:] + pad).decode("utf-8", "surrogatepass")
        except ValueError:
            return None
    return stem if _SAFE.fullmatch(stem) else None
