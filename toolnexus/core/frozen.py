"""Immutable JSON values that keep their order: `FrozenMap`, `freeze`, `thaw`.

Rule 1: pure; imports pyrsistent only.

A JSON object keeps the order its author wrote and the order a provider sent (design:
"order is data"). pyrsistent's `pmap` iterates in string-hash order, which changes with
`PYTHONHASHSEED`, so the same transcript would go out as other bytes in every process:
a structured-output schema's fields reordered, a provider's prompt cache missed.
`FrozenMap` is an immutable dict: insertion order is iteration order, `json` encodes it
in C as it is (nothing thawed first), and it has pmap's verbs (`set`, `remove`,
`discard`, `update`) returning new maps. Arrays stay pyrsistent `pvector`s (ordered).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from itertools import repeat
from operator import is_
from typing import Any, NoReturn

from pyrsistent import PMap, PSet, PVector, pset, pvector

__all__ = [
    "FrozenMap", "freeze", "thaw", "known_json", "known_jsons", "keep_json", "keep_jsons",
    "known_whole", "keep_whole",
]  # fmt: skip


def _immutable(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"'{type(self).__name__}' is immutable: use .set(), .remove(), .discard() or"
        " .update(), which return a new map"
    )


class FrozenMap(dict):
    """An immutable, hashable map that iterates in insertion order (a JSON object).

    >>> m = FrozenMap({"zeta": 1, "alpha": 2})
    >>> list(m.set("mid", 3)), list(m)
    (['zeta', 'alpha', 'mid'], ['zeta', 'alpha'])
    >>> m["beta"] = 4
    Traceback (most recent call last):
    ...
    TypeError: 'FrozenMap' is immutable: use .set(), .remove(), .discard() or .update(), \
