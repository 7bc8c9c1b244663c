"""Rule 1: pure, imports nothing of ours. One walk over decoded values (maps, sequences,
strings) that rewrites their strings and gives back the very object where nothing changed,
and one that only reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from pyrsistent import PVector, pvector

from .frozen import FrozenMap

__all__ = ["map_strings", "strings"]


def map_strings(value: Any, fn: Callable[[str], str], keys: bool = False) -> Any:
    """Return `value` with `fn` applied to every string in it (map keys too when `keys`);
    the same object where nothing changed, maps and sequences rebuilt in their own kind.

    >>> map_strings({"a": ["x", 1]}, str.upper)
    {'a': ['X', 1]}
    >>> v = FrozenMap({"a": "x"}); map_strings(v, lambda s: s) is v
    True
    """
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        items = [(map_strings(k, fn, keys) if keys else k, map_strings(v, fn, keys))
                 for k, v in value.items()]  # fmt: skip
        if all(a is k and b is v for (a, b), (k, v) in zip(items, value.items(), strict=True)):
            return value
        if isinstance(value, FrozenMap):
            return FrozenMap(items)
        return MappingProxyType(dict(items)) if isinstance(value, MappingProxyType) else dict(items)
    if isinstance(value, (list, tuple, PVector)):
        seq = [map_strings(v, fn, keys) for v in value]
        if all(a is b for a, b in zip(seq, value, strict=True)):
            return value
        return pvector(seq) if isinstance(value, PVector) else type(value)(seq)
    return value


def strings(value: Any) -> Iterator[str]:
    """Yield every string of a decoded value (map keys too), depth first: the quick look
    `transport.Endpoint.clean` takes (exact types first: an ABC check per node costs more
    than the whole look).

    >>> sorted(strings({"a": pvector(["b", ("c", 1)])}))
    ['a', 'b', 'c']
    """
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is str:
            yield v
        elif kind is FrozenMap or kind is dict or isinstance(v, Mapping):
            for k, item in v.items():
                stack.append(k)
                stack.append(item)
        elif kind is list or kind is tuple or isinstance(v, PVector):  # (a pvector's type
            stack.extend(v)  # is pyrsistent's C class: PVector is only its ABC)
