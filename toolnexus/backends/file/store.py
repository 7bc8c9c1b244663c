"""The file store: one JSON file per conversation, written atomically."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pyrsistent import PVector, thaw

from ...core import transcript as tx
from ...core.wire.jsonload import load
from ...store.errors import StoreCorruptError, StoreUnavailableError

try:  # POSIX: per-id temp files are flocked (see _open_temp); elsewhere, random temp names
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["file_store", "file_name_for", "id_for_file_name", "parse_document"]

_SAFE = re.compile(r"[A-Za-z0-9_-]{1,100}")
_SUFFIX = ".json"
_DIGEST = "~~"  # '~~' + SHA-256 hex: never a base64 name, whose alphabet has no '~'
_MAX_ENCODED = 240  # keeps names (and '.tmp-' + name, name + '.lock') under 255 bytes
_TEMP = ".tmp-"


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
        return id + _SUFFIX
    raw = _raw(id)
    encoded = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    if len(encoded) <= _MAX_ENCODED:
        return "~" + encoded + _SUFFIX
    return _DIGEST + hashlib.sha256(raw).hexdigest() + _SUFFIX


def _is_digest(name: str) -> bool:
    return name.startswith(_DIGEST)


def id_for_file_name(name: str) -> str | None:
    """Return the id a file name stands for; None if not one of ours or a digest name.

    (A digest name's id is only inside its file: `file_store`'s "ids" reads it there.)
    """
    if not name.endswith(_SUFFIX) or _is_digest(name):
        return None
    stem = name[: -len(_SUFFIX)]
    if stem.startswith("~"):
        pad = "=" * (-len(stem[1:]) % 4)
        try:
            return base64.urlsafe_b64decode(stem[1:] + pad).decode("utf-8", "surrogatepass")
        except ValueError:
            return None
    return stem if _SAFE.fullmatch(stem) else None


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


def _document(id: str | None, transcript: PVector) -> str:
    """Return the file's text; refused (TranscriptFormatError) if `parse_document` could
    not read it back (over its size bound, or not UTF-8)."""
    if id is None:
        return tx.readable(tx.dumps(transcript), "the conversation's file")
    messages = tx.json_text(thaw(transcript))
    # The id ASCII-escaped: any str (a lone surrogate too) stays valid UTF-8 on disk.
    doc = f'{{"version":{tx.FORMAT_VERSION},"id":{json.dumps(id)},"messages":{messages}}}'
    return tx.readable(doc, "the conversation's file")


# ---- atomic writes -----------------------------------------------------------------
# Each id writes through its own temp file '.tmp-<name>', flocked while in use: saves of
# one id queue on it, and a temp file left by a killed save (its flock gone with the
# process) is reused by the next save of that id, or removed when a store opens.


def _open_temp(root: Path, name: str) -> tuple[int, Path]:
    """Open, flock and empty this name's temp file; return (fd, path)."""
    if fcntl is None:  # pragma: no cover - Windows
        fd, tmp = tempfile.mkstemp(dir=root, prefix=_TEMP, suffix=_SUFFIX)
        return fd, Path(tmp)
    tmp = root / (_TEMP + name)
    while True:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Still the file at that path? (the save we waited for renamed it into place,
            # or a sweep removed it: then open a new one)
            if os.fstat(fd).st_ino == os.stat(tmp, follow_symlinks=False).st_ino:
                os.ftruncate(fd, 0)
                return fd, tmp
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _fsync_dir(root: Path) -> None:
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - a platform that cannot open directories
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(root: Path, name: str, text: str) -> None:
    data = text.encode("utf-8")
    fd, tmp = _open_temp(root, name)
    replaced = False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.replace(tmp, root / name)
        replaced = True
        _fsync_dir(root)  # the rename itself survives a power cut
    except BaseException:
        if not replaced:  # still ours (flocked): no other save can be using it
            tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)  # releases the flock


