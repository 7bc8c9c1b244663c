"""Tools as maps: build them, infer their schema, run them without raising."""

from __future__ import annotations

import datetime
import enum
import inspect
import json
import pathlib
import re
import traceback
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pyrsistent import PVector, pvector

from .frozen import FrozenMap, freeze, thaw
from .validate import compile_schema, is_trivial
from .wire.common import sanitize
from .wire.parts import check_part

__all__ = [
    "tool",
    "define_tool",
    "tool_result",
    "sanitize",
    "execute_tool",
    "schema_for",
    "error_result",
    "validated",
    "with_execute",
    "TRACEBACK",
    "NAME_RULE",
    "check_name",
    "tool_output",
    "as_result",
]

# The rule both APIs publish for a tool's name (OpenAI's; Anthropic allows 128 characters).
NAME_RULE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def check_name(name: Any, who: str = "tool") -> str:
    """Return `name` when it is a valid tool name, else raise a ValueError stating the rule.

    >>> check_name("get_weather")
    'get_weather'
    >>> check_name("weather.get")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: tool name 'weather.get' is not allowed: ... ^[a-zA-Z0-9_-]{1,64}$ ...
    """
    if isinstance(name, str) and NAME_RULE.fullmatch(name):
        return name
    hint = f", e.g. {sanitize(name)[:64]!r}" if isinstance(name, str) and name else ""
    raise ValueError(
        f"{who} name {thaw(name)!r} is not allowed: a tool name must match ^[a-zA-Z0-9_-]{{1,64}}$"
        f" (letters, digits, '_' and '-', 1 to 64 characters){hint}"
    )


_EMPTY = FrozenMap()


def _frozen_map(m: Mapping | None) -> FrozenMap:
    if not m:
        return _EMPTY
    return m if isinstance(m, FrozenMap) else freeze(dict(m))


def _plain_dict(m: Mapping) -> dict:
    return dict(m)


def tool_result(output: Any, is_error: bool = False, metadata: Mapping | None = None):
    """Return a tool result map {output, is_error, metadata}.

    >>> tool_result("4") == {"output": "4", "is_error": False, "metadata": {}}
    True
    """
    return FrozenMap(
        {"output": output, "is_error": bool(is_error), "metadata": _frozen_map(metadata)}
    )


_PART_TYPES = frozenset({"text", "image", "file", "audio"})


def _part(value: Any) -> Any:
    """Return `value` checked as a content part (see toolnexus.parts), or None if it is not
    shaped like one."""
    if not isinstance(value, Mapping) or value.get("type") not in _PART_TYPES:
        return None
    try:
        return check_part(value)
    except ValueError:
        return None


def _parts(value: Any) -> PVector | None:
    """Return a part or a non-empty list of parts as a vector of parts, else None."""
    one = _part(value)
    if one is not None:
        return pvector([one])
    if isinstance(value, (list, tuple, PVector)) and value:
        parts = [_part(v) for v in value]
        if all(p is not None for p in parts):
            return pvector(parts)
    return None


def _plain_json(o: Any) -> Any:
    # json calls this only for what it cannot encode itself: frozen maps and vectors,
    # sets, and objects of no JSON type (their str: a date, a UUID, a Decimal).
    if isinstance(o, Mapping):  # a map json cannot encode itself (a pyrsistent pmap)
        return dict(o)
    if isinstance(o, (PVector, tuple, set, frozenset)):
        return list(o)
    return str(o)


_JSON = json.JSONEncoder(ensure_ascii=False, default=_plain_json)


def tool_output(value: Any) -> Any:
    """Return what the model is shown for a tool's return value: text as it is, content
    parts (a part or a list of them, see toolnexus.parts) as a vector of parts, and any
    other value (dict, list, pmap, pvector, number, bool, None) as its JSON text.

    >>> tool_output("4"), tool_output(FrozenMap({"a": 1})), tool_output(None), tool_output(2.5)
    ('4', '{"a": 1}', 'null', '2.5')
    >>> tool_output([{"type": "text", "text": "hi"}])[0]["text"]
    'hi'
    """
    if isinstance(value, str):
        return value
    parts = _parts(value)
    if parts is not None:
        return parts
    try:
        return _JSON.encode(value)
    except ValueError:  # a circular value: nothing JSON can say
        return str(value)


