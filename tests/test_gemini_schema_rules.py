"""The JSON Schema subset Gemini takes (core/wire/gemini_schema.py), rule by rule: the
documented keywords, where a refused keyword is found (every kind of subschema) and the
refusal's exact words. Pure, no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.wire import gemini_schema as GS

DOCUMENTED = {
    "$id", "$defs", "$ref", "$anchor", "$schema", "$comment", "type", "format", "title",
    "description", "enum", "const", "items", "prefixItems", "minItems", "maxItems", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf",
    "properties", "additionalProperties", "required", "propertyOrdering", "default", "examples",
    "example", "nullable", "pattern", "minLength", "maxLength", "minProperties", "maxProperties",
    "uniqueItems", "definitions",
}  # fmt: skip


def test_the_keywords_gemini_takes():
    assert GS.KEYWORDS == DOCUMENTED
    assert GS._SCHEMA_MAPS == {"properties", "$defs", "definitions"}
    assert GS._SCHEMA_LISTS == {"anyOf", "oneOf", "allOf", "prefixItems"}
    assert GS._SCHEMAS == {"items", "additionalProperties"}


def test_the_refusal_names_what_the_keyword_and_where_then_the_subset():
    with pytest.raises(GS.UnsupportedSchemaError) as e:
        GS.check_schema({"type": "object", "not": {}}, "tool 'f'")
    subset = ", ".join(sorted(DOCUMENTED))
    assert str(e.value) == (
        f"tool 'f': Gemini does not take the JSON Schema keyword 'not' (at #); its subset: {subset}"
    )
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize(
    ("schema", "key", "where"),
    [
        ({"properties": {"a": {"type": "string"}, "b": {"if": {}}}}, "if", "#/properties/b"),
        ({"$defs": {"d": {"then": 1}}}, "then", "#/$defs/d"),
        ({"definitions": {"d": {"else": 1}}}, "else", "#/definitions/d"),
        ({"anyOf": [{"type": "string"}, {"contains": {}}]}, "contains", "#/anyOf/1"),
        ({"oneOf": [{"x": 1}]}, "x", "#/oneOf/0"),
        ({"allOf": ({"y": 1},)}, "y", "#/allOf/0"),
        ({"prefixItems": pvector([{}, {}, {"z": 1}])}, "z", "#/prefixItems/2"),
        ({"items": {"w": 1}}, "w", "#/items"),
        ({"additionalProperties": {"v": 1}}, "v", "#/additionalProperties"),
        ({"properties": {"a": {"items": {"anyOf": [{}, {"q": 1}]}}}}, "q",
         "#/properties/a/items/anyOf/1"),
        ({"type": "object", "u": 1, "properties": {"a": {"t": 1}}}, "u", "#"),
        ({"properties": {"a": {"t": 1}}, "u": 1}, "t", "#/properties/a"),
        ({"anyOf": [{"a1": 1}, {"a2": 1}]}, "a1", "#/anyOf/0"),
        ({"properties": {"a": {"p1": 1}, "b": {"p2": 1}}}, "p1", "#/properties/a"),
    ],
)  # fmt: skip
def test_the_first_refused_keyword_is_found_in_every_kind_of_subschema(schema, key, where):
    assert GS._first_unknown(schema, "#") == (key, where)
    with pytest.raises(GS.UnsupportedSchemaError) as e:
        GS.check_schema(schema, "w")
    said = f"w: Gemini does not take the JSON Schema keyword {key!r} (at {where}); its subset: "
    assert str(e.value).startswith(said + "$anchor, $comment, $defs")


@pytest.mark.parametrize(
    "schema",
    [
        None,
        True,
        False,
        [{"x": 1}],
        {"type": "object", "properties": {"not": {"type": "string"}}, "required": ["not"]},
        {"properties": [{"x": 1}]},  # not a map of schemas: the API judges it
        {"anyOf": {"x": 1}},
        {"items": True, "additionalProperties": False},
        {"enum": [{"x": 1}], "const": {"y": 2}, "default": {"z": 3}, "examples": [{"w": 1}]},
        {"properties": {"a": {"items": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}},
    ],
)
def test_a_schema_in_the_subset_passes(schema):
    assert GS._first_unknown(schema, "#") is None
    assert GS.check_schema(schema, "w") is None
