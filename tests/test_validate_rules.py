"""The rules of core/validate.py no other test asserts, as a table of schema, value and the
exact message (None: it fits): each JSON type's edges (true is no integer, 2.0 is one),
each keyword alone, arrays and maps of other kinds than list and dict, the messages'
previews and bounds, JSON equality, and what is_trivial calls trivial."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from pyrsistent import pvector

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.validate import check, compile_schema, describe, is_trivial


class Items(list):
    """A list of another class: still a JSON array."""


class Odd:
    def __eq__(self, other):
        raise RuntimeError("cannot compare")

    __hash__ = object.__hash__


OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}}

CASES = [
    ({"type": "integer"}, True, "arguments: expected integer, got boolean true"),
    ({"type": "integer"}, 2.0, None),
    ({"type": "integer"}, 2.5, "arguments: expected integer, got number 2.5"),
    ({"type": "number"}, True, "arguments: expected number, got boolean true"),
    ({"type": "number"}, 2, None),
    ({"type": "boolean"}, 1, "arguments: expected boolean, got integer 1"),
    ({"type": "null"}, 0, "arguments: expected null, got integer 0"),
    ({"type": "null"}, None, None),
    ({"type": "string"}, b"x", "arguments: expected string, got bytes"),
    ({"type": "object"}, MappingProxyType({}), None),
    ({"type": "object"}, [], "arguments: expected object, got array"),
    ({"type": "array"}, (1,), None),
    ({"type": "array"}, pvector([1]), None),
    ({"type": "array"}, Items([1]), None),
    ({"type": "array"}, {}, "arguments: expected array, got object"),
    ({"type": "foo"}, 1, None),  # a type this check does not know: not refused
    ({"type": ["string", "null"]}, 1, "arguments: expected string or null, got integer 1"),
    ({"type": ["string", "null"]}, None, None),
    ({"type": []}, 1, None),
    ({"const": "a"}, "b", 'arguments: must be "a"'),
    ({"const": None}, 1, "arguments: must be null"),
    ({"const": "x" * 100}, "y", 'arguments: must be "' + "x" * 79),
    ({"const": 1}, True, "arguments: must be 1"),  # JSON: true is not 1
    ({"const": 1.0}, 1, None),  # and 1 is 1.0
    ({"enum": [True]}, 1, "arguments: must be one of [true], got integer 1"),
    ({"enum": [True]}, True, None),
    ({"enum": [False]}, True, "arguments: must be one of [false], got boolean true"),
    ({"const": False}, False, None),
    ({"properties": {"a": {}, "b": {}}, "additionalProperties": False}, {"c": 1},
     "c: unexpected argument (known: a, b)"),
    ({"enum": ["é"]}, "e", 'arguments: must be one of ["é"], got string "e"'),
    ({"anyOf": []}, 1, None),
    ({"oneOf": [{"type": "string"}, {"type": "null"}]}, 1,
     "arguments: expected string, got integer 1"),
    ({"oneOf": [{"type": "string"}, {"type": "null"}]}, None, None),
    ({"required": ["a"]}, {}, "missing required argument a"),
    ({"additionalProperties": False}, {"b": 1},
     "b: unexpected argument (known: none)"),
    ({"additionalProperties": {"type": "string"}}, {"b": 1},
     "b: expected string, got integer 1"),
    ({**OBJ, "additionalProperties": {"type": "string"}}, {"a": 1, "b": "x"}, None),
    ({**OBJ, "additionalProperties": False}, {"a": 1, "b": 2},
     "b: unexpected argument (known: a)"),
    ({**OBJ, "additionalProperties": False}, {"a": 1, 5: 2},
     "5: unexpected argument (known: a)"),
    (OBJ, {"z": 1, "a": "bad"}, 'a: expected integer, got string "bad"'),  # after an extra
    (OBJ, MappingProxyType({"a": "bad"}), 'a: expected integer, got string "bad"'),
    (OBJ, FrozenMap({"a": "bad"}), 'a: expected integer, got string "bad"'),
    ({"type": "array", "items": {"type": "integer"}}, Items([1, "x"]),
     '[1]: expected integer, got string "x"'),
    ({"type": "string", "nullable": True}, None, None),
    ({"type": "string", "nullable": True}, 1, "arguments: expected string, got integer 1"),
]  # fmt: skip


@pytest.mark.parametrize("schema, value, message", CASES)
def test_each_rule_and_its_message(schema, value, message):
    assert check(schema, value) == message
    assert compile_schema(schema)(value, "") == message


def test_a_value_that_cannot_compare_is_not_equal():
    assert check({"enum": [Odd()]}, 1).startswith("arguments: must be one of ")
    assert check({"const": 1}, Odd()) == "arguments: must be 1"


def test_skipped_keys_are_never_checked_wherever_they_sit():
    schema = {**OBJ, "additionalProperties": False}
    skip = frozenset({"_resume"})
    assert check(schema, {"_resume": 1, "a": 1}, skip=skip) is None
    assert check(schema, {"_resume": 1, "b": 1}, skip=skip) == "b: unexpected argument (known: a)"
    typed = {
        "type": "object",
        "properties": {"_resume": {"type": "string"}, "a": {"type": "integer"}},
    }
    assert check(typed, {"_resume": 1, "a": "x"}, skip=skip) == (
        'a: expected integer, got string "x"'
    )


def test_an_enum_is_shown_in_at_most_200_characters_and_any_value_can_be_shown():
    from datetime import date

    long = {"enum": ["v" * 30 for _ in range(10)]}
    shown = (
        check(long, 1).removeprefix("arguments: must be one of ").removesuffix(", got integer 1")
    )
    assert len(shown) == 200
    assert check({"enum": [date(2026, 1, 2)]}, 1) == (
        'arguments: must be one of ["2026-01-02"], got integer 1'
    )
    assert check({"const": date(2026, 1, 2)}, 1) == 'arguments: must be "2026-01-02"'


def test_describe_previews_scalars_in_40_characters():
    assert describe(True) == "boolean true" and describe(2.5) == "number 2.5"
    assert describe("é") == 'string "é"'
    assert describe("x" * 38) == 'string "' + "x" * 38 + '"'  # 40 with its quotes
    assert describe("x" * 39) == 'string "' + "x" * 36 + "..."
    assert describe(object()) == "object" and describe(b"") == "bytes"
    assert describe({}) == "object" and describe(()) == "array"


@pytest.mark.parametrize(
    "schema, trivial",
    [
        ({}, True),
        ("not a schema", True),
        ({"type": "object"}, True),
        ({"type": "object", "properties": {}}, True),
        ({"type": "string"}, False),
        ({"properties": {"a": {}}}, False),
        ({"required": ["a"]}, False),
        ({"enum": [1]}, False),
        ({"const": 1}, False),
        ({"additionalProperties": False}, False),
        ({"type": "object", "properties": {}, "additionalProperties": False}, False),
        ({"additionalProperties": {"type": "string"}}, False),
        ({"additionalProperties": True}, True),
        ({"additionalProperties": {}}, True),
        ({"const": None}, False),
        ({"anyOf": [{}]}, False),
        ({"oneOf": [{}]}, False),
    ],
)
def test_what_is_trivial(schema, trivial):
    assert is_trivial(schema) is trivial


def test_a_closed_tool_without_properties_refuses_any_argument():
    """Failed before: is_trivial read `additionalProperties: false` as nothing to check,
    so a tool taking no arguments ran with whatever the model sent (one with properties
    refused the same unexpected argument)."""
    from toolnexus.core.tool import tool

    closed = {"type": "object", "properties": {}, "additionalProperties": False}
    t = tool("noargs", "No arguments.", closed, lambda a: "ran")
    result = t["execute"]({"x": 1})
    assert result["is_error"] and "x: unexpected argument (known: none)" in result["output"]
    assert t["execute"]({})["output"] == "ran"