def _as_result(value: Any):
    """Normalize what a tool function returned into a tool result map."""
    is_map = type(value) is not str and isinstance(value, Mapping)  # a text: no ABC look
    if is_map and "output" in value and "is_error" in value:
        return tool_result(tool_output(value["output"]), value["is_error"], value.get("metadata"))
    return tool_result(tool_output(value))


as_result = _as_result


TRACEBACK = "traceback"  # the metadata key of a raising tool's traceback text


def error_result(e: BaseException):
    """Return the error result of a tool that raised: the model reads only the exception's
    type and message; the traceback text is kept in `metadata["traceback"]` for its author.

    >>> r = error_result(ValueError("bad city"))
    >>> r["output"], r["is_error"], r["metadata"]["traceback"].splitlines()[-1]
    ('ValueError: bad city', True, 'ValueError: bad city')
    """
    trace = "".join(traceback.format_exception(e))
    return tool_result(f"{type(e).__name__}: {e}", True, {TRACEBACK: trace})


_error_result = error_result


def _guarded(fn: Callable[[Mapping], Any]) -> Callable[[Mapping], Any]:
    """Wrap fn so it returns a result map and never raises (an async fn stays async)."""
    if inspect.iscoroutinefunction(fn):

        async def run_async(args: Mapping):
            try:
                return _as_result(await fn(args))
            except Exception as e:  # a tool's failure is something the model should see
                return _error_result(e)

        run_async.__wrapped__ = fn
        return run_async

    def run(args: Mapping):
        try:
            return _as_result(fn(args))
        except Exception as e:  # a tool's failure is something the model should see
            return _error_result(e)

    run.__wrapped__ = fn
    return run


def execute_tool(t: Mapping, args: Mapping):
    """Run tool `t` with `args`; return a result map and never raise (errors become values)."""
    return t["execute"](args)


