"""The rules of core/tool.py no other test asserts: a refused name's exact message and its
hint, the result map's fields, what the model is shown for each kind of return value
(parts, sets, pmaps, dates, non-ASCII text), a raising tool's traceback, `tool`'s and
`define_tool`'s defaults, `validated` and `with_execute` (the compiled check reused, the
wrappers' attributes), the schema of each kind of type hint, and `_resume`'s routing."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import pathlib
import traceback
import typing
import uuid
from collections.abc import Mapping
from typing import NotRequired, Optional, Required, TypedDict, Union

import pytest
from pyrsistent import PVector, pmap, pvector

from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.tool import (
    TRACEBACK,
    _nullable,
    as_result,
    check_name,
    define_tool,
    error_result,
    execute_tool,
    schema_for,
    tool,
    tool_output,
    tool_result,
    validated,
    with_execute,
)

RULE = (
    "a tool name must match ^[a-zA-Z0-9_-]{1,64}$"
    " (letters, digits, '_' and '-', 1 to 64 characters)"
)
CLOSED = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}


# ---- names -------------------------------------------------------------------------------


def test_a_refused_name_s_message_states_the_rule_and_a_sanitized_hint():
    with pytest.raises(ValueError) as e:
        check_name("get weather")
    assert str(e.value) == f"tool name 'get weather' is not allowed: {RULE}, e.g. 'get_weather'"


def test_the_hint_is_cut_to_64_characters_and_names_who_asked():
    with pytest.raises(ValueError) as e:
        check_name("é" * 70, who="server")
    assert str(e.value) == f"server name {'é' * 70!r} is not allowed: {RULE}, e.g. {'_' * 64!r}"


@pytest.mark.parametrize("name", ["", None, 7])
def test_an_empty_or_non_string_name_has_no_hint(name):
    with pytest.raises(ValueError) as e:
        check_name(name)
    assert str(e.value) == f"tool name {name!r} is not allowed: {RULE}"


@pytest.mark.parametrize("name", [pvector(["a", 1]), FrozenMap({"n": "a"}), ("a",)])
def test_a_frozen_name_shows_as_the_json_its_author_wrote(name):
    # A tool map is frozen when built, so a list given as the name arrived as a pvector
    # and the error showed `pvector(['a', 1])`, a type the author never wrote.
    with pytest.raises(ValueError) as e:
        check_name(name)
    assert str(e.value) == f"tool name {thaw(name)!r} is not allowed: {RULE}"
    assert "pvector" not in str(e.value) and "FrozenMap" not in str(e.value)


def test_names_at_the_edges_of_the_rule():
    assert check_name("a" * 64) == "a" * 64
    assert check_name("A-z_9") == "A-z_9"
    with pytest.raises(ValueError):
        check_name("a" * 65)


# ---- results -----------------------------------------------------------------------------


def test_a_result_s_fields_and_its_metadata_frozen():
    r = tool_result(3, is_error=1, metadata={"k": [1]})
    assert dict(r) == {"output": 3, "is_error": True, "metadata": {"k": [1]}}
    assert r["is_error"] is True and isinstance(r["metadata"], FrozenMap)
    assert isinstance(r["metadata"]["k"], PVector)
    same = FrozenMap({"k": 1})
    assert tool_result("x", metadata=same)["metadata"] is same
    assert tool_result("x")["is_error"] is False and tool_result("x")["metadata"] == {}


def _part(kind):
    return {"type": kind, "mimeType": "application/pdf", "data": "QUJD"}


@pytest.mark.parametrize("kind", ["image", "file", "audio"])
def test_each_media_part_is_shown_as_a_part(kind):
    out = tool_output(_part(kind))
    assert isinstance(out, PVector) and out == pvector([FrozenMap(_part(kind))])


@pytest.mark.parametrize("many", [list, tuple, pvector])
def test_a_list_of_parts_is_a_vector_of_every_part(many):
    parts = many([{"type": "text", "text": "a"}, _part("file")])
    out = tool_output(parts)
    assert isinstance(out, PVector) and list(out) == [FrozenMap(p) for p in parts]


def test_what_is_not_all_parts_is_json():
    assert (
        tool_output([{"type": "text", "text": "a"}, {"x": 1}])
        == '[{"type": "text", "text": "a"}, {"x": 1}]'
    )
    assert tool_output({"type": "image"}) == '{"type": "image"}'  # shaped like one, not one
    assert tool_output({"type": "video", "url": "u"}) == '{"type": "video", "url": "u"}'
    assert tool_output([]) == "[]"


def test_values_json_cannot_encode_itself():
    assert tool_output(pmap({"a": 1})) == '{"a": 1}'
    assert tool_output({"s": frozenset([1]), "t": (1, 2), "v": pvector([3])}) == (
        '{"s": [1], "t": [1, 2], "v": [3]}'
    )
    assert tool_output({1, 2}) in ("[1, 2]", "[2, 1]")
    assert tool_output(datetime.date(2024, 1, 2)) == '"2024-01-02"'
    u = uuid.UUID(int=5)
    assert tool_output([u]) == f'["{u}"]'


def test_non_ascii_text_stays_as_it_is():
    assert tool_output({"city": "Zürich"}) == '{"city": "Zürich"}'


def test_a_circular_value_is_shown_as_its_str():
    loop: list = []
    loop.append(loop)
    assert tool_output(loop) == "[[...]]"


def test_a_returned_result_map_keeps_its_fields_and_its_output_is_shown():
    r = as_result({"output": {"x": 1}, "is_error": True, "metadata": {"m": 2}})
    assert dict(r) == {"output": '{"x": 1}', "is_error": True, "metadata": {"m": 2}}
    assert as_result({"output": "a"}) == tool_result('{"output": "a"}')
    assert as_result(5) == tool_result("5")


def _raise(_):
    raise ValueError("bad city")


def test_a_raising_tool_s_result_keeps_the_whole_traceback():
    try:
        _raise(None)
    except ValueError as e:
        err = e
    r = error_result(err)
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    assert r == tool_result("ValueError: bad city", True, {TRACEBACK: trace})
    assert trace.startswith("Traceback (most recent call last):") and "_raise" in trace


def test_sync_and_async_tools_turn_raises_into_results():
    async def boom(_):
        raise KeyError("k")

    async def fine(_):
        return {"a": 1}

    r = execute_tool(tool("s", "", None, _raise), {})
    assert r["output"] == "ValueError: bad city" and r["is_error"] is True
    assert "Traceback" in r["metadata"][TRACEBACK]
    assert asyncio.run(tool("b", "", None, boom)["execute"]({}))["output"] == "KeyError: 'k'"
    t = tool("f", "", None, fine)
    assert asyncio.run(t["execute"]({})) == tool_result('{"a": 1}')
    assert t["execute"].__wrapped__ is fine


def test_execute_tool_runs_the_tool_s_execute():
    t = FrozenMap({"execute": lambda args: ("ran", args)})
    assert execute_tool(t, {"a": 1}) == ("ran", {"a": 1})


# ---- tool ----------------------------------------------------------------------------------


def test_a_tool_map_s_fields_and_defaults():
    fn = lambda a: "x"  # noqa: E731
    t = tool("t", None, None, fn)
    assert list(t) == ["name", "description", "input_schema", "source", "execute"]
    assert t["description"] == "" and t["source"] == "function"
    assert t["input_schema"] == {"type": "object", "properties": {}}
    assert t["execute"].__wrapped__ is fn
    assert tool("t", "d", None, fn, source="mcp")["source"] == "mcp"


def test_a_schema_without_a_type_is_an_object_and_says_so_first():
    t = tool("t", "", {"properties": {"a": {"type": "integer"}}}, lambda a: "x")
    assert list(t["input_schema"]) == ["type", "properties"]
    assert t["input_schema"]["type"] == "object"


@pytest.mark.parametrize("schema", [{"type": "array"}, ["type"], "object"])
def test_a_schema_that_is_not_an_object_is_refused(schema):
    with pytest.raises(ValueError) as e:
        tool("t", "", schema, lambda a: "x")
    assert str(e.value) == "tool 't': input_schema must be a JSON schema of type object"


def test_an_execute_that_is_not_callable_is_refused():
    with pytest.raises(ValueError) as e:
        tool("t", "", None, "run")
    assert str(e.value) == "tool 't': execute must be callable"


def test_an_execute_already_wrapped_is_used_as_it_is():
    def pre(args):
        raise RuntimeError("not guarded again")

    pre.__wrapped__ = _raise
    assert tool("t", "", None, pre)["execute"] is pre
    with pytest.raises(RuntimeError):
        tool("t", "", CLOSED, pre)["execute"]({"a": 1})


# ---- validated and with_execute ------------------------------------------------------------


def test_invalid_arguments_are_a_result_naming_the_tool_and_the_field():
    ran = []
    t = tool("t", "", CLOSED, lambda a: ran.append(a) or "ok")
    assert t["execute"]({"a": "x"}) == tool_result(
        "Invalid arguments for tool 't': a: expected integer, got string \"x\"", True
    )
    assert ran == [] and t["execute"]({"a": 1})["output"] == "ok"


def test_resume_is_the_host_s_key_even_in_a_closed_schema():
    t = tool("t", "", CLOSED, lambda a: sorted(a))
    assert t["execute"]({"a": 1, "_resume": {"id": "x"}})["output"] == '["_resume", "a"]'
    assert t["execute"]({"a": 1, "b": 2})["is_error"] is True


def test_a_checked_run_s_attributes_and_a_second_check_skipped():
    def run(args):
        return tool_result("r")

    schema = FrozenMap(CLOSED)
    out = validated("t", schema, run)
    assert out is not run and out.__wrapped__ is run and out.__schema__ is schema
    assert out.__checker__({"a": "x"}, "") is not None and out.__checker__({"a": 1}, "") is None
    assert validated("t", schema, out) is out
    assert validated("t", FrozenMap(CLOSED), out) is not out  # another schema: checked again
    assert validated("t", {"type": "object"}, run) is run  # nothing to check


def test_a_given_checker_is_the_one_used():
    seen = []

    def checker(args, path):
        seen.append((dict(args), path))
        return "nope"

    out = validated("t", CLOSED, lambda a: "ran", checker)
    assert out({"a": 1}) == tool_result("Invalid arguments for tool 't': nope", True)
    assert seen == [({"a": 1}, "")] and out.__checker__ is checker


def test_an_async_run_stays_async_and_is_checked():
    async def run(args):
        return "ran"

    out = validated("t", CLOSED, run)
    assert asyncio.iscoroutinefunction(out)
    assert asyncio.run(out({"a": 1})) == "ran"
    assert asyncio.run(out({"a": "x"}))["is_error"] is True


def test_with_execute_swaps_the_handler_and_keeps_the_compiled_check():
    t = tool("t", "d", CLOSED, lambda a: "old")
    t2 = with_execute(t, lambda a: f"new {a['a']}")
    assert t2["execute"]({"a": 2}) == tool_result("new 2")
    assert t2["execute"]({"a": "x"}) == tool_result(
        "Invalid arguments for tool 't': a: expected integer, got string \"x\"", True
    )
    assert t2["execute"].__checker__ is t["execute"].__checker__
    assert t2["execute"].__schema__ is t["input_schema"]
    assert t2.remove("execute") == t.remove("execute")
    assert with_execute(t, _raise)["execute"]({"a": 1})["output"] == "ValueError: bad city"


def test_with_execute_uses_an_already_wrapped_handler_as_it_is():
    def pre(args):
        return "pre"

    pre.__wrapped__ = _raise
    t = with_execute(tool("t", "", None, lambda a: "x"), pre)
    assert t["execute"] is pre


# ---- schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hint, schema",
    [
        (datetime.datetime, {"type": "string", "format": "date-time"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (datetime.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (pathlib.Path, {"type": "string"}),
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list, {"type": "array"}),
        (tuple, {"type": "array"}),
        (set, {"type": "array"}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (set[str], {"type": "array", "items": {"type": "string"}}),
        (frozenset[bool], {"type": "array", "items": {"type": "boolean"}}),
        (dict, {"type": "object"}),
        (dict[str, int], {"type": "object"}),
        (Mapping, {"type": "object"}),
        (Mapping[str, int], {"type": "object"}),
        (bytes, {}),
        (typing.Any, {}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007, UP045
        (int | None, {"type": ["integer", "null"]}),
        (Optional[typing.Any], {}),  # noqa: UP007, UP045
        (
            Optional[Union[int, str]],  # noqa: UP007, UP045
            {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
        ),
        (Optional[list[int]], {"type": ["array", "null"], "items": {"type": "integer"}}),  # noqa: UP007, UP045
        (typing.Literal[1, "a"], {"enum": [1, "a"]}),
        (typing.Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (
            Optional[typing.Literal["c", "f"]],  # noqa: UP007, UP045
            {"type": ["string", "null"], "enum": ["c", "f", None]},
        ),
    ],
)
def test_the_schema_of_each_hint(hint, schema):
    # typing.Union / Optional on purpose (not only `X | Y`): both kinds of union are read.
    assert schema_for(hint) == schema


def test_a_formatted_schema_is_a_fresh_copy_each_time():
    a = schema_for(uuid.UUID)
    a["format"] = "changed"
    assert schema_for(uuid.UUID) == {"type": "string", "format": "uuid"}


class Color(enum.Enum):
    RED = "r"
    ONE = 1


class Size(enum.IntEnum):
    S = 1
    M = 2


def test_an_enum_class_is_its_values():
    assert schema_for(Color) == {"enum": ["r", 1]}
    assert schema_for(Size) == {"type": "integer", "enum": [1, 2]}


def test_a_literal_with_none_accepts_null():
    # Was {"type": "string", "enum": ["a", None]}: a tool refused the null it declared.
    assert schema_for(typing.Literal["a", None]) == {"enum": ["a", None]}

    @define_tool
    def f(x: typing.Literal["a", None]) -> str:
        return repr(x)

    assert f["execute"]({"x": None}) == tool_result("None")


def test_a_literal_of_int_enum_members_is_typed_by_their_json_type():
    # Was {"type": "string", ...}: an IntEnum member travels as its number, refused.
    assert schema_for(typing.Literal[Size.S, Size.M]) == {"type": "integer", "enum": [1, 2]}
    assert schema_for(typing.Literal[True, 1]) == {"enum": [True, 1]}  # bool is not integer

    @define_tool
    def f(x: typing.Literal[Size.M]) -> str:
        return repr(x)

    assert f["execute"]({"x": 2}) == tool_result("2")


def test_a_literal_of_none_is_null():
    assert schema_for(typing.Literal[None]) == {"type": "null", "enum": [None]}


def test_a_nullable_schema_with_a_list_of_types_or_more_than_an_anyof_is_wrapped():
    two = {"type": ["integer", "string"]}
    assert _nullable(two) == {"anyOf": [two, {"type": "null"}]}
    described = {"anyOf": [{"type": "integer"}], "description": "d"}
    assert _nullable(described) == {"anyOf": [described, {"type": "null"}]}
    typed = {"type": "string", "anyOf": [{"enum": ["a"]}]}
    assert _nullable(typed) == {"anyOf": [typed, {"type": "null"}]}
    assert _nullable({"type": "integer", "minimum": 1}) == {
        "type": ["integer", "null"],
        "minimum": 1,
    }


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0
    tags: list[str] = dataclasses.field(default_factory=list)
    hidden: int = dataclasses.field(default=0, init=False)


class Query(TypedDict, total=False):
    q: Required[str]
    n: int


class Filter(TypedDict):
    kind: str
    limit: NotRequired[int]


def test_a_dataclass_is_a_closed_object_of_its_init_fields():
    assert schema_for(Point) == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_a_typeddict_s_required_keys():
    assert schema_for(Query) == {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    assert schema_for(Filter)["required"] == ["kind"]


def test_a_record_without_required_fields_has_no_required_list():
    @dataclasses.dataclass
    class Opt:
        a: int = 1

    assert schema_for(Opt) == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": False,
    }


# ---- define_tool -------------------------------------------------------------------------


def test_an_inferred_schema_skips_host_and_variadic_parameters():
    def f(a, b: int | None, c: int = 1, *rest, _resume=None, **more) -> str:
        """

        First line.
        More."""
        return "x"

    t = define_tool(f)
    assert t["input_schema"] == {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": ["integer", "null"]},
            "c": {"type": "integer"},
        },
        "required": ["a"],
    }
    assert t["description"] == "First line."


def test_parameters_after_skipped_ones_are_read_and_a_generic_of_none_is_required():
    def f(_ctx, a: typing.List[None], *rest, b: int = 1, **more) -> str:  # noqa: UP006
        return "x"

    assert define_tool(f)["input_schema"] == {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {}}, "b": {"type": "integer"}},
        "required": ["a"],
    }


def test_an_inferred_schema_with_nothing_required_has_no_required_list():
    def f(a: int = 1) -> str:
        return "x"

    assert define_tool(f)["input_schema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
    }
    assert define_tool(f)["description"] == ""


def test_define_tool_s_overrides_as_a_decorator():
    schema = {"type": "object", "properties": {"z": {"type": "string"}}}

    @define_tool(name="other", description="", input_schema=schema)
    def f(z: int) -> str:
        """Not this."""
        return z

    assert f["name"] == "other" and f["description"] == ""
    assert f["input_schema"] == schema
    assert f["execute"]({"z": "s"}) == tool_result("s")


def test_unknown_arguments_are_an_error_naming_them_and_the_parameters():
    def f(a: int) -> str:
        return str(a)

    r = define_tool(f)["execute"].__wrapped__
    with pytest.raises(TypeError) as e:
        r({"a": 1, "z": 2, "y": 3})
    assert str(e.value) == "unexpected argument(s) ['z', 'y']; expected ['a']"


def test_resume_reaches_only_a_function_that_declares_it():
    def plain(a: int) -> str:
        return str(a)

    def wants(a: int, _resume=None) -> str:
        return f"{a} {_resume}"

    def any_kw(a: int, **kw) -> str:
        return f"{a} {sorted(kw)}"

    args = {"a": 1, "_resume": "R"}
    assert define_tool(plain)["execute"](args) == tool_result("1")
    assert define_tool(wants)["execute"](args) == tool_result("1 R")
    assert define_tool(any_kw)["execute"]({**args, "b": 2}) == tool_result("1 ['_resume', 'b']")
    assert args == {"a": 1, "_resume": "R"}  # the caller's map untouched


def test_an_async_function_s_tool_is_async_with_its_arguments():
    async def f(a: int, _resume=None) -> str:
        return f"{a} {_resume}"

    t = define_tool(f)
    assert asyncio.iscoroutinefunction(t["execute"])
    assert asyncio.run(t["execute"]({"a": 3, "_resume": "R"})) == tool_result("3 R")
    assert asyncio.run(t["execute"]({"a": 3, "b": 1}))["output"].startswith("TypeError: unexpected")
