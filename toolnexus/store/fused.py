"""Fused calls: a store's faster way to do several of its operations at once, as data.

A store map (or a message log) may carry `"fused": {name: Fused(call, needs)}`: `call`
does what the map's operations named in `needs` would do one after another, in fewer
round trips (take the lock and read in one script; save and release on the lock's own
connection). It stands for those operations exactly as the map holds them, so whoever
replaces one of them (a decorator) drops every fused call that needs it: `derive` does
that, and it is how every decorator builds its map.

The names the library looks for, and what each needs:

    "view"                 fn(transcript) -> what "get" returns right after "save" of it
                           (read_through fills its cache with it)            get, save
    "fork"                 fn(src, dst, at, check) -> count: a copy on the server
                           (see store.forks)                                  get, save
    "lock_load"            fn(id) -> (held, transcript | None)                get, lock
    "save_release"         fn(held, id, transcript) -> a failed release's error | None:
                           save, then release `held` (lock_load's)            save, lock
    "save_logged"          fn(id, transcript, rows, entries) -> whether the log rows went
                           in the save's statement                            save
    "save_logged_release"  fn(held, id, transcript, rows, entries) -> (logged, error)
                                                                              save, lock
A message log may declare "rows": fn(entries) -> fn(relation) -> (sql, params), its rows
as part of another statement in its database (needs record, record_many). A call that
joins two maps ("save_logged" and a log's "rows") names the database it works in as
`where`; the two meet only when their `where` values are equal.

A fused call is bound to the operations it stands for when a map is built (`derive`
records them in its record), and applies only while the map still holds those very
operations: a map copied by hand with one of them replaced (`{**store, "save": f}`)
loses the fused calls that need it, so no hand-made decorator is ever bypassed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, NamedTuple

__all__ = ["Fused", "fuse", "view", "derive", "declared", "fused_call", "stored_view"]


class Fused(NamedTuple):
    """One fused call: what it does, the map's operations it stands for, and (for one that
    joins two maps) the database it works in."""

    call: Callable
    needs: frozenset[str]
    where: Hashable = None
    # The operations it stands for, as the map held them when it was built (see `derive`).
    over: tuple = ()


def fuse(call: Callable, *needs: str, where: Hashable = None) -> Fused:
    """Return the Fused record of `call`, standing for the operations `needs`.

    >>> fuse(print, "get", "lock").needs == frozenset({"get", "lock"})
    True
    """
    return Fused(call, frozenset(needs), where)


def view(fn: Callable[[Any], Any]) -> Fused:
    """Return a "view" declaration: `fn(transcript)` is what get returns after save of it."""
    return Fused(fn, frozenset(("get", "save")))


def derive(m: Mapping, *, fused: Mapping[str, Fused | None] | None = None, **ops: Any) -> dict:
    """Return a new map: `m` with `ops` replaced, without every fused call of `m` that needs
    one of them; `fused` then declares fused calls of the new map (None drops one).
    Does not modify `m`.

    >>> base = {"get": 1, "save": 2, "lock": 3,
    ...         "fused": {"lock_load": Fused(4, frozenset({"get", "lock"})),
    ...                   "save_release": Fused(5, frozenset({"save", "lock"}))}}
    >>> sorted(derive(base, get=10)["fused"]), sorted(derive(base, desc="d")["fused"])
    (['save_release'], ['lock_load', 'save_release'])
    >>> "fused" in derive(base, save=20, get=10)
    False
    """
    replaced = ops.keys()
    kept = {name: f for name, f in (m.get("fused") or {}).items() if not f.needs & replaced}
    kept.update(fused or {})
    out = {k: v for k, v in m.items() if k != "fused"}
    out.update(ops)
    calls = {name: _bound(f, out) for name, f in kept.items() if f is not None}
    if calls:
        out["fused"] = calls
    return out


def _bound(f: Fused, m: Mapping) -> Fused:
    """Return `f` bound to the operations `m` holds for what it needs."""
    return f._replace(over=tuple((n, m.get(n)) for n in sorted(f.needs)))


def _holds(m: Mapping, f: Fused) -> bool:
    """Whether `m` still holds the operations `f` was bound to (built by `derive`)."""
    return len(f.over) == len(f.needs) and all(m.get(n) is op for n, op in f.over)


def declared(m: Mapping, name: str) -> Fused | None:
    """Return the Fused record `m` declares under `name`, or None (also when `m` no longer
    holds the operations it was bound to: a copy made by hand that replaced one).

    >>> store = derive({"get": 1, "lock": 2}, fused={"lock_load": fuse(3, "get", "lock")})
    >>> declared(store, "lock_load").call, declared({**store, "get": 4}, "lock_load")
    (3, None)
    """
    found = (m.get("fused") or {}).get(name)
    return found if isinstance(found, Fused) and _holds(m, found) else None


def fused_call(m: Mapping, name: str) -> Callable | None:
    """Return the call of the fused call `m` declares under `name`, or None."""
    found = declared(m, name)
    return found.call if found is not None else None


def stored_view(store: Mapping) -> Callable[[Any], Any] | None:
    """Return fn(transcript) -> what `store["get"]` returns right after `store["save"]` of it.

    Only when the store declares it (its "view" fused call, which a decorator that replaces
    "get" or "save" drops unless it declares its own); else None, and only reading back
    tells. `read_through` uses it to fill its cache.

    >>> from toolnexus.store import capped_store, in_memory_store
    >>> see = stored_view(capped_store(1, in_memory_store()))
    >>> [m["content"] for m in see([{"role": "user", "content": c} for c in "ab"])]
    ['b']
    """
    return fused_call(store, "view")