def tool(
    name: str,
    description: str,
    input_schema: Mapping | None,
    execute: Callable[[Mapping], Any],
    source: str = "function",
):
    """Return a tool map {name, description, input_schema, source, execute}."""
    check_name(name)
    if not callable(execute):
        raise ValueError(f"tool {name!r}: execute must be callable")
    schema = input_schema if input_schema is not None else {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise ValueError(f"tool {name!r}: input_schema must be a JSON schema of type object")
    # Read as an object schema when its type is left out; the APIs want it said (Anthropic's
    # published schema requires input_schema.type "object").
    frozen = freeze({"type": "object", **schema})
    run = execute if hasattr(execute, "__wrapped__") else _guarded(execute)
    return FrozenMap(
        {
            "name": name,
            "description": description or "",
            "input_schema": frozen,
            "source": source,
            "execute": validated(name, frozen, run),
        }
    )


def validated(
    name: str, schema: Mapping, run: Callable[[Mapping], Any], checker: Callable | None = None
) -> Callable:
    """Return `run` checking its arguments against `schema` first (`core.validate`).

    Arguments that do not fit give an error result naming the field, and `run` is not
    called. A schema with nothing to check, or a `run` already checked against this
    very schema, is returned as it is; an async `run` stays async. `checker` is the
    schema's compiled check when the caller has it (see `with_execute`).
    """
    if is_trivial(schema) or getattr(run, "__schema__", None) is schema:
        return run

    checker = checker or compile_schema(schema, _HOST_KEYS)

    def invalid(args: Any):
        error = checker(args, "")
        return (
            None
            if error is None
            else tool_result(f"Invalid arguments for tool {name!r}: {error}", True)
        )

    if inspect.iscoroutinefunction(run):

        async def run_async(args: Mapping):
            bad = invalid(args)
            return bad if bad is not None else await run(args)

        out: Callable = run_async
    else:

        def run_checked(args: Mapping):
            bad = invalid(args)
            return bad if bad is not None else run(args)

        out = run_checked
    out.__wrapped__ = getattr(run, "__wrapped__", run)
    out.__schema__ = schema
    out.__checker__ = checker
    return out


def with_execute(t: FrozenMap, execute: Callable[[Mapping], Any]) -> FrozenMap:
    """Return tool `t` with another handler, checked against `t`'s schema as compiled when
    `t` was made (the same tool for another scope, say, without building it again)."""
    run = execute if hasattr(execute, "__wrapped__") else _guarded(execute)
    checker = getattr(t["execute"], "__checker__", None)
    return t.set("execute", validated(t["name"], t["input_schema"], run, checker))


_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
# Values that travel as JSON strings, with the JSON Schema "format" that says how to read them.
# datetime before date: a datetime is a date.
_FORMATTED = (
    (datetime.datetime, {"type": "string", "format": "date-time"}),
    (datetime.date, {"type": "string", "format": "date"}),
    (datetime.time, {"type": "string", "format": "time"}),
    (uuid.UUID, {"type": "string", "format": "uuid"}),
    (pathlib.PurePath, {"type": "string"}),
)


# A value's JSON type in an enum: None is null (typed "string", a Literal["a", None]
# refused the null it declares).
_ENUM_KINDS = {**_SCALARS, type(None): "null"}


def _kind(value: Any) -> str:
    """Return the JSON type of an enum's value: its class's or its nearest base's (an
    IntEnum member travels as its number, bool before int), else "string"."""
    return next((_ENUM_KINDS[c] for c in type(value).__mro__ if c in _ENUM_KINDS), "string")


def _enum_schema(values: list) -> dict:
    """Return the schema of a fixed set of values (typed when they share one JSON type)."""
    kinds = {_kind(v) for v in values}
    return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 else {"enum": values}


def _class_schema(hint: type) -> dict | None:
    """Return the schema of an Enum or string-like class, or None for any other class."""
    if issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint])
    for cls, schema in _FORMATTED:
        if issubclass(hint, cls):
            return dict(schema)
    return None


def schema_for(hint: Any) -> dict:
    """Return the JSON schema of a type hint.

    >>> schema_for(list[int])
    {'type': 'array', 'items': {'type': 'integer'}}
    >>> schema_for(typing.Literal["c", "f"])
    {'type': 'string', 'enum': ['c', 'f']}
    >>> schema_for(datetime.date)
    {'type': 'string', 'format': 'date'}
    """
    origin = typing.get_origin(hint)
    targs = typing.get_args(hint)
    if isinstance(hint, type) and (found := _record_schema(hint)) is not None:
        return found
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin is typing.Literal:
        return _enum_schema(list(targs))
    if isinstance(hint, type) and (found := _class_schema(hint)) is not None:
        return found
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in targs if a is not type(None)]
        inner = schema_for(rest[0]) if len(rest) == 1 else {"anyOf": [schema_for(a) for a in rest]}
        return _nullable(inner) if len(rest) < len(targs) else inner
    if hint in (list, tuple, set) or origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": schema_for(targs[0])} if targs else {"type": "array"}
    if hint is dict or origin is dict or hint is Mapping or origin is Mapping:
        return {"type": "object"}
    return {}


