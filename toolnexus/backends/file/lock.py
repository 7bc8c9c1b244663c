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
    ids). The files stay after release: removing them would race with a waiter.
    """
    import fcntl

    root = make_dir(Path(directory), f"file_lock({str(directory)!r})")

    def take(id: str, seconds: float) -> Callable[[], None]:
        fd = os.open(root / _lock_file_name(id), os.O_RDWR | os.O_CREAT, 0o644)

        def try_once() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

        try:
            _poll(try_once, seconds, f"file lock for {id!r:.120} in {str(root)!r}")
        except BaseException:
            os.close(fd)
            raise

        def release() -> None:
            # Closing the descriptor drops the flock even if the unlock were to fail.
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

        return release

    return _per_id(take, timeout)


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
