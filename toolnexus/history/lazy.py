"""A message log built on its first use (a log whose setup needs its database up)."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["lazy_log"]


def lazy_log(make: Callable[[], dict], desc: str) -> dict:
    """Return a log built on first use (and again after a failed build): postgres_log
    creates its table when built, which needs the database up."""
    built: list[dict] = []
    guard = threading.Lock()

    def log() -> dict:
        with guard:
            if not built:
                built.append(make())
            return built[0]

    def delegate(name: str) -> Callable:
        return lambda *a, **k: log()[name](*a, **k)

    def close() -> None:
        with guard:
            made = built.pop() if built else None
        if made is not None and callable(made.get("close")):
            made["close"]()

    out = {n: delegate(n) for n in ("record", "record_many", "query", "clear")}
    out.update(ready=log, close=close, desc=desc)
    return out