def _nullable(schema: dict) -> dict:
    """Return `schema` that also accepts null (what strict-mode tools send for an optional
    field): `"type": [T, "null"]` (and None in an enum) where it has one JSON type, else
    an anyOf with `{"type": "null"}`; both APIs and `core.validate` read either.

    >>> _nullable({"type": "integer"})
    {'type': ['integer', 'null']}
    >>> _nullable({"type": "string", "enum": ["c", "f"]})
    {'type': ['string', 'null'], 'enum': ['c', 'f', None]}
    >>> _nullable({})
    {}
    """
    if not schema:
        return schema  # accepts anything already, null included
    kind = schema.get("type")
    if isinstance(kind, str) and "anyOf" not in schema:
        out = {**schema, "type": [kind, "null"]}
        if "enum" in schema:
            out["enum"] = [*schema["enum"], None]
        return out
    if "anyOf" in schema and len(schema) == 1:
        return {"anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _record_schema(hint: type) -> dict | None:
    """Return the object schema of a dataclass or TypedDict class, else None.

    Its fields are the properties (in order); those without a default (a TypedDict's
    required keys) are required; no other property is allowed.
    """
    import dataclasses  # loaded with the first record-typed parameter, not with the package

    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        fields = [f for f in dataclasses.fields(hint) if f.init]
        names = [f.name for f in fields]
        required = [f.name for f in fields if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]  # fmt: skip
    elif typing.is_typeddict(hint):
        # NotRequired[...] read from the hints too: under `from __future__ import
        # annotations` the class's __required_keys__ cannot see it.
        extras = typing.get_type_hints(hint, include_extras=True)
        hints = typing.get_type_hints(hint)
        marks = {k: typing.get_origin(v) for k, v in extras.items()}
        names = list(hints)
        required = [k for k in names if marks[k] is typing.Required or (
            marks[k] is not typing.NotRequired and k in hint.__required_keys__)]  # fmt: skip
    else:
        return None
    props = {n: schema_for(hints.get(n, Any)) for n in names}
    out: dict = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in (
        typing.get_args(hint)
    )


def _infer_schema(fn: Callable) -> dict:
    hints = typing.get_type_hints(fn)
    props, required = {}, []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name.startswith("_"):
            continue  # underscore parameters are the host's (e.g. _resume), not the model's
        hint = hints.get(p.name, str)
        props[p.name] = schema_for(hint)
        if p.default is p.empty and not _optional(hint):
            required.append(p.name)
    schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


RESUME = "_resume"  # the argument a suspended tool gets its host's answer in, when re-run
_HOST_KEYS = frozenset({RESUME})


def _caller(fn: Callable) -> Callable[[Mapping], Any]:
    """Adapt a keyword function into execute(args); unknown keys are a clear error.

    A re-run after a suspension adds `_resume` ({id, ok, data}); it reaches the function
    only if it declares a `_resume` parameter (or **kwargs), else it is dropped.
    """
    params = inspect.signature(fn).parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    wants_resume = takes_kwargs or RESUME in params

    def kwargs(args: Mapping) -> dict:
        out = _plain_dict(args)
        if not wants_resume:
            out.pop(RESUME, None)
        extra = [k for k in out if k not in params] if not takes_kwargs else []
        if extra:
            raise TypeError(f"unexpected argument(s) {extra}; expected {list(params)}")
        return out

    if inspect.iscoroutinefunction(fn):

        async def execute_async(args: Mapping) -> Any:
            return await fn(**kwargs(args))

        return execute_async

    def execute(args: Mapping) -> Any:
        return fn(**kwargs(args))

    return execute


def define_tool(
    fn: Callable | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping | None = None,
):
    """Return a tool map built from a function's signature and docstring (usable as a decorator).

    >>> @define_tool
    ... def add(a: float, b: float = 0) -> str:
    ...     '''Add two numbers.'''
    ...     return str(a + b)
    >>> add["name"], add["description"], add["input_schema"]["required"]
    ('add', 'Add two numbers.', pvector(['a']))
    """
    if fn is None:
        return lambda f: define_tool(
            f, name=name, description=description, input_schema=input_schema
        )
    doc = inspect.getdoc(fn) or ""
    first_line = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    return tool(
        name or fn.__name__,
        description if description is not None else first_line,
        input_schema if input_schema is not None else _infer_schema(fn),
        _caller(fn),
    )