which return a new map
    """

    # _hash, _json and _whole: what is derived from the value once (its hash, its JSON
    # text as a request carries it: see known_json; that no string in it holds a UTF-16
    # surrogate: see known_whole), kept since the value never changes.
    # (no mutate: the class is made before a mutant's code is swapped in, here and below)
    __slots__ = ("_hash", "_json", "_whole")  # pragma: no mutate

    __setitem__ = __delitem__ = _immutable  # pragma: no mutate
    clear = pop = popitem = setdefault = _immutable  # pragma: no mutate

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(frozenset(self.items()))
            return self._hash

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"

    def __reduce__(self) -> tuple:
        # pickle and copy would rebuild a dict subclass item by item, through __setitem__
        return (FrozenMap, (dict(self),))

    def __or__(self, other: Any) -> FrozenMap:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self.update(other)

    def __ror__(self, other: Any) -> FrozenMap:
        if not isinstance(other, Mapping):
            return NotImplemented
        return FrozenMap(other).update(self)

    __ior__ = __or__  # pragma: no mutate (`m |= x` rebinds m to a new map, like a tuple's +=)

    def copy(self) -> FrozenMap:  # type: ignore[override]
        """Return the map itself: an immutable value needs no copy."""
        return self

    def set(self, key: Any, value: Any) -> FrozenMap:
        """Return a new map with `key` set to `value` (a new key goes last)."""
        out = FrozenMap(self)
        dict.__setitem__(out, key, value)
        return out

    def remove(self, key: Any) -> FrozenMap:
        """Return a new map without `key` (KeyError when it is not there)."""
        if key not in self:
            raise KeyError(key)
        return self.discard(key)

    def discard(self, key: Any) -> FrozenMap:
        """Return a new map without `key` (the map itself when it is not there)."""
        if key not in self:
            return self
        out = FrozenMap(self)
        dict.__delitem__(out, key)
        return out

    def update(self, *maps: Mapping | Iterable, **fields: Any) -> FrozenMap:  # type: ignore[override]
        """Return a new map with the keys of `maps` and `fields` set, later ones winning."""
        out = FrozenMap(self)
        for m in maps:
            dict.update(out, m)
        if fields:
            dict.update(out, fields)
        return out


def known_json(m: FrozenMap) -> bytes | None:
    """Return the JSON text (UTF-8) kept with a map by `keep_json`, or None."""
    return getattr(m, "_json", None)


def known_jsons(maps: Iterable[Any]) -> list[bytes | None]:
    """Return `known_json` of each map (None for one with none kept), at C speed."""
    return list(map(getattr, maps, repeat("_json"), repeat(None)))


def keep_json(m: FrozenMap, text: bytes) -> bytes:
    """Keep `text`, the compact JSON of `m` (its keys in its order), with `m`; return it.

    A frozen value never changes, so its text stays right: a message encoded once, or
    read from a store's row, is not encoded again for the next request.
    """
    m._json = text
    return text


def keep_jsons(maps: Iterable[FrozenMap], texts: Iterable[bytes]) -> None:
    """`keep_json` of each map with its text, at C speed (no Python frame per map)."""
    deque(map(setattr, maps, repeat("_json"), texts), maxlen=0)


def known_whole(m: Any) -> bool:
    """Return whether `keep_whole` vouched for `m`: no string in it (keys, values, nested
    ones) holds a UTF-16 surrogate code point. False when nobody said (a walk will tell)."""
    return getattr(m, "_whole", False)


def keep_whole(m: Any) -> Any:
    """Vouch that no string in `m` holds a UTF-16 surrogate (known from the text it was
    decoded from: see wire.sse.surrogate_free), so no walk looks for one; return `m`."""
    if type(m) is FrozenMap:  # (anything else has nowhere to keep it: it is walked)
        m._whole = True
    return m


_PVECTOR = type(pvector())  # the C type of every pvector (PVector is its ABC)


def freeze(value: Any) -> Any:
    """Return `value` with every dict a FrozenMap and every list a pvector, in order.

    Frozen input comes back as the same object; a pyrsistent pmap becomes a FrozenMap
    (in the order it iterates: it kept no other); tuples stay tuples, sets become psets.

    >>> v = freeze([{"b": 1, "a": [2, {"c": 3}]}])
    >>> v
    pvector([FrozenMap({'b': 1, 'a': pvector([2, FrozenMap({'c': 3})])})])
    >>> freeze(v) is v
    True
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is FrozenMap:
        return _freeze_map(value)
    if kind is _PVECTOR:
        return _freeze_vector(value)
    if isinstance(value, dict | PMap):
        return FrozenMap({k: freeze(v) for k, v in value.items()})
    if kind is list:
        return pvector([freeze(v) for v in value])
    if kind is tuple:
        return tuple(freeze(v) for v in value)
    if kind is set or kind is frozenset:
        return pset(value)
    return value


# Values that are frozen as they are: a map or vector holding only these is returned at
# once, told at C speed (a turn's maps are mostly strings), with no walk and no copy.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _freeze_map(m: FrozenMap) -> FrozenMap:
    if _ATOMS.issuperset(map(type, m.values())):
        return m
    frozen = {k: freeze(v) for k, v in m.items()}
    return m if all(map(is_, frozen.values(), m.values())) else FrozenMap(frozen)


def _freeze_vector(v: PVector) -> PVector:
    if _ATOMS.issuperset(map(type, v)):
        return v
    frozen = [freeze(x) for x in v]
    return v if all(map(is_, frozen, v)) else pvector(frozen)


def thaw(value: Any) -> Any:
    """Return `value` as plain dicts and lists, in order (the inverse of `freeze`).

    >>> thaw(freeze({"b": [1], "a": {"c": 2}}))
    {'b': [1], 'a': {'c': 2}}
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, dict | PMap):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | PVector):
        return [thaw(v) for v in value]
    if kind is tuple:
        return tuple(thaw(v) for v in value)
    if isinstance(value, PSet):
        return set(value)
    return value
