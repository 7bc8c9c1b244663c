"""The file store: one JSON file per conversation, written atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyrsistent import PVector

from ...core import transcript as tx
from ...store.decorators import sanitize_ids
from ...store.document import document_text, parse_document
from ...store.errors import StoreCorruptError
from ...store.fused import derive, view
from ...store.locks import paired_lock
from ..paths import make_dir
from .lock import file_lock_beside
from .names import SUFFIX, file_name_for, id_for_file_name, is_digest

try:  # POSIX: per-id temp files are flocked (see _open_temp); elsewhere, random temp names
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["file_store", "sanitized_file_store", "sweep_temp_files"]

_TEMP = ".tmp-"


# ---- atomic writes -----------------------------------------------------------------
# Each id writes through its own temp file '.tmp-<name>', flocked while in use: saves of
# one id queue on it, and a temp file left by a killed save (its flock gone with the
# process) is reused by the next save of that id, or removed when a store opens.


def _open_temp(root: Path, name: str) -> tuple[int, Path]:
    """Open, flock and empty this name's temp file; return (fd, path)."""
    if fcntl is None:  # pragma: no cover - Windows
        fd, tmp = tempfile.mkstemp(dir=root, prefix=_TEMP, suffix=SUFFIX)
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
    root = make_dir(Path(directory), f"file_store({str(directory)!r})")
    sweep_temp_files(root)

    def get(id: str):
        return _read(id, root / file_name_for(id))

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        name = file_name_for(id)
        text = document_text(id if is_digest(name) else None, tx.freeze_transcript(transcript))
        _write_atomically(root, name, text)

    def delete(id: str) -> None:
        _delete(root, id)

    def ids():
        return _ids(root)

    return derive(
        {
            "get": get,
            "save": save,
            "delete": delete,
            "ids": ids,
            "lock": paired_lock(lambda: file_lock_beside(root, lock_timeout)),
            "desc": f"file({str(root)!r})",
            "fused": {"view": view(tx.freeze_transcript)},  # get reads back what save wrote
        }
    )  # binds the fused calls to these operations


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
    if stored != id and (stored is not None or is_digest(path.name)):
        raise StoreCorruptError(
            f"{path} holds conversation {stored!r:.120}, not {id!r:.120} (a name collision)"
        )
    return transcript


def _delete(root: Path, id: str) -> None:
    path = root / file_name_for(id)
    if is_digest(path.name):
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
        found.append(_stored_id(p) if is_digest(p.name) else id_for_file_name(p.name))
    return tuple(sorted(i for i in found if i is not None))


def sanitized_file_store(directory: str | os.PathLike, *, lock_timeout: float = 60.0) -> dict:
    """Return `sanitize_ids(file_store(directory))`: file names safe on every file system.

    `file_store` alone is already injective on a case-sensitive file system (safe ids
    verbatim, others base64, long ones hashed). This adds lowercase-only names (so 'A'
    and 'a' stay apart on macOS and Windows) and no device names. Its "lock" is the file
    store's, on the sanitized key. Its file names differ from a plain `file_store`'s: do
    not switch an existing directory.
    """
    return sanitize_ids(file_store(directory, lock_timeout=lock_timeout))
