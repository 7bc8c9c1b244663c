"""The rules of core/toolkit.py no other test asserts: an empty toolkit's fields, provider
tools refused or copied read-only, what counts as a tool map, the wire entries kept or
rebuilt when a tool is added next to provider tools, each adapter's provider tools, and
the unknown tool's message."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from pyrsistent import pvector

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.tool import tool
from toolnexus.core.toolkit import (
    EMPTY,
    UNKNOWN_TOOL,
    execute,
    provider_tool,
    register,
    to_anthropic,
    to_openai,
    toolkit,
)

ONE = tool("one", "One.", None, lambda a: "1")
TWO = tool("two", "Two.", None, lambda a: "2")
ANY = provider_tool({"type": "web_search", "name": "search"})
ANTHROPIC = provider_tool({"type": "code_execution_20250522", "name": "code"}, style="anthropic")
OPENAI = provider_tool({"type": "file_search", "name": "files"}, style="openai")


def test_an_empty_toolkit_and_the_unknown_tool_s_name():
    assert toolkit() == EMPTY.update(
        {"wire": toolkit()["wire"], "wire_json": toolkit()["wire_json"]}
    )
    assert set(EMPTY) == {"tools", "index", "skills", "native", "wire", "wire_json"}
    assert EMPTY["skills"] == pvector() and EMPTY["native"] == pvector()
    assert UNKNOWN_TOOL == "_unknown"


def test_a_function_or_custom_declaration_is_no_provider_tool():
    for kind in ("function", "custom"):
        with pytest.raises(ValueError, match="^a function tool is ours to run: declare it with"):
            provider_tool({"type": kind})


def test_a_provider_tool_is_copied_read_only_at_every_depth():
    t = provider_tool({"type": "x", "cfg": [{"a": [1]}], "top": {"b": 2}})
    decl = t["provider_tool"]
    assert isinstance(decl, MappingProxyType) and isinstance(decl["top"], MappingProxyType)
    assert isinstance(decl["cfg"], tuple) and isinstance(decl["cfg"][0], MappingProxyType)
    assert decl["cfg"][0]["a"] == (1,)


def test_a_tool_map_is_kept_as_a_pmap_and_a_map_without_execute_refused():
    plain = {"name": "plain", "description": "P.", "input_schema": {"type": "object"},
             "execute": lambda a: "ok"}  # fmt: skip
    tk = toolkit(plain)
    assert isinstance(tk["index"]["plain"], FrozenMap) and execute(tk, "plain", {}) == "ok"
    with pytest.raises(ValueError, match=r"^not a tool map \(missing description, "):
        toolkit({"name": "x"})
    with pytest.raises(ValueError, match=r"^not a tool map \(needs name, description, "):
        toolkit(["not", "a", "map"])
    # a map with both provider_tool and execute is ours to run
    both = {**plain, "name": "both", "execute": lambda a: "ran", "provider_tool": {"type": "x"}}
    assert execute(toolkit(both), "both", {}) == "ran"


def test_a_toolkit_without_wire_entries_gets_them():
    bare = EMPTY.remove("wire").remove("wire_json")
    assert register(bare, ONE)["wire"] == toolkit(ONE)["wire"]


@pytest.mark.parametrize(
    "before",
    [(ONE,), (ONE, ANY), (ONE, ANY, ANTHROPIC), (ONE, ANTHROPIC, OPENAI), (ANY,), ()],
)
def test_adding_a_tool_gives_the_entries_of_a_toolkit_built_at_once(before):
    added = register(toolkit(*before), TWO)
    whole = toolkit(*before, TWO)
    assert added["wire"] == whole["wire"] and added["wire_json"] == whole["wire_json"]


def test_each_adapter_sends_the_provider_tools_of_its_style_only():
    tk = toolkit(ONE, ANY, ANTHROPIC, OPENAI)
    assert [t.get("name") for t in to_openai(tk)[1:]] == ["search", "files"]
    assert [t.get("name") for t in to_anthropic(tk)[1:]] == ["search", "code"]


def test_an_unknown_tool_lists_what_there_is():
    out = execute(None, "x", {})
    assert out["is_error"] and out["output"] == "Unknown tool 'x'. Available tools: (none)"
    assert execute(toolkit(ONE, TWO), "x", {})["output"].endswith("Available tools: one, two")
    assert execute(toolkit(ONE), "one", FrozenMap()) is not None


@pytest.mark.parametrize("before", [(ONE,), (ONE, ANY), (ONE, ANY, ANTHROPIC, OPENAI)])
def test_adding_a_tool_builds_the_entry_of_that_tool_alone(before, monkeypatch):
    from toolnexus.core import toolkit as module

    tk = toolkit(*before)
    built: list = []
    for d, make in list(module._ENTRIES.items()):
        monkeypatch.setitem(
            module._ENTRIES, d, lambda t, make=make, d=d: built.append((d, t["name"])) or make(t)
        )
    register(tk, TWO)
    assert sorted(built) == sorted((d, "two") for d in module._ENTRIES)


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"name": "f", "execute": lambda a: "x"}, "description, input_schema"),
        ({"name": "f", "execute": lambda a: "x", "description": "d"}, "input_schema"),
        ({"name": "f", "execute": lambda a: "x", "input_schema": {}}, "description"),
        ({"name": "f"}, "description, input_schema, execute"),
    ],
)
def test_a_hand_made_tool_map_missing_a_key_is_refused_naming_it(given, missing):
    """Not a KeyError from deep inside register: a ValueError naming what is missing."""
    with pytest.raises(ValueError, match=rf"^not a tool map \(missing {missing}\)"):
        toolkit(given)
