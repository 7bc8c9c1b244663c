"""The rules of core/output.py no other test asserts: a schema given as a pmap or any
mapping, the empty one refused, strictness checked in every place an object can sit, the
spec's name (title, class, sanitized, 64 characters), and read_output's messages, its
`text` and its frozen value."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from pyrsistent import PVector

from toolnexus.core.frozen import FrozenMap, freeze
from toolnexus.core.output import OutputError, is_strict, output_spec, read_output

CLOSED = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
          "additionalProperties": False}  # fmt: skip
OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}


def test_a_schema_may_be_a_pmap_or_any_mapping():
    for given in (freeze(CLOSED), MappingProxyType(CLOSED)):
        spec = output_spec(given)
        assert spec["schema"] == freeze(CLOSED) and spec["strict"] is True
        assert read_output(spec, '{"a": "x"}') == freeze({"a": "x"})


def test_an_empty_schema_is_refused_saying_what_to_give():
    for empty in ({}, freeze({})):
        with pytest.raises(ValueError, match=r"^output_schema is empty: give a JSON Schema, "
                                             r"dataclass or TypedDict$"):  # fmt: skip
            output_spec(empty)


def closed_with(key, sub):
    return {**CLOSED, key: sub}


@pytest.mark.parametrize(
    "where",
    [
        lambda o: closed_with("properties", {"a": o}) | {"required": ["a"]},
        lambda o: closed_with("$defs", {"A": o}),
        lambda o: closed_with("definitions", {"A": o}),
        lambda o: {"type": "array", "items": o},
        lambda o: {"type": "array", "items": [o]},
        lambda o: {"additionalProperties": o},  # not itself an object: no type, no properties
        lambda o: {"anyOf": [CLOSED, o]},
        lambda o: {"oneOf": [o]},
        lambda o: {"allOf": [o]},
    ],
    ids=["properties", "$defs", "definitions", "items", "items-list", "additionalProperties",
         "anyOf", "oneOf", "allOf"],
)  # fmt: skip
def test_every_object_is_checked_wherever_it_sits(where):
    assert is_strict(where(CLOSED)) is True
    assert is_strict(where(OPEN)) is False
    untyped = {"properties": {"a": {"type": "string"}}}  # an object by its properties alone
    assert is_strict(where(untyped)) is False


@pytest.mark.parametrize(
    "schema, name",
    [
        ({**CLOSED, "title": "Weather report"}, "Weather_report"),
        ({**CLOSED, "title": "ü" * 70}, "_" * 64),
        ({**CLOSED, "title": "x" * 64 + "y"}, "x" * 64),
        ({**CLOSED, "title": 5}, "output"),
        ({**CLOSED, "title": ""}, "output"),
        (CLOSED, "output"),
    ],
)
def test_the_spec_is_named_by_the_title_sanitized_and_bounded(schema, name):
    assert output_spec(schema)["name"] == name


def test_a_class_names_its_spec_unless_it_has_a_title():
    from dataclasses import dataclass

    @dataclass
    class Weather:
        city: str

    assert output_spec(Weather)["name"] == "Weather"


def test_an_answer_that_is_not_json_is_shown_whole_up_to_80_characters():
    spec = output_spec(CLOSED)
    for text, shown in (("x" * 80, "x" * 80), ("y" * 81, "y" * 77 + "...")):
        with pytest.raises(OutputError) as e:
            read_output(spec, text)
        assert str(e.value).startswith("the answer is not JSON (")
        assert str(e.value).endswith(f"): {shown!r}") and e.value.text == text


def test_an_answer_that_does_not_fit_names_the_missing_field_and_keeps_the_text():
    spec = output_spec(CLOSED)
    with pytest.raises(OutputError) as e:
        read_output(spec, "{}")
    assert str(e.value).startswith("the answer does not fit output_schema: ")
    assert "missing required field" in str(e.value) and e.value.text == "{}"


def test_the_answer_is_frozen():
    spec = output_spec({"type": "object"})
    got = read_output(spec, '{"a": [1, {"b": 2}]}')
    assert isinstance(got, FrozenMap) and isinstance(got["a"], PVector)
    assert isinstance(read_output(output_spec({"type": "array"}), "[1]"), PVector)
    assert read_output(output_spec({"type": "integer"}), "3") == 3


def test_an_object_by_its_type_alone_must_be_closed_too():
    assert is_strict({"type": "object"}) is False
    assert is_strict({"type": "object", "additionalProperties": False}) is True
    assert is_strict({"type": "string"}) is True
