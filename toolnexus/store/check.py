"""What a store is, checked once where one is handed over, with an error that teaches.

The usual mix-ups: a path where a store goes (`store="chat.db"`), a curried decorator
not yet given its store (`store=capped_store(40)`), a class instance with get/save
methods, or a dict with a missing or non-callable "get"/"save".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["check_store", "store_problem"]

WHAT = (
    'a store is a mapping {"get": fn(id) -> transcript | None, "save": fn(id, transcript)}, '
    'e.g. capped_store(40, sqlite_store("chat.db")) from toolnexus.store'
)


def _curry_name(x: Any) -> str | None:
    """Return the function name of a toolz curry (a decorator not yet applied), else None."""
    from toolz import curry  # toolz is a runtime dependency; kept local to stay cheap

    return getattr(x, "__name__", "decorator") if isinstance(x, curry) else None


def store_problem(x: Any) -> str | None:
    """Return why `x` is not a store (one sentence), or None when it is one.

    >>> store_problem({"get": lambda i: None, "save": lambda i, t: None}) is None
    True
    >>> store_problem("chat.db")
    "got the path 'chat.db': wrap it in a store, e.g. sqlite_store('chat.db')"
    """
    if isinstance(x, Mapping):
        bad = [k for k in ("get", "save") if not callable(x.get(k))]
        if not bad:
            return None
        keys = " and ".join(repr(k) for k in bad)
        return f"got a mapping whose {keys} is missing or not callable"
    if isinstance(x, str | os.PathLike):
        path = os.fspath(x)
        sqlite = path.endswith((".db", ".sqlite", ".sqlite3"))
        maker = "sqlite_store" if sqlite else "file_store"
        return f"got the path {path!r}: wrap it in a store, e.g. {maker}({path!r})"
    name = _curry_name(x)
    if name is not None:
        return (
            f"got {name}(...) still waiting for its store (a decorator not yet applied): "
            f"pass the store too, e.g. {name}(40, sqlite_store('chat.db')) "
            "or toolz.pipe(sqlite_store('chat.db'), capped_store(40))"
        )
    if callable(getattr(x, "get", None)) and callable(getattr(x, "save", None)):
        return (
            f"got a {type(x).__name__} object with get/save methods: "
            'pass {"get": obj.get, "save": obj.save} instead'
        )
    return f"got {type(x).__name__}"


def check_store(x: Any, who: str = "store") -> Any:
    """Return `x` if it is a store, else raise a TypeError saying what a store is and how to build one.

    >>> check_store(42, who="create_client(store=)")
    Traceback (most recent call last):
    ...
    TypeError: create_client(store=): got int; a store is a mapping {"get": fn(id) -> transcript | None, "save": fn(id, transcript)}, e.g. capped_store(40, sqlite_store("chat.db")) from toolnexus.store
    """  # noqa: E501
    problem = store_problem(x)
    if problem is not None:
        raise TypeError(f"{who}: {problem}; {WHAT}")
    return x
