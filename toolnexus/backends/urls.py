"""The one table of backend URLs: what `open_backend` opens and the CLI's --store names.

Each row is a kind of URL: how it starts, how help spells it, whether what follows is a
file system path, and the bundle it opens (`{"store", "lock", "log", "close", "desc"}`).
A new database is one folder under backends/ and one row here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..core.secrets import redact_dsn
from .file.bundle import file_backend
from .memory.bundle import memory_backend
from .postgres.bundle import postgres_backend
from .redis.bundle import redis_backend
from .sqlite.bundle import sqlite_backend

__all__ = ["Scheme", "SCHEMES", "parse_url", "open_backend", "shapes"]


class Scheme(NamedTuple):
    """One kind of backend URL."""

    name: str  # the backend's folder: memory, file, sqlite, postgres, redis
    prefixes: tuple[str, ...]  # what such a URL starts with ("memory" is the whole URL)
    shape: str  # how help and errors spell it
    path: bool  # what follows the prefix is a file system path (else the URL is the DSN)
    open: Callable[[str], dict]  # the path, or the whole URL -> the bundle


SCHEMES: tuple[Scheme, ...] = (
    Scheme("memory", ("memory",), "memory", False, lambda _: memory_backend()),
    Scheme("file", ("file:",), "file:DIR", True, file_backend),
    Scheme("sqlite", ("sqlite:",), "sqlite:PATH", True, sqlite_backend),
    Scheme(
        "postgres", ("postgresql://", "postgres://"), "postgresql://...", False, postgres_backend
    ),  # fmt: skip
    Scheme("redis", ("redis://", "rediss://", "unix://"), "redis://...", False, redis_backend),
)


def shapes() -> str:
    """Return the URL shapes the table knows, for help and errors.

    >>> shapes()
    'memory, file:DIR, sqlite:PATH, postgresql://... or redis://...'
    """
    spelled = [s.shape for s in SCHEMES]
    return ", ".join(spelled[:-1]) + " or " + spelled[-1]


def _target(scheme: Scheme, url: str) -> str | None:
    """Return what a URL of `scheme` opens (a path, the URL, "" for memory), else None."""
    for prefix in scheme.prefixes:
        if scheme.name == "memory":
            return "" if url == prefix else None
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            return (rest or None) if scheme.path else url
    return None


def parse_url(url: str) -> tuple[Scheme, str]:
    """Return the row of a backend URL and what it opens: the path (file:, sqlite:), the
    whole URL (a DSN) or "" (memory). ValueError for any other URL (never its password).

    >>> scheme, target = parse_url("sqlite:chat.db"); scheme.name, target
    ('sqlite', 'chat.db')
    >>> parse_url("mysql://app:s3cret@db")
    Traceback (most recent call last):
    ...
    ValueError: a backend URL is memory, file:DIR, sqlite:PATH, postgresql://... or redis://..., got 'mysql://app:***@db'
    """  # noqa: E501
    if not isinstance(url, str):
        raise TypeError(f"a backend URL is a string, got {type(url).__name__}")
    for scheme in SCHEMES:
        target = _target(scheme, url)
        if target is not None:
            return scheme, target
    raise ValueError(f"a backend URL is {shapes()}, got {redact_dsn(url)!r}")


def open_backend(url: str) -> dict:
    """Return the bundle of a backend URL: {"store", "lock", "log", "close", "desc"}.

    memory, file:DIR, sqlite:PATH, postgresql://... or redis://... (the rows of SCHEMES);
    nothing connects until first use.

    >>> sorted(open_backend("sqlite:/tmp/doc-chat.db"))  # opens nothing yet
    ['close', 'desc', 'lock', 'log', 'store']
    >>> open_backend("memory")["desc"]
    'memory_backend()'
    """
    scheme, target = parse_url(url)
    return scheme.open(target)
