"""The rules of core/walk.py no other test asserts: keys rewritten only when asked (inside
sequences too), each kind of map and sequence rebuilt as its own kind, the very object
given back where nothing changed."""

from __future__ import annotations

from types import MappingProxyType

from pyrsistent import PVector, pvector

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.walk import map_strings

up = str.upper


def test_keys_are_rewritten_only_when_asked_at_every_depth():
    value = {"k": [{"n": "v"}], "t": ({"m": "w"},)}
    assert map_strings(value, up) == {"k": [{"n": "V"}], "t": ({"m": "W"},)}
    assert map_strings(value, up, keys=True) == {"K": [{"N": "V"}], "T": ({"M": "W"},)}
    assert map_strings(pvector([FrozenMap({"a": "b"})]), up, True) == pvector(
        [FrozenMap({"A": "B"})]
    )


def test_each_kind_is_rebuilt_as_itself():
    got = map_strings(FrozenMap({"a": "x"}), up)
    assert isinstance(got, FrozenMap) and got == FrozenMap({"a": "X"})
    got = map_strings(MappingProxyType({"a": "x"}), up)
    assert isinstance(got, MappingProxyType) and dict(got) == {"a": "X"}
    got = map_strings({"a": "x"}, up)
    assert type(got) is dict and got == {"a": "X"}
    got = map_strings(pvector(["x", 1]), up)
    assert isinstance(got, PVector) and got == pvector(["X", 1])
    assert map_strings(("x", 1), up) == ("X", 1) and map_strings(["x"], up) == ["X"]
    assert map_strings(7, up) == 7 and map_strings(None, up) is None


def test_nothing_changed_gives_the_very_object_back():
    same = lambda s: s  # noqa: E731
    for value in ({"a": ["x"]}, FrozenMap({"a": "x"}), ["x", {"b": "y"}], ("x",), pvector(["x"]),
                  MappingProxyType({"a": "x"})):  # fmt: skip
        assert map_strings(value, same, keys=True) is value
    x_only = lambda s: "X" if s == "x" else s  # noqa: E731
    key_only = {"x": "b"}
    assert map_strings(key_only, x_only) is key_only  # "b" unchanged, the key not visited
    assert map_strings(key_only, x_only, keys=True) == {"X": "b"}
