"""Structured output, pure: a run's `output_schema` made a spec, and the answer read by it.

    spec = output_spec(Weather)            # a JSON Schema dict, a dataclass or a TypedDict
    spec["schema"], spec["name"], spec["strict"]
    read_output(spec, '{"city": "Oslo", "temp": 3}')   # the parsed value, or OutputError

A dialect sends the spec its own way (`output_params` of each codec): OpenAI's
`response_format` of type json_schema (strict when the schema allows it), Anthropic's
`output_config.format`. The answer's text is parsed as JSON and checked with
`core.validate`, the check tool arguments get.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .frozen import FrozenMap, freeze, thaw
from .validate import compile_schema
from .wire.jsonload import load

__all__ = ["OutputError", "output_spec", "read_output", "is_strict"]


class OutputError(ValueError):
    """The model's answer is not JSON fitting the run's `output_schema` (it names the field).

    `text` holds the answer as the model gave it; the exchange was not saved.
    """

    def __init__(self, message: str, text: str):
        super().__init__(message)
        self.text = text


def _schema_of(shape: Any) -> dict:
    if isinstance(shape, Mapping):
        schema = thaw(shape) if isinstance(shape, FrozenMap) else dict(shape)
        if not schema:
            raise ValueError("output_schema is empty: give a JSON Schema, dataclass or TypedDict")
        return schema
    from .tool import _record_schema

    found = _record_schema(shape) if isinstance(shape, type) else None
    if found is None:
        raise TypeError(
            "output_schema must be a JSON Schema dict, a dataclass or a TypedDict class,"
            f" got {shape!r}"
        )
    return found


def _objects(schema: Any):
    """Yield every subschema of `schema` that describes an object."""
    if isinstance(schema, Mapping):
        if schema.get("type") == "object" or "properties" in schema:
            yield schema
        for key in ("properties", "$defs", "definitions"):
            for sub in (schema.get(key) or {}).values():
                yield from _objects(sub)
        for key in ("items", "additionalProperties"):
            yield from _objects(schema.get(key))
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key) or ():
                yield from _objects(sub)
    elif isinstance(schema, list | tuple):
        for sub in schema:
            yield from _objects(sub)


def is_strict(schema: Mapping) -> bool:
    """Return whether OpenAI's strict mode can take `schema`: every object closed
    (additionalProperties false) with all its properties required.

    >>> is_strict({"type": "object", "properties": {"a": {"type": "string"}},
    ...            "required": ["a"], "additionalProperties": False})
    True
    >>> is_strict({"type": "object", "properties": {"a": {"type": "string"}}})
    False
    """
    return all(
        o.get("additionalProperties") is False
        and set(o.get("properties") or {}) == set(o.get("required") or ())
        for o in _objects(schema)
    )


_NAME_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def _name(shape: Any, schema: Mapping) -> str:
    given = schema.get("title") if isinstance(schema.get("title"), str) else None
    given = given or (shape.__name__ if isinstance(shape, type) else "output")
    return _NAME_BAD.sub("_", given)[:64] or "output"


def output_spec(shape: Any) -> FrozenMap:
    """Return the spec of an `output_schema`: {schema, name, strict, check}.

    `shape` is a JSON Schema dict, a dataclass or a TypedDict class (its fields become
    the properties; those without a default are required). A bad shape is a TypeError.

    >>> spec = output_spec({"type": "object", "properties": {"n": {"type": "integer"}}})
    >>> spec["name"], spec["strict"]
    ('output', False)
    """
    schema = _schema_of(shape)
    check = compile_schema(schema)
    return FrozenMap({"schema": freeze(schema), "name": _name(shape, schema),
                 "strict": is_strict(schema), "check": check})  # fmt: skip


def read_output(spec: Mapping, text: str) -> Any:
    """Return the answer `text` parsed as JSON and checked against the spec's schema
    (frozen), or raise OutputError naming the field that does not fit.

    >>> spec = output_spec({"type": "object", "properties": {"n": {"type": "integer"}},
    ...                     "required": ["n"]})
    >>> read_output(spec, '{"n": 3}')["n"]
    3
    >>> read_output(spec, '{"n": "three"}')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    toolnexus.core.output.OutputError: ...: output.n: expected integer, got string "three"
    """
    try:
        value = load(text)
    except ValueError as e:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise OutputError(f"the answer is not JSON ({e}): {shown!r}", text) from None
    problem = spec["check"](value, "output")
    if problem is not None:
        problem = problem.replace("missing required argument", "missing required field")
        raise OutputError(f"the answer does not fit output_schema: {problem}", text)
    return freeze(value) if isinstance(value, dict | list) else value