def sweep_temp_files(root: Path) -> int:
    """Remove temp files no save is writing (left by killed saves); return how many."""
    if fcntl is None:  # pragma: no cover - Windows: cannot tell a live temp file
        return 0
    removed = 0
    for entry in os.scandir(root):
        if not entry.name.startswith(_TEMP) or not entry.is_file(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(entry.path, follow_symlinks=False).st_ino:
                os.unlink(entry.path)
                removed += 1
        except OSError:  # held by a live save, or already gone
            pass
        finally:
            os.close(fd)
    return removed


def lock_directory(path: str | os.PathLike) -> Path:
    """Return where the paired locks of a store at `path` live: `PATH-locks` beside it.

    By its real path, so every spelling of the path (relative, through a symlink)
    shares the locks; inside it only when it has no parent ('/').
    """
    real = Path(os.path.realpath(path))
    return real.with_name(real.name + "-locks") if real.name else real / ".locks"


def file_lock_beside(path: str | os.PathLike, timeout: float) -> Callable:
    """Return the `file_lock` in `lock_directory(path)`; a clear error if it cannot be made.

    Where there is no flock (Windows) it is the in-process lock: pass `lock=` there.
    """
    from ...store.locks import file_lock, local_lock

    if fcntl is None:  # pragma: no cover - Windows
        return local_lock(timeout)
    where = lock_directory(path)
    try:
        return file_lock(where, timeout=timeout)
    except OSError as e:
        raise StoreUnavailableError(
            f"cannot create the lock directory {str(where)!r} beside {str(path)!r} ({e}): "
            "make its parent writable, or pass the client a lock= of your own"
        ) from None


# ---- the store -----------------------------------------------------------------------


def file_store(directory: str | os.PathLike, *, lock_timeout: float = 60.0) -> dict:
    """Return a store keeping one JSON file per conversation under `directory`.

    Any non-empty string is an id (see `file_name_for`). Writes go to a temp file in the
    same directory, are fsynced, renamed over the old file, and the directory fsynced:
    a crash leaves the old transcript or the new one, never half. A file that is not a
    transcript (not UTF-8, not JSON, no "messages", another id's) is a StoreCorruptError
    naming it, never "no history". Its "lock" is a `file_lock` in the directory
    `DIRECTORY-locks` beside it (see `lock_directory`), which the client takes by
    default: processes on one host sharing the directory lose no turn (hosts sharing it
    over a network file system: use `lock=`). A lock not taken within `lock_timeout`
    seconds raises LockTimeoutError.
    """
    from ...store.locks import paired_lock

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    sweep_temp_files(root)

    def get(id: str):
        return _read(id, root / file_name_for(id))

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        name = file_name_for(id)
        text = _document(id if _is_digest(name) else None, tx.freeze_transcript(transcript))
        _write_atomically(root, name, text)

    save.stored_view = tx.freeze_transcript  # type: ignore[attr-defined]  # get returns it

    def delete(id: str) -> None:
        _delete(root, id)

    def ids():
        return _ids(root)

    return {
        "get": get,
        "save": save,
        "delete": delete,
        "ids": ids,
        "lock": paired_lock(lambda: file_lock_beside(root, lock_timeout)),
        "desc": f"file({str(root)!r})",
    }


def _read(id: str, path: Path) -> PVector | None:
    """Return the transcript of `id` in the file at `path`, None if there is none."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreCorruptError(f"{path} cannot be read: {e}") from None
    try:
        transcript, stored = parse_document(raw)
    except tx.TranscriptFormatError as e:
        raise StoreCorruptError(f"{path} is not a valid transcript: {e}") from None
    if stored != id and (stored is not None or _is_digest(path.name)):
        raise StoreCorruptError(
            f"{path} holds conversation {stored!r:.120}, not {id!r:.120} (a name collision)"
        )
    return transcript


def _delete(root: Path, id: str) -> None:
    path = root / file_name_for(id)
    if _is_digest(path.name):
        try:
            stored = parse_document(path.read_bytes())[1]
        except (OSError, tx.TranscriptFormatError):
            stored = None  # missing or unreadable: nothing of another conversation's
        if stored is not None and stored != id:  # never delete another one's file
            raise StoreCorruptError(f"{path} holds conversation {stored!r:.120}, not {id!r:.120}")
    path.unlink(missing_ok=True)


def _stored_id(path: Path) -> str | None:
    try:
        return parse_document(path.read_bytes())[1]
    except FileNotFoundError:
        return None
    except (OSError, tx.TranscriptFormatError) as e:
        raise StoreCorruptError(f"{path} is not a valid transcript: {e}") from None


def _ids(root: Path) -> tuple:
    found = []
    for p in root.iterdir():
        if p.name.startswith("."):
            continue
        found.append(_stored_id(p) if _is_digest(p.name) else id_for_file_name(p.name))
    return tuple(sorted(i for i in found if i is not None))
