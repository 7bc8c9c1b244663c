"""A small JSON Schema check for tool arguments: types, required, enum, nested shapes.

`check(schema, args)` returns None when the arguments fit, else one message naming the
field, e.g. `x: expected integer, got string "not-an-int"`, which the model reads as the
tool's error result and can act on. It covers what tools declare in practice: `type`
(one or a list), `properties`, `required`, `enum`, `const`, `items`,
`additionalProperties: false`, `anyOf` / `oneOf` (any branch fits), and OpenAPI's
`nullable: true`. Other keywords (formats, lengths, patterns, ranges, `$ref`) are not
checked: the tool still sees the value and may refuse it itself.

Measured on a three-field tool schema: 5 us a call compiled (`compile_schema`), against
18-21 us for `jsonschema` 4.26 (whose import also costs 78 ms, and a dependency);
`fastjsonschema` is faster (0.9 us) but another dependency, generating code with exec.
A tool call costs milliseconds: neither is worth a dependency.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pyrsistent import PVector, pvector

from .frozen import FrozenMap

__all__ = ["check", "compile_schema", "is_trivial", "describe"]

_ARRAYS = (list, tuple, PVector)
# Exact types first: an isinstance check against an ABC costs more than the check itself.
_FROZEN = FrozenMap
_ARRAY_TYPES = frozenset({list, tuple, type(pvector())})
_MAP_TYPES = frozenset({dict, _FROZEN})
_FAST = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
         "null": (type(None),), "object": (dict, _FROZEN),
         "array": (list, type(pvector()))}  # fmt: skip


def _is(kind: Any, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, _ARRAYS)
    if kind == "null":
        return value is None
    return True  # a type this check does not know: not ours to refuse


def _kind(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is(kind, value):
            return kind
    return type(value).__name__


def describe(value: Any) -> str:
    """Return a short description of a value for a message: its JSON type and a preview.

    >>> describe("not-an-int"), describe([1, 2]), describe(None)
    ('string "not-an-int"', 'array', 'null')
    """
    kind = _kind(value)
    if kind in ("string", "integer", "number", "boolean"):
        text = json.dumps(value, ensure_ascii=False)
        return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"
    return kind


def _field(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def is_trivial(schema: Any) -> bool:
    """Return whether a schema accepts any object (nothing to check before a call).

    >>> is_trivial({"type": "object", "properties": {}}), is_trivial({"required": ["a"]})
    (True, False)
    """
    if not isinstance(schema, Mapping):
        return True
    checked = ("properties", "required", "enum", "anyOf", "oneOf")
    # `additionalProperties: false` closes the object (falsy, yet a check); true or {}
    # accept anything; `const` checks whatever its value (None and 0 too).
    extra = schema.get("additionalProperties")
    open_ = extra is None or extra is True or (isinstance(extra, Mapping) and not extra)
    return (
        not any(schema.get(k) for k in checked)
        and open_
        and "const" not in schema
        and schema.get("type", "object") == "object"
    )


# No mutant: an alias for annotations only (strings here, never evaluated).
Checker = Callable[[Any, str], "str | None"]  # pragma: no mutate


def check(schema: Any, value: Any, path: str = "", skip: frozenset = frozenset()) -> str | None:
    """Return None if `value` fits `schema`, else a message naming the first field that does not.

    `skip` names top-level keys that are never checked (the host's own, like `_resume`).
    To check many values against one schema, `compile_schema` it once.

    >>> s = {"type": "object", "properties": {"x": {"type": "integer"},
    ...      "unit": {"enum": ["c", "f"]}}, "required": ["x"]}
    >>> check(s, {"x": 3, "unit": "c"}) is None
    True
    >>> check(s, {"x": "not-an-int"})
    'x: expected integer, got string "not-an-int"'
    >>> check(s, {"unit": "k"})
    'missing required argument x'
    >>> check(s, {"x": 1, "unit": "k"})
    'unit: must be one of ["c", "f"], got string "k"'
    """
    return compile_schema(schema, skip)(value, path)


def compile_schema(schema: Any, skip: frozenset = frozenset()) -> Checker:
    """Return `checker(value, path) -> message | None` for a schema, built once.

    `skip` names keys of the top-level object that are never checked.
    """
    if not isinstance(schema, Mapping):
        return _accept
    steps: list[Checker] = []
    kinds = schema.get("type")
    if kinds is not None:
        options = tuple(kinds) if _is_array(kinds) else (kinds,)
        if options:
            steps.append(_type_step(options))
    enum = schema.get("enum")
    if _is_array(enum):
        steps.append(_enum_step(tuple(enum)))
    if "const" in schema:
        steps.append(_const_step(schema["const"]))
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if _is_array(branches) and branches:
            steps.append(_any_step(tuple(compile_schema(b) for b in branches)))
    if any(schema.get(k) is not None for k in ("properties", "required", "additionalProperties")):
        steps.append(_object_step(schema, skip))
    if isinstance(schema.get("items"), Mapping):
        steps.append(_items_step(compile_schema(schema["items"])))
    checker = _all(steps)
    if schema.get("nullable") is True and checker is not _accept:
        return _or_null(checker)  # OpenAPI's spelling of "or null"
    return checker


def _all(steps: list[Checker]) -> Checker:
    if not steps:
        return _accept
    if len(steps) == 1:
        return steps[0]

    def checker(value: Any, path: str) -> str | None:
        for step in steps:
            error = step(value, path)
            if error is not None:
                return error
        return None

    return checker


def _or_null(inner: Checker) -> Checker:
    def checker(value: Any, path: str) -> str | None:
        return None if value is None else inner(value, path)

    return checker


def _accept(value: Any, path: str) -> None:
    return None


def _is_array(value: Any) -> bool:
    return type(value) in _ARRAY_TYPES or isinstance(value, _ARRAYS)


def _is_map(value: Any) -> bool:
    return type(value) in _MAP_TYPES or isinstance(value, Mapping)


def _type_step(options: tuple) -> Checker:
    wanted = " or ".join(str(k) for k in options)
    fast = frozenset(t for k in options if k in _FAST for t in _FAST[k])

    def step(value: Any, path: str) -> str | None:
        if type(value) in fast or any(_is(k, value) for k in options):
            return None
        return f"{path or 'arguments'}: expected {wanted}, got {describe(value)}"

    return step


def _enum_step(allowed: tuple) -> Checker:
    shown = json.dumps(list(allowed), default=str, ensure_ascii=False)[:200]

    def step(value: Any, path: str) -> str | None:
        if any(_same(value, e) for e in allowed):
            return None
        return f"{path or 'arguments'}: must be one of {shown}, got {describe(value)}"

    return step


def _const_step(const: Any) -> Checker:
    shown = json.dumps(const, default=str)[:80]

    def step(value: Any, path: str) -> str | None:
        return None if _same(value, const) else f"{path or 'arguments'}: must be {shown}"

    return step


def _any_step(branches: tuple[Checker, ...]) -> Checker:
    def step(value: Any, path: str) -> str | None:
        errors = [b(value, path) for b in branches]
        return None if any(e is None for e in errors) else errors[0]

    return step


def _items_step(item: Checker) -> Checker:
    def step(value: Any, path: str) -> str | None:
        if not _is_array(value):
            return None
        for i, x in enumerate(value):
            error = item(x, f"{path}[{i}]")
            if error is not None:
                return error
        return None

    return step


def _object_step(schema: Mapping, skip: frozenset) -> Checker:
    given = schema.get("properties")
    props = {k: compile_schema(v) for k, v in given.items()} if _is_map(given) else {}
    required = tuple(schema["required"]) if _is_array(schema.get("required")) else ()
    extra = schema.get("additionalProperties")
    other = compile_schema(extra) if _is_map(extra) else None
    known = ", ".join(str(k) for k in props) or "none"

    def step(value: Any, path: str) -> str | None:
        if not _is_map(value):
            return None
        for name in required:
            if name not in value:
                return f"missing required argument {_field(path, name)}"
        for key, x in value.items():
            sub = props.get(key, other) if isinstance(key, str) else other
            if sub is None:
                if extra is False and key not in skip:
                    return f"{_field(path, key)}: unexpected argument (known: {known})"
                continue
            if key in skip:
                continue
            error = sub(x, _field(path, key))
            if error is not None:
                return error
        return None

    return step


def _same(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, and 1 == 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    try:
        return bool(a == b)
    except Exception:  # an odd value that cannot compare: not equal
        return False
