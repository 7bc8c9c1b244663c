"""Directories the path-based backends make: the one they are given, never its parents.

A typo in a path (`chats/tpyo/db`) must be an error that names the missing directory,
not a new tree made silently.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["make_dir", "require_parent_dir"]


def _missing(path: Path, who: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"{who}: the directory {str(path.parent)!r} does not exist (create it first; "
        f"a store makes only the directory it is given, never missing parents)"
    )


def make_dir(path: Path, who: str) -> Path:
    """Create directory `path` if absent (its parent must exist); return it."""
    try:
        path.mkdir(exist_ok=True)
    except FileNotFoundError:
        raise _missing(path, who) from None
    return path


def require_parent_dir(path: Path, who: str) -> Path:
    """Return `path` if the directory that would hold it exists, else a FileNotFoundError."""
    if not (path.parent if path.parent != Path("") else Path(".")).is_dir():
        raise _missing(path, who)
    return path
