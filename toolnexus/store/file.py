"""The file store: one JSON file per conversation, written atomically."""

from __future__ import annotations

import base64
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core import transcript as tx
from .errors import StoreCorruptError

__all__ = ["file_store", "file_name_for", "id_for_file_name"]

_SAFE = re.compile(r"[A-Za-z0-9_-]{1,100}")
_SUFFIX = ".json"


def file_name_for(id: str) -> str:
    """Return the file name for a conversation id: injective, and never a path.

    A safe id (letters, digits, '_' and '-', up to 100) is its own name; any other
    id is stored as '~' + its URL-safe base64, which cannot collide with a safe
    name because '~' is not a safe character.

    >>> file_name_for("user-42"), file_name_for("a/b"), file_name_for("a_b")
    ('user-42.json', '~YS9i.json', 'a_b.json')
    """
    if not isinstance(id, str) or id == "":
        raise ValueError(f"a conversation id must be a non-empty string, got {id!r}")
    if _SAFE.fullmatch(id):
        return id + _SUFFIX
    encoded = base64.urlsafe_b64encode(id.encode("utf-8")).decode("ascii").rstrip("=")
    if len(encoded) > 240:  # keep under common 255-byte file-name limits
        raise ValueError(f"conversation id too long for a file store ({len(id)} chars)")
    return "~" + encoded + _SUFFIX


def id_for_file_name(name: str) -> str | None:
    """Return the conversation id a file name stands for, or None if it is not one of ours."""
    if not name.endswith(_SUFFIX):
        return None
    stem = name[: -len(_SUFFIX)]
    if stem.startswith("~"):
        pad = "=" * (-len(stem[1:]) % 4)
        try:
            return base64.urlsafe_b64decode(stem[1:] + pad).decode("utf-8")
        except ValueError:
            return None
    return stem if _SAFE.fullmatch(stem) else None


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=_SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_store(directory: str | os.PathLike) -> dict:
    """Return a store keeping one JSON file per conversation under `directory`.

    Writes go to a temp file in the same directory, are fsynced, then renamed over
    the old file, so a crash leaves the old transcript or the new one, never half.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)

    def get(id: str):
        path = root / file_name_for(id)
        try:
            text = path.read_bytes()  # decoded by loads: bad UTF-8 is corrupt, not a crash
        except FileNotFoundError:
            return None
        try:
            return tx.loads(text)
        except ValueError as e:
            raise StoreCorruptError(f"{path} is not a valid transcript: {e}") from None

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        _write_atomically(root / file_name_for(id), tx.dumps(tx.freeze_transcript(transcript)))

    def delete(id: str) -> None:
        (root / file_name_for(id)).unlink(missing_ok=True)

    def ids():
        names = (id_for_file_name(p.name) for p in root.iterdir() if not p.name.startswith("."))
        return tuple(sorted(i for i in names if i is not None))

    return {"get": get, "save": save, "delete": delete, "ids": ids, "desc": f"file({str(root)!r})"}
