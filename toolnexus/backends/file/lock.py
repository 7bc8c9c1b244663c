"""File locks: one lock file per conversation under a directory (fcntl.flock), for
several processes on one host; the paired lock of the file and SQLite stores."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...store.errors import StoreUnavailableError
from ...store.locks import _per_id, _poll, local_lock
from ..paths import make_dir
from .names import file_name_for

try:  # POSIX only: elsewhere a store's paired lock is the in-process one
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["file_lock", "file_lock_beside", "lock_directory"]


def _lock_file_name(id: str) -> str:
    return file_name_for(id) + ".lock"  # injective, never a path, under 255 bytes


def file_lock(directory: str | os.PathLike, timeout: float = 60.0) -> Callable:
    """Return a lock per conversation for several processes on one host (fcntl.flock).

    Each id locks its own file under `directory` (named like the file store names
    ids). The holder removes the file as it releases, so no file stays per id; a waiter
    that took the lock of a file removed meanwhile sees it is no longer the one at the
    path and tries again (see `_take_once`).
    """
    import fcntl  # noqa: F401 - fail here, not at the first take, where there is none

    root = make_dir(Path(directory), f"file_lock({str(directory)!r})")

    def take(id: str, seconds: float) -> Callable[[], None]:
        path = root / _lock_file_name(id)
        held: list[int] = []
        _poll(lambda: _take_once(path, held), seconds,
              f"file lock for {id!r:.120} in {str(root)!r}")  # fmt: skip
        fd = held[0]

        def release() -> None:
            # Remove the file while still holding it: whoever opened it before waits on
            # a file no longer at the path and tries again; closing drops the flock.
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            finally:
                try:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                finally:
                    os.close(fd)

        return release

    return _per_id(take, timeout)


def _take_once(path: Path, held: list[int]) -> bool:
    """Try once to hold the lock file at `path`: True (its descriptor appended to `held`)
    when taken and still the file at the path, else False with nothing left open."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except BaseException:
        os.close(fd)
        raise
    try:
        here = os.stat(path)
    except FileNotFoundError:
        here = None
    mine = os.fstat(fd)
    if here is None or (here.st_dev, here.st_ino) != (mine.st_dev, mine.st_ino):
        os.close(fd)  # its holder removed it as it released: the lock is the new file's
        return False
    held.append(fd)
    return True


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
