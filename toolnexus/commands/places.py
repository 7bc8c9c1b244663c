"""Where the commands keep things: the store a --store spec names, its message log and its lock.

No command creates a directory the user did not ask for: an explicit path whose parent
does not exist is a CommandError. Only the documented defaults under the user's data
directory are created on first use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple

from ..backends.urls import SCHEMES, parse_url, shapes
from ..core.secrets import redact_dsn

__all__ = [
    "CommandError",
    "Place",
    "closing_places",
    "default_store_spec",
    "lock_for",
    "log_for",
    "open_store",
    "parse_store_spec",
    "place_log",
    "require_parent",
    "show_command",
]

STORE_HELP = f"{shapes()} (default: a file store under the user data dir)"


class CommandError(Exception):
    """A mistake the user can fix (a bad --store, an unknown id): printed as one line."""


class Place(NamedTuple):
    """A parsed --store spec: kind (a row of the backend URL table: memory, file, sqlite,
    postgres, redis), path (file and sqlite; else None), is_default, url (as given)."""

    kind: str
    path: Path | None
    is_default: bool
    url: str


def data_dir() -> Path:
    """Return toolnexus's directory under the user's data directory (XDG_DATA_HOME)."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "toolnexus"


def default_store_spec() -> str:
    """Return the default --store: a file store under the user's data directory."""
    return f"file:{data_dir() / 'chat'}"


def parse_store_spec(spec: str | None) -> Place:
    """Return the Place a --store spec names (CommandError for anything else).

    >>> parse_store_spec("sqlite:chat.db")
    Place(kind='sqlite', path=PosixPath('chat.db'), is_default=False, url='sqlite:chat.db')
    """
    url = spec or default_store_spec()
    try:
        scheme, target = parse_url(url)
    except ValueError:
        raise CommandError(f"unknown --store {redact_dsn(url)!r}: use {shapes()}") from None
    path = Path(target).expanduser() if scheme.path else None
    return Place(scheme.name, path, spec is None, url)


# The bundles a command opened, per place: None outside `closing_places`.
_OPENED: ContextVar[dict | None] = ContextVar("toolnexus_opened_places", default=None)


@contextmanager
def closing_places() -> Iterator[None]:
    """Within it, a place is opened once (its store and its log share one bundle: one
    PostgreSQL pool, not two) and every bundle opened is closed when it ends, however
    the command ends (a pool left to the collector warns and keeps its threads)."""
    opened: dict = {}
    token = _OPENED.set(opened)
    try:
        yield
    finally:
        _OPENED.reset(token)
        for bundle in reversed(opened.values()):
            close = bundle.get("close")
            if close is not None:
                close()


def _bundle(place: Place) -> dict:
    """Return the backend bundle a Place names (its path expanded): the one opened
    already within `closing_places`, else a new one (closed when that ends)."""
    opened = _OPENED.get()
    key = (place.kind, str(place.path) if place.path is not None else place.url)
    if opened is not None and key in opened:
        return opened[key]
    scheme = next(s for s in SCHEMES if s.name == place.kind)
    bundle = scheme.open(key[1])
    if opened is not None:
        opened[key] = bundle
    return bundle


def require_parent(path: Path, flag: str) -> Path:
    """Return `path` if its parent directory exists, else raise a CommandError naming `flag`."""
    parent = path.parent
    if not parent.is_dir():
        raise CommandError(
            f"{flag} {str(path)!r}: the directory {str(parent)!r} does not exist "
            "(create it first; commands never create directories you did not name)"
        )
    return path


def nothing_stored(place: Place) -> dict:
    """Return the empty store a reader sees where nothing was ever stored (nothing made)."""
    where = f"{redact_dsn(place.url)} (it does not exist)"
    return {"get": lambda id: None, "ids": lambda: iter(()), "desc": where}


def _ready(place: Place) -> None:
    """Make a writer's place ready: the default's directories, else check the parent."""
    if place.path is None:
        return
    if place.is_default:  # the documented default is made on first use
        place.path.parent.mkdir(parents=True, exist_ok=True)
    else:
        require_parent(place.path, "--store")


def open_store(spec: str | None, *, read_only: bool = False) -> dict:
    """Return the store a --store spec names (see `backends.urls`).

    A read-only command (`read_only=True`) creates nothing: a file or SQLite place that
    does not exist reads as an empty store.
    """
    place = parse_store_spec(spec)
    if read_only and place.path is not None and not place.path.exists():
        return nothing_stored(place)
    if not read_only:
        _ready(place)
    return _bundle(place)["store"]


def show_command(conversation: str, spec: str | None) -> str:
    """Return the shell command that shows a stored conversation.

    >>> show_command("demo", None)
    'python -m toolnexus show demo'
    >>> show_command("my id", "file:/tmp/x y")
    "python -m toolnexus show 'my id' --store 'file:/tmp/x y'"
    """
    import shlex

    where = "" if spec is None else f" --store {shlex.quote(redact_dsn(spec))}"
    return f"python -m toolnexus show {shlex.quote(conversation)}{where}"


def log_path_for(place: Place) -> Path | None:
    """Return where the message log of a store lives by default (None: keep it in memory).

    The default store's log is `history`'s default file, so `history search` finds it;
    a file store's log is `history.db` inside its directory; a SQLite store's, beside it.
    A store at a URL (memory, a database server) has none: see `place_log`.
    """
    if place.path is None:
        return None
    if place.is_default:
        from .history import default_db

        return default_db()
    assert place.path is not None
    return place.path / "history.db" if place.kind == "file" else place.path.parent / "history.db"


def log_for(option: str | None, spec: str | None) -> dict | None:
    """Return the message log a chat writes: --log PATH, --log none, or the store's default."""
    if option == "none":
        return None
    from toolnexus.history import in_memory_log, sqlite_log

    if option is not None:
        return sqlite_log(require_parent(Path(option).expanduser(), "--log"))
    place = parse_store_spec(spec)
    path = log_path_for(place)
    if path is None:
        return place_log(place) or in_memory_log()
    path.parent.mkdir(parents=True, exist_ok=True)  # exists unless it is the default place
    return sqlite_log(path)


def place_log(place: Place) -> dict | None:
    """Return the message log a database server's bundle keeps (PostgreSQL's), else None."""
    if place.path is not None or place.kind == "memory":
        return None
    return _bundle(place)["log"]


def lock_for(option: str | None, spec: str | None, store: Mapping) -> Callable | None:
    """Return the conversation lock a chat takes (None: the client's default).

    auto (the default): the store's own lock if it pairs one, else a file lock beside a
    file or SQLite store (so two chats on one id queue), else an in-process lock.
    local: in-process only. file:DIR: a file lock under DIR.
    """
    from toolnexus.store import file_lock, local_lock

    option = option or "auto"
    if option == "local":
        return local_lock()
    if option.startswith("file:") and option[5:]:
        return file_lock(require_parent(Path(option[5:]).expanduser(), "--lock file:"))
    if option != "auto":
        raise CommandError(f"unknown --lock {option!r}: use auto, local or file:DIR")
    if callable(store.get("lock")):
        return None  # the client takes the store's own lock by default
    place = parse_store_spec(spec)
    if place.kind == "file":
        return file_lock(place.path / ".locks")  # type: ignore[operator]
    if place.kind == "sqlite":
        assert place.path is not None
        return file_lock(place.path.parent / f".{place.path.name}.locks")
    return None


def describe(x: Any) -> str:
    """Return a store's or log's readable name."""
    return (x.get("desc") if isinstance(x, Mapping) else None) or "the store"
