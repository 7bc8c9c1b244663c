"""Optional dependencies: a missing one is an ImportError that names the extra to install."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["EXTRAS", "MissingExtraError", "needs_extra"]

# top-level module -> the toolnexus extra that installs it
EXTRAS = {
    "redis": "redis",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "cryptography": "crypto",
    "yaml": "skills",
    "matplotlib": "notebooks",
}


class MissingExtraError(ModuleNotFoundError):
    """An optional dependency is not installed; the message says which extra brings it."""


def missing_extra_message(module: str, feature: str) -> str | None:
    """Return the message for a missing `module`, or None if no extra provides it.

    >>> missing_extra_message("redis.client", "redis_store")
    "redis_store needs the 'redis' package: pip install 'toolnexus[redis]'"
    """
    root = module.split(".")[0]
    extra = EXTRAS.get(root)
    if extra is None:
        return None
    return f"{feature} needs the {root!r} package: pip install 'toolnexus[{extra}]'"


@contextmanager
def needs_extra(feature: str) -> Iterator[None]:
    """Turn a ModuleNotFoundError for an optional package inside the block into a clear one."""
    try:
        yield
    except ModuleNotFoundError as e:
        message = missing_extra_message(e.name or "", feature)
        if message is None or isinstance(e, MissingExtraError):
            raise
        raise MissingExtraError(message, name=e.name) from None
