"""Tools as maps: schema inference, results, never raising across the boundary."""

from typing import Literal, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import (
    define_tool,
    execute,
    register,
    sanitize,
    to_anthropic,
    to_gemini,
    to_openai,
    tool,
    tool_names,
    tool_result,
    toolkit,
)


def test_define_tool_infers_schema_from_hints_and_docstring():
    @define_tool
    def search(
        query: str,
        limit: int,
        score: float,
        exact: bool,
        tags: list[str],
        opts: dict,
        unit: Literal["c", "f"] = "c",
        page: Optional[int] = None,  # noqa: UP045 - Optional is part of what we infer
        after: int | None = None,
    ) -> str:
        """Search things.

        More text that is not the description.
        """
        return "ok"

    s = search["input_schema"]
    assert search["name"] == "search"
    assert search["description"] == "Search things."
    assert search["source"] == "function"
    props = s["properties"]
    assert props["query"] == {"type": "string"}
    assert props["limit"] == {"type": "integer"}
    assert props["score"] == {"type": "number"}
    assert props["exact"] == {"type": "boolean"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["opts"] == {"type": "object"}
    assert props["unit"] == {"type": "string", "enum": ["c", "f"]}
    assert props["page"] == {"type": ["integer", "null"]}  # Optional: null accepted
    assert list(s["required"]) == ["query", "limit", "score", "exact", "tags", "opts"]


def test_define_tool_overrides_and_plain_call():
    def f(x: int) -> str:
        return str(x * 2)

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    t = define_tool(f, name="double", description="Double it.", input_schema=schema)
    assert (t["name"], t["description"]) == ("double", "Double it.")
    assert t["input_schema"] == schema
    named = define_tool(name="twice")(f)
    assert named["name"] == "twice"


def test_execute_returns_result_maps_and_never_raises():
    @define_tool
    def boom(x: int) -> str:
        """Fail."""
        raise RuntimeError("kaput")

    ok = tool("echo", "Echo.", None, lambda a: a["s"])
    meta = tool("m", "", None, lambda a: tool_result("x", False, {"k": 1}))
    tk = toolkit(boom, ok, meta)
    assert execute(tk, "echo", {"s": "hi"}) == tool_result("hi")
    r = execute(tk, "boom", {"x": 1})
    assert r["is_error"] and "kaput" in r["output"]
    r = execute(tk, "echo", {})  # KeyError inside the tool
    assert r["is_error"]
    r = execute(tk, "nope", {})
    assert r["is_error"] and "boom, echo, m" in r["output"]
    assert execute(tk, "m", {})["metadata"] == {"k": 1}
    r = execute(tk, "boom", {"x": 1, "extra": 2})
    assert r["is_error"] and "extra" in r["output"]


def test_non_string_returns_are_serialized():
    t = tool("j", "", None, lambda a: {"a": [1, 2]})
    assert t["execute"]({})["output"] == '{"a": [1, 2]}'
    assert (
        tool("n", "", None, lambda a: None)["execute"]({})["output"] == "null"
    )  # data as JSON text


def test_toolkit_is_immutable_and_rejects_duplicates():
    a = tool("a", "", None, lambda x: "a")
    b = tool("b", "", None, lambda x: "b")
    tk = toolkit(a)
    tk2 = register(tk, b)
    assert [t["name"] for t in tk["tools"]] == ["a"]
    assert [t["name"] for t in tk2["tools"]] == ["a", "b"]
    with pytest.raises(ValueError, match="duplicate tool name 'a'"):
        register(tk2, a)
    with pytest.raises(ValueError):
        toolkit({"name": "x"})


def test_bad_tool_definitions_are_clear_errors():
    with pytest.raises(ValueError):
        tool("", "", None, lambda a: "")
    with pytest.raises(ValueError):
        tool("x", "", None, "not callable")
    with pytest.raises(ValueError):
        tool("x", "", {"type": "string"}, lambda a: "")


def test_adapters_shapes():
    t = tool("add", "Add.", {"type": "object", "properties": {"a": {"type": "number"}}}, str)
    tk = toolkit(t)
    params = {"type": "object", "properties": {"a": {"type": "number"}}}
    assert to_openai(tk) == [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add.", "parameters": params},
        }
    ]
    assert to_anthropic(tk) == [{"name": "add", "description": "Add.", "input_schema": params}]
    assert to_gemini(tk) == [
        {"functionDeclarations": [{"name": "add", "description": "Add.", "parameters": params}]}
    ]
    assert to_openai(toolkit()) == [] and to_gemini(None) == []


@given(st.text())
def test_sanitize_keeps_only_safe_characters(s):
    out = sanitize(s)
    assert len(out) == len(s)
    assert all(c.isascii() and (c.isalnum() or c in "_-") for c in out)
    assert all(o == c for o, c in zip(out, s, strict=True) if o != "_")


@given(st.lists(st.text(alphabet="abcdef", min_size=1, max_size=4), unique=True, max_size=6),
       st.integers(0, 6), st.integers(0, 6))  # fmt: skip
def test_registering_in_steps_gives_the_toolkit_registering_at_once(names, cut, cut2):
    """Wire entries kept from earlier registrations equal those built from scratch."""
    tools = [tool(n, f"Tool {n}.", None, lambda a: "") for n in names]
    at_once = toolkit(*tools)
    a, b = sorted((min(cut, len(tools)), min(cut2, len(tools))))
    in_steps = register(register(toolkit(*tools[:a]), *tools[a:b]), *tools[b:])
    assert in_steps["wire"] == at_once["wire"] and tool_names(in_steps) == tuple(names)
    assert to_openai(in_steps) == to_openai(at_once)


def test_an_input_schema_without_a_type_goes_out_as_an_object_schema():
    """Anthropic's published schema requires input_schema.type "object": a schema that
    leaves it out (read as an object schema) must say so on the wire, in every dialect."""
    from dialect_kit import STYLES

    from toolnexus import create_client, run, tool, toolkit
    from toolnexus.testing import fake_provider, text_reply

    t = tool(name="lookup", description="Look up.", execute=lambda args: "ok",
             input_schema={"properties": {"q": {"type": "string"}}})  # fmt: skip
    assert t["input_schema"]["type"] == "object"
    for style in STYLES:
        with fake_provider([text_reply("fine")]) as fp:
            c = create_client(base_url=fp.url, style=style, model="m", api_key="k")
            assert run(c, "hi", toolkit=toolkit(t))["text"] == "fine"
