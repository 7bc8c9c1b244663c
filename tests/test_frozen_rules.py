"""The rules of core/frozen.py no other test asserts: each refused mutation and its
message, the hash, pickling and copying, `|` both ways, `set`'s and `update`'s order,
`remove` and `discard`, the kept JSON text, and what `freeze` and `thaw` make of each
kind of value (the same object back when nothing changes)."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PSet, pmap, pset, pvector

from toolnexus.core.frozen import (
    FrozenMap,
    freeze,
    keep_json,
    keep_jsons,
    known_json,
    known_jsons,
    thaw,
)

M = FrozenMap({"zeta": 1, "alpha": 2})
REFUSED = (
    "'FrozenMap' is immutable: use .set(), .remove(), .discard() or .update(), which return"
    " a new map"
)


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.__setitem__("a", 1),
        lambda m: m.__delitem__("zeta"),
        lambda m: m.clear(),
        lambda m: m.pop("zeta"),
        lambda m: m.popitem(),
        lambda m: m.setdefault("a", 1),
    ],
)
def test_every_change_in_place_is_refused_with_what_to_use(change):
    m = FrozenMap(M)
    with pytest.raises(TypeError) as e:
        change(m)
    assert str(e.value) == REFUSED and m == M


def test_equal_maps_hash_alike_and_the_hash_is_kept():
    a, b = FrozenMap({"x": 1, "y": (2,)}), FrozenMap({"y": (2,), "x": 1})
    assert hash(a) == hash(b) == hash(frozenset({("x", 1), ("y", (2,))}))
    assert a._hash == hash(a)
    assert {a: 1}[b] == 1


def test_repr_pickle_and_copy_keep_the_map_and_its_order():
    assert repr(M) == "FrozenMap({'zeta': 1, 'alpha': 2})"
    for back in (pickle.loads(pickle.dumps(M)), copy.deepcopy(M), copy.copy(M)):
        assert type(back) is FrozenMap and list(back.items()) == [("zeta", 1), ("alpha", 2)]
    assert M.copy() is M and copy.copy(M) == M


def test_or_both_ways_and_in_place_make_new_maps():
    out = M | {"alpha": 3, "new": 4}
    assert type(out) is FrozenMap and list(out.items()) == [("zeta", 1), ("alpha", 3), ("new", 4)]
    left = {"alpha": 9, "b": 0} | M
    assert type(left) is FrozenMap and list(left.items()) == [("alpha", 2), ("b", 0), ("zeta", 1)]
    m = M
    m |= {"c": 5}
    assert m == {**M, "c": 5} and M == {"zeta": 1, "alpha": 2}
    with pytest.raises(TypeError):
        M | [("a", 1)]
    with pytest.raises(TypeError):
        [("a", 1)] | M
    assert M.__or__(5) is NotImplemented and M.__ror__(5) is NotImplemented


def test_set_keeps_a_key_s_place_and_puts_a_new_one_last():
    assert list(M.set("zeta", 0).items()) == [("zeta", 0), ("alpha", 2)]
    assert list(M.set("b", 3)) == ["zeta", "alpha", "b"]
    assert type(M.set("b", 3)) is FrozenMap and M == {"zeta": 1, "alpha": 2}


def test_remove_and_discard():
    assert M.remove("zeta") == {"alpha": 2} and type(M.remove("zeta")) is FrozenMap
    with pytest.raises(KeyError) as e:
        M.remove("nope")
    assert e.value.args == ("nope",)
    assert M.discard("nope") is M
    assert M.discard("alpha") == {"zeta": 1} and M == {"zeta": 1, "alpha": 2}


def test_update_takes_maps_pairs_and_fields_later_ones_winning():
    out = M.update({"alpha": 3}, [("b", 1), ("zeta", 5)], alpha=7, c=8)
    assert list(out.items()) == [("zeta", 5), ("alpha", 7), ("b", 1), ("c", 8)]
    assert type(out) is FrozenMap and M == {"zeta": 1, "alpha": 2}
    same = M.update()
    assert same == M and same is not M and type(same) is FrozenMap


def test_the_json_text_kept_with_a_map():
    a, b = FrozenMap({"a": 1}), FrozenMap({"b": 2})
    assert known_json(a) is None and known_jsons([a, b, {"c": 3}]) == [None, None, None]
    assert keep_json(a, b'{"a":1}') == b'{"a":1}'
    assert known_json(a) == b'{"a":1}' and known_jsons([b, a]) == [None, b'{"a":1}']


def test_keep_jsons_keeps_each_text_with_its_map_in_order():
    maps = [FrozenMap({"n": n}) for n in range(3)]
    texts = [b'{"n":0}', b'{"n":1}', b'{"n":2}']
    assert keep_jsons(iter(maps), iter(texts)) is None  # consumes both, keeps nothing else
    assert known_jsons(maps) == texts and all(map(known_json, maps))
    assert known_json(maps[1]) is texts[1]


@pytest.mark.parametrize("value", ["s", 1, 2.5, True, None, b"x", object()])
def test_freeze_leaves_scalars_and_other_objects_as_they_are(value):
    assert freeze(value) is value


def test_freeze_makes_every_dict_a_frozen_map_and_every_list_a_vector():
    out = freeze({"b": [1, {"c": [2]}], "a": (3, [4]), "s": {5}, "f": frozenset({6})})
    assert type(out) is FrozenMap and list(out) == ["b", "a", "s", "f"]
    assert out["b"] == pvector([1, FrozenMap({"c": pvector([2])})])
    assert type(out["b"][1]) is FrozenMap and type(out["b"][1]["c"]) is type(pvector())
    assert out["a"] == (3, pvector([4])) and type(out["a"]) is tuple
    assert out["s"] == pset({5}) and isinstance(out["s"], PSet)
    assert out["f"] == pset({6}) and isinstance(out["f"], PSet)


def test_freeze_reads_maps_of_any_dict_kind_and_pmaps():
    out = freeze(OrderedDict([("z", [1]), ("a", 2)]))
    assert type(out) is FrozenMap and list(out.items()) == [("z", pvector([1])), ("a", 2)]
    p = freeze(pmap({"k": [1]}))
    assert type(p) is FrozenMap and p == {"k": pvector([1])}


def test_freeze_gives_frozen_values_back_and_refreezes_what_is_not():
    whole = freeze({"a": [{"b": 1}], "c": "x"})
    assert freeze(whole) is whole and freeze(whole["a"]) is whole["a"]
    half = FrozenMap({"a": [1], "b": 2})
    out = freeze(half)
    assert out is not half and out == {"a": pvector([1]), "b": 2} and type(out) is FrozenMap
    vec = pvector([{"a": 1}, 2])
    out = freeze(vec)
    assert out is not vec and type(out[0]) is FrozenMap and out[1] == 2


def test_thaw_makes_plain_dicts_lists_tuples_and_sets():
    frozen = freeze({"b": [1, {"c": (2, [3])}], "s": {4}})
    out = thaw(frozen)
    assert out == {"b": [1, {"c": (2, [3])}], "s": {4}}
    assert type(out) is dict and type(out["b"]) is list and type(out["b"][1]) is dict
    assert type(out["b"][1]["c"]) is tuple and type(out["b"][1]["c"][1]) is list
    assert type(out["s"]) is set
    assert thaw(pmap({"a": pvector([1])})) == {"a": [1]}
    assert type(thaw(pmap({"a": 1}))) is dict
    assert thaw([pset([1])]) == [{1}]


@pytest.mark.parametrize("value", ["s", 1, 2.5, False, None, b"x", frozenset({1})])
def test_thaw_leaves_other_values_as_they_are(value):
    assert thaw(value) is value


# Any JSON value, with dicts and lists (plain) or already frozen at any depth: freeze must
# give the same structure back, frozen all through, and a frozen part back as itself.
_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_MIXED = st.recursive(
    _LEAF,
    lambda inner: (
        st.lists(inner, max_size=4).flatmap(lambda v: st.sampled_from([v, pvector(v)]))
        | st.dictionaries(st.text(max_size=5), inner, max_size=4).flatmap(
            lambda d: st.sampled_from([d, FrozenMap(d)])
        )
    ),
    max_leaves=20,
)


def _frozen_through(value) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenMap and all(map(_frozen_through, value.values()))
    if isinstance(value, list):
        return False
    if type(value) is type(pvector()):
        return all(map(_frozen_through, value))
    return True


@given(_MIXED)
def test_freeze_makes_any_mix_frozen_all_through_and_keeps_what_already_was(value):
    out = freeze(value)
    assert thaw(out) == thaw(value) and _frozen_through(out)
    assert freeze(out) is out  # frozen: the same object, whatever its depth
    if _frozen_through(value):
        assert out is value


def test_a_frozen_map_of_text_subclasses_comes_back_as_itself():
    class Name(str):
        pass

    m = FrozenMap({"role": Name("user"), "n": True})
    assert freeze(m) is m and freeze(pvector([Name("a"), 1])) == pvector(["a", 1])
