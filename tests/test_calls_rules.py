"""The rules of core/calls.py no other test asserts: the 4 MiB bound to the byte, bytes
decoded as UTF-8 with bad bytes replaced, a mapping's depth bound (the same as for text,
through maps, lists and tuples, whatever scalars sit beside), nested values kept as given."""

from __future__ import annotations

import json

import pytest
from pyrsistent import PVector, pvector

from toolnexus.core.calls import ARGUMENT_BYTES, parse_arguments
from toolnexus.core.frozen import FrozenMap


def test_arguments_of_exactly_4_mib_are_read_and_one_byte_more_refused():
    assert ARGUMENT_BYTES == 4 * 1024 * 1024
    frame = '{"a":""}'
    exact = '{"a":"' + "x" * (ARGUMENT_BYTES - len(frame)) + '"}'
    args, why = parse_arguments(exact)
    assert why is None and len(args["a"]) == ARGUMENT_BYTES - len(frame)
    args, why = parse_arguments(exact[:-2] + 'x"}')
    assert args is None and why.startswith("arguments are not valid JSON (")


def test_bytes_are_read_as_utf8_with_bad_bytes_replaced():
    assert parse_arguments(b'{"a": "\xc3\xa9"}') == (FrozenMap({"a": "é"}), None)
    assert parse_arguments(bytearray(b'{"a": 1}')) == (FrozenMap({"a": 1}), None)
    assert parse_arguments(b'{"a": "\xff"}') == (FrozenMap({"a": "\ufffd"}), None)
    assert parse_arguments(b"  ") == (FrozenMap(), None)


def nest(levels: int, wrap) -> dict:
    """A mapping `levels` deep: the root, then `wrap` around a scalar."""
    v = 1
    for _ in range(levels - 1):
        v = wrap(v)
    return {"deep": v, "flat": 2}


@pytest.mark.parametrize("wrap", [lambda v: {"a": v}, lambda v: [v], lambda v: (v,)],
                         ids=["map", "list", "tuple"])  # fmt: skip
def test_a_mapping_given_as_is_has_the_depth_bound_of_text(wrap):
    for levels, ok in ((100, True), (101, False)):
        given = nest(levels, wrap)
        args, why = parse_arguments(given)
        assert (why is None) == ok, levels
        if not ok:
            assert why == "arguments nested deeper than 100 levels"
        text = parse_arguments(json.dumps(given))[1]
        assert (text is None) == ok  # the same bound as the decoder's


def test_a_scalar_beside_the_deep_value_does_not_end_the_check():
    deep = nest(101, lambda v: [v])["deep"]
    for given in ({"deep": deep, "s": 1}, {"s": 1, "deep": deep}, {"deep": [1, deep]}):
        assert parse_arguments(given)[1] == "arguments nested deeper than 100 levels"


def test_nested_values_are_frozen_and_pyrsistent_ones_kept_as_given():
    inner = FrozenMap({"b": 1})
    args, _ = parse_arguments({"a": inner, "l": [1, {"c": 2}]})
    assert args["a"] is inner
    assert args["l"] == pvector([1, FrozenMap({"c": 2})]) and isinstance(args["l"], PVector)
