"""Tool arguments are checked against input_schema before a tool runs (core.validate)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import define_tool, tool
from toolnexus.core.frozen import freeze
from toolnexus.core.validate import check, compile_schema

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),  # fmt: skip
    max_leaves=12,
)
TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
    "number": lambda v: type(v) in (int, float),
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


@given(st.sampled_from(sorted(TYPES)), values)
def test_a_type_accepts_exactly_its_json_values(kind, value):
    error = check({"type": "object", "properties": {"v": {"type": kind}}}, {"v": value})
    assert (error is None) == TYPES[kind](value), error
    if error:
        assert error.startswith(f"v: expected {kind}, got ")


@given(st.sampled_from(sorted(TYPES)), values)
def test_frozen_arguments_check_like_plain_ones(kind, value):
    schema = {"type": "object", "properties": {"v": {"type": kind, "items": {}}}}
    assert check(schema, freeze({"v": value})) == check(schema, {"v": value})


@given(values, values)
def test_check_never_raises_on_any_schema_shape(schema, value):
    check(schema, value)  # a junk schema checks nothing it cannot read; it never raises


def test_required_enum_nested_and_extra_fields_are_named():
    schema = {
        "type": "object",
        "required": ["city"],
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["c", "f"]},
            "stops": {"type": "array", "items": {"type": "object", "required": ["at"],
                                                 "properties": {"at": {"type": "integer"}}}},
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
    }  # fmt: skip
    c = compile_schema(schema, frozenset({"_resume"}))
    assert (
        c({"city": "P", "unit": "c", "stops": [{"at": 1}], "when": None, "_resume": 1}, "") is None
    )
    assert c({}, "") == "missing required argument city"
    assert c({"city": "P", "unit": "k"}, "").startswith('unit: must be one of ["c", "f"]')
    assert c({"city": "P", "stops": [{"at": 1}, {"at": "2"}]}, "") == (
        'stops[1].at: expected integer, got string "2"'
    )
    assert c({"city": "P", "stops": [{}]}, "") == "missing required argument stops[0].at"
    assert c({"city": "P", "when": 3}, "") == "when: expected string, got integer 3"
    assert c({"city": "P", "zip": 1}, "").startswith("zip: unexpected argument")


def test_a_tool_does_not_run_on_arguments_that_do_not_fit():
    ran = []

    @define_tool
    def add(a: int, b: int = 0) -> str:
        """Add."""
        ran.append((a, b))
        return str(a + b)

    bad = add["execute"](freeze({"a": "1"}))
    assert (
        bad["is_error"]
        and "Invalid arguments for tool 'add': a: expected integer" in (bad["output"])
    )
    assert add["execute"](freeze({"a": 1, "b": 2}))["output"] == "3" and ran == [(1, 2)]


def test_an_async_tool_stays_async_and_is_checked():
    async def fn(args):
        return "ran"

    t = tool("t", "d", {"type": "object", "properties": {"n": {"type": "number"}}}, fn)
    assert asyncio.iscoroutinefunction(t["execute"])
    assert asyncio.run(t["execute"]({"n": "x"}))["is_error"]
    assert asyncio.run(t["execute"]({"n": 1.5}))["output"] == "ran"


def test_a_trivial_schema_adds_no_wrapper():
    def fn(args):
        return "ok"

    t = tool("t", "d", None, fn)
    assert t["execute"].__wrapped__ is fn and not hasattr(t["execute"], "__schema__")


@pytest.mark.parametrize("exc", [ValueError("bad"), KeyError("k"), RuntimeError("")])
def test_a_raising_tool_keeps_its_traceback(exc):
    def fn(args):
        raise exc

    r = tool("t", "d", None, fn)["execute"]({})
    assert r["is_error"] and r["output"] == f"{type(exc).__name__}: {exc}"
    assert "Traceback" in r["metadata"]["traceback"] and "in fn" in r["metadata"]["traceback"]


def test_nullable_accepts_null_as_openapi_means():
    schema = {"type": "object", "properties": {"x": {"type": "string", "nullable": True}}}
    assert check(schema, {"x": None}) is None and check(schema, {"x": "a"}) is None
    assert check(schema, {"x": 1}) == "x: expected string, got integer 1"
