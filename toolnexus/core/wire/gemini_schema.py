"""The JSON Schema subset Gemini takes (`parametersJsonSchema`, `responseJsonSchema`), pure.

Google documents the keywords it reads; a schema using another one is refused here with
an error naming the keyword and where it is, before any request is sent (the API would
answer 400 "Invalid JSON payload" or ignore the constraint silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyrsistent import PVector

__all__ = ["KEYWORDS", "UnsupportedSchemaError", "check_schema"]

# The documented keywords (JSON Schema's, and the OpenAPI Schema fields Gemini also reads).
KEYWORDS = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "$schema",
        "$comment",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "const",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "anyOf",
        "oneOf",
        "allOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
        "default",
        "examples",
        "example",
        "nullable",
        "pattern",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "uniqueItems",
        "definitions",
    }
)
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions"})  # name -> schema
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMAS = frozenset({"items", "additionalProperties"})
_LIST = (list, tuple, PVector)


class UnsupportedSchemaError(ValueError):
    """A schema uses a keyword Gemini does not take."""


def check_schema(schema: Any, what: str) -> None:
    """Raise UnsupportedSchemaError when `schema` (of `what`, e.g. "tool 'add'") uses a
    keyword outside the subset Gemini takes.

    >>> check_schema({"type": "object", "properties": {"not": {"type": "string"}}}, "t")
    >>> try:
    ...     check_schema({"type": "object", "patternProperties": {}}, "tool 'f'")
    ... except UnsupportedSchemaError as e:
    ...     str(e).split(";")[0]
    "tool 'f': Gemini does not take the JSON Schema keyword 'patternProperties' (at #)"
    """
    bad = _first_unknown(schema, "#")
    if bad is not None:
        key, where = bad
        raise UnsupportedSchemaError(
            f"{what}: Gemini does not take the JSON Schema keyword {key!r} (at {where}); "
            f"its subset: {', '.join(sorted(KEYWORDS))}"
        )


def _first_unknown(schema: Any, where: str) -> tuple[str, str] | None:
    if not isinstance(schema, Mapping):
        return None  # true/false schemas, or a value the API itself judges
    for key, value in schema.items():
        if key not in KEYWORDS:
            return key, where
        found = None
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            found = next(
                (f for n, v in value.items() if (f := _first_unknown(v, f"{where}/{key}/{n}"))),
                None,
            )
        elif key in _SCHEMA_LISTS and isinstance(value, _LIST):
            found = next(
                (f for n, v in enumerate(value) if (f := _first_unknown(v, f"{where}/{key}/{n}"))),
                None,
            )
        elif key in _SCHEMAS:
            found = _first_unknown(value, f"{where}/{key}")
        if found is not None:
            return found
    return None
