"""The APIs' rules kept at the source (issue 24, item 4): tool names, a forced tool_choice,
optional parameters, tool values, replayed Anthropic blocks, tool ids unique in a turn.

Each request the runs send is also checked against the provider's published request
schema (tests/data/specs), besides the fake provider's own rules.
"""

from __future__ import annotations

import json
import re
from typing import Optional

import pytest
from dialect_kit import STYLES, calls, covers, results, sent
from hypothesis import given
from hypothesis import strategies as st
from published import available, spec_problems
from pyrsistent import pvector

from toolnexus import create_client, define_tool, http_tool, image, run, text, tool, toolkit
from toolnexus.core.frozen import FrozenMap, freeze, thaw
from toolnexus.core.tool import NAME_RULE, tool_output
from toolnexus.core.wire import view
from toolnexus.core.wire.common import unique_id
from toolnexus.skills import skill_tool
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

needs_specs = pytest.mark.skipif(
    not available(), reason="jsonschema is not installed (pip install -e '.[test]')"
)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _client(fp, style: str, **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", **options)


def _bodies(fp) -> list[dict]:
    return [r["body"] for r in fp.requests]


def _check_specs(fp, style: str) -> None:
    if not available():
        return
    for body in _bodies(fp):
        assert spec_problems(body, style) == []


# ---- tool names -----------------------------------------------------------------------

BAD_NAMES = ["weather.get", "get weather", "x" * 65, "naïve", "", "a/b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_tool_name_outside_the_rule_is_refused_with_the_rule(name):
    with pytest.raises(ValueError, match=re.escape("^[a-zA-Z0-9_-]{1,64}$")):
        tool(name, "", None, lambda a: "x")
    with pytest.raises(ValueError, match=re.escape("^[a-zA-Z0-9_-]{1,64}$")):
        define_tool(lambda: "x", name=name)
    with pytest.raises(ValueError, match=re.escape("^[a-zA-Z0-9_-]{1,64}$")):
        http_tool(
            name=name, description="d", method="GET", url="https://example.com/x", input_schema=None
        )


def test_the_library_s_own_tools_keep_the_rule():
    assert NAME_RULE.fullmatch(skill_tool([])["name"])
    assert define_tool(lambda: "x", name="get_weather-2")["name"] == "get_weather-2"


@given(st.text(max_size=70))
def test_property_a_name_is_accepted_exactly_when_it_matches_the_rule(name):
    ok = re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) is not None
    try:
        tool(name, "", None, lambda a: "x")
    except ValueError as e:
        assert not ok and "^[a-zA-Z0-9_-]{1,64}$" in str(e)
    else:
        assert ok


# ---- a forced tool_choice -------------------------------------------------------------

# Each API's own words for "call add" and "call a tool", then for "auto": facts of the
# APIs no record states, so a table, checked to cover every row of the registry.
_GEMINI_ANY = {"functionCallingConfig": {"mode": "ANY"}}
FORCED = covers({
    "openai": ("tool_choice", [{"type": "function", "function": {"name": "add"}}, "required"],
               "auto"),
    "anthropic": ("tool_choice", [{"type": "tool", "name": "add"}, {"type": "any"}],
                  {"type": "auto"}),
    "responses": ("tool_choice", [{"type": "function", "name": "add"}, "required"], "auto"),
    "gemini": ("toolConfig", [
        {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}},
        _GEMINI_ANY], {"functionCallingConfig": {"mode": "AUTO"}}),
}, "FORCED")  # fmt: skip


@define_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("which", [0, 1])
def test_a_forced_tool_choice_applies_to_the_first_turn_only(style, which):
    key, choices, auto = FORCED[style]
    forced = choices[which]
    script = [tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("3")]
    with fake_provider(script) as fp:
        c = _client(fp, style, request_params={key: forced})
        r = run(c, "1+2?", toolkit=toolkit(add))
    assert r["status"] == "done" and r["text"] == "3"
    first, second = _bodies(fp)
    assert first[key] == forced
    assert second[key] == auto
    _check_specs(fp, style)


def test_anthropic_s_auto_keeps_disable_parallel_tool_use():
    forced = {"type": "any", "disable_parallel_tool_use": True}
    script = [tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("3")]
    with fake_provider(script) as fp:
        run(_client(fp, "anthropic", request_params={"tool_choice": forced}), "1+2?",
            toolkit=toolkit(add))  # fmt: skip
    assert _bodies(fp)[1]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_each_run_starts_forced_again():
    forced = {"type": "tool", "name": "add"}
    script = [tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("3")] * 2
    with fake_provider(script) as fp:
        c = _client(fp, "anthropic", request_params={"tool_choice": forced})
        r = run(c, "1+2?", toolkit=toolkit(add))
        run(c, "and again?", toolkit=toolkit(add), history=r["messages"])
    assert [b["tool_choice"] for b in _bodies(fp)] == [forced, FORCED["anthropic"][2]] * 2


# ---- Optional parameters accept null --------------------------------------------------


@define_tool
def forecast(city: str, days: Optional[int] = None, unit: Optional[str] = None) -> str:  # noqa: UP045
    """Forecast for a city."""
    return f"{city}:{days}:{unit}"


@pytest.mark.parametrize("style", STYLES)
def test_an_optional_parameter_accepts_the_null_a_strict_model_sends(style):
    args = {"city": "Oslo", "days": None, "unit": None}
    script = [tool_calls_reply(("forecast", args)), text_reply("ok")]
    with fake_provider(script) as fp:
        r = run(_client(fp, style), "weather?", toolkit=toolkit(forecast))
    (call,) = r["tool_calls"]
    assert (call["is_error"], call["output"]) == (False, "Oslo:None:None")
    props = forecast["input_schema"]["properties"]
    assert thaw(props["days"]) == {"type": ["integer", "null"]}
    _check_specs(fp, style)


def test_optional_still_checks_its_type():
    bad = forecast["execute"](FrozenMap({"city": "Oslo", "days": "three"}))
    assert bad["is_error"] and "days: expected integer or null" in bad["output"]


# ---- tool values ----------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_a_tool_returning_library_values_sends_json_never_a_repr(style):
    value = FrozenMap({"temps": pvector([1, 2]), "unit": "c", "ok": True, "none": None})
    t = tool("temps", "Temperatures.", None, lambda a: value)
    script = [tool_calls_reply(("temps", {})), text_reply("ok")]
    with fake_provider(script) as fp:
        r = run(_client(fp, style), "temps?", toolkit=toolkit(t))
    said = json.dumps(_bodies(fp)[1])
    assert "FrozenMap(" not in said and "pvector(" not in said
    assert json.loads(r["tool_calls"][0]["output"]) == thaw(value)
    _check_specs(fp, style)


def _chart(a):
    return [text("the chart:"), image(PNG, mime_type="image/png", name="chart.png")]


def test_a_tool_returning_parts_gives_anthropic_tool_result_blocks():
    t = tool("chart", "Draw a chart.", None, _chart)
    script = [tool_calls_reply(("chart", {})), text_reply("a chart")]
    with fake_provider(script) as fp:
        r = run(_client(fp, "anthropic"), "chart?", toolkit=toolkit(t))
    assert r["status"] == "done"
    last = _bodies(fp)[1]["messages"][-1]
    (result,) = last["content"]
    assert result["type"] == "tool_result"
    assert [b["type"] for b in result["content"]] == ["text", "image"]
    assert result["content"][0]["text"] == "the chart:"
    assert result["content"][1]["source"]["media_type"] == "image/png"
    _check_specs(fp, "anthropic")


def test_a_tool_returning_parts_gives_openai_text_then_the_media_in_a_user_message():
    t = tool("chart", "Draw a chart.", None, _chart)
    script = [tool_calls_reply(("chart", {}), ("add", {"a": 1, "b": 1})), text_reply("ok")]
    with fake_provider(script) as fp:
        run(_client(fp, "openai"), "chart?", toolkit=toolkit(t, add))
    messages = _bodies(fp)[1]["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "tool", "tool", "user"]  # media after both results
    assert messages[2]["content"].startswith("the chart:\n[image chart.png (image/png)")
    assert messages[3]["content"] == "2"
    media = messages[4]["content"]
    assert media[0]["type"] == "text" and "chart" in media[0]["text"]
    assert media[1]["type"] == "image_url"
    assert media[1]["image_url"]["url"].startswith("data:image/png;base64,")
    _check_specs(fp, "openai")


json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip


@given(json_data, st.booleans())
def test_property_data_becomes_json_text_that_reads_back_equal(value, frozen):
    given_value = freeze(value) if frozen else value
    out = tool_output(given_value)
    if isinstance(value, str):
        assert out == value
    else:
        assert isinstance(out, str) and json.loads(out) == value


@given(st.lists(st.sampled_from(["text", "image"]), min_size=1, max_size=4))
def test_property_parts_stay_parts(kinds):
    parts = [text("t") if k == "text" else image(PNG, mime_type="image/png") for k in kinds]
    out = tool_output(parts)
    assert [p["type"] for p in out] == kinds


# ---- replayed Anthropic blocks are cut to their request shape -------------------------

CITATION = {
    "type": "char_location", "cited_text": "The grass is green.", "document_index": 0,
    "document_title": "Facts", "start_char_index": 0, "end_char_index": 19,
    "file_id": "file_011CNha8iCJcU1wXNR6q4V8w",
}  # fmt: skip


def _anthropic_answer(content, stop="end_turn"):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 3}}  # fmt: skip


def test_whitespace_text_and_response_only_citation_fields_are_not_replayed():
    answer = _anthropic_answer([
        {"type": "text", "text": "\n\n"},
        {"type": "text", "text": "Grass is green.", "citations": [CITATION]},
        {"type": "text", "text": "  "},
    ])  # fmt: skip
    with fake_provider([{"response": answer}, text_reply("yes")]) as fp:
        c = _client(fp, "anthropic")
        r = run(c, "colour of grass?")
        run(c, "sure?", history=r["messages"])
    assert r["text"].strip() == "Grass is green."
    replayed = _bodies(fp)[1]["messages"][1]
    (block,) = replayed["content"]
    assert block["text"] == "Grass is green."
    (citation,) = block["citations"]
    assert "file_id" not in citation
    assert citation == {k: v for k, v in CITATION.items() if k != "file_id"}
    _check_specs(fp, "anthropic")


def test_a_stored_transcript_with_old_blocks_is_cut_when_loaded():
    stored = [
        {"role": "user", "content": "colour of grass?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": " "},
            {"type": "text", "text": "Green.", "citations": [CITATION]}]},
    ]  # fmt: skip
    with fake_provider([text_reply("yes")]) as fp:
        run(_client(fp, "anthropic"), "sure?", history=stored)
    (block,) = _bodies(fp)[0]["messages"][1]["content"]
    assert "file_id" not in block["citations"][0]
    _check_specs(fp, "anthropic")


# ---- tool ids unique within a turn ----------------------------------------------------


def _echo(a):
    return f"n={a['n']}"


ECHO = tool("echo", "Echo n.", {"type": "object", "properties": {"n": {"type": "integer"}}},
            _echo)  # fmt: skip


@pytest.mark.parametrize("style", STYLES)
def test_two_calls_sharing_an_id_go_out_distinct_and_paired_in_order(style):
    twice = [{"id": "call_1", "name": "echo", "arguments": {"n": 1}},
             {"id": "call_1", "name": "echo", "arguments": {"n": 2}}]  # fmt: skip
    with fake_provider([tool_calls_reply(*twice), text_reply("done")]) as fp:
        r = run(_client(fp, style), "echo twice", toolkit=toolkit(ECHO))
    assert [c["output"] for c in r["tool_calls"]] == ["n=1", "n=2"]
    ids = [c["id"] for c in r["tool_calls"]]
    assert len(set(ids)) == 2 and ids[0] == "call_1"
    items = sent(_bodies(fp)[1])
    assert [i for i, _ in calls(items)] == ids
    assert results(items) == [(ids[0], "n=1"), (ids[1], "n=2")]
    _check_specs(fp, style)


@given(st.lists(st.sampled_from(["a", "b", "call_1", "x" * 40, "call_1_2"]), max_size=8))
def test_property_unique_ids_are_distinct_and_change_only_repeats(ids):
    taken: set = set()
    out = [unique_id(i, taken) for i in ids]
    assert len(set(out)) == len(out) and all(len(o) <= 40 for o in out)
    assert out[:1] == ids[:1]
    if len(set(ids)) == len(ids):
        assert out == ids  # nothing repeated: every id as sent


DUPLICATED = [
    {"role": "user", "content": "echo twice"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"n": 1}'}},
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"n": 2}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "n=1"},
    {"role": "tool", "tool_call_id": "c1", "content": "n=2"},
    {"role": "assistant", "content": "done"},
]  # fmt: skip


@pytest.mark.parametrize("style", STYLES)
def test_a_stored_turn_sharing_an_id_is_remapped_in_order(style):
    with fake_provider([text_reply("ok")]) as fp:
        run(_client(fp, style), "again", toolkit=toolkit(ECHO), history=DUPLICATED)
    items = sent(_bodies(fp)[0])
    ids = [i for i, _ in calls(items)]
    assert len(set(ids)) == 2 and ids[0] == "c1"
    assert results(items) == [(ids[0], "n=1"), (ids[1], "n=2")]
    _check_specs(fp, style)


def _images(items) -> int:
    """How many images the neutral items carry, in prompts, answers and results (whose
    blocks are their dialect's own: read by the view)."""
    parts = [p for i in items if i[0] in ("user", "assistant") and not isinstance(i[1], str)
             for p in i[1]]  # fmt: skip
    parts += [view.content_part(b) for i in items if i[0] == "result"
              and not isinstance(i[2], str) for b in i[2]]  # fmt: skip
    return sum(1 for p in parts if p.get("type") == "image")


@pytest.mark.parametrize("first, then", [(a, b) for a in STYLES for b in STYLES if a != b])
def test_a_tool_s_image_survives_a_switch_of_dialect(first, then):
    t = tool("chart", "Draw a chart.", None, _chart)
    script = [tool_calls_reply(("chart", {})), text_reply("a chart"), text_reply("still")]
    with fake_provider(script) as fp:
        r = run(_client(fp, first), "chart?", toolkit=toolkit(t))
        run(_client(fp, then), "and now?", toolkit=toolkit(t), history=r["messages"])
    last = _bodies(fp)[-1]
    assert _images(sent(last)) == 1
    assert "the chart:" in json.dumps(last)
    if available():
        styles = (first, first, then)
        assert [spec_problems(b, s) for b, s in zip(_bodies(fp), styles, strict=True)] == [[]] * 3


def test_a_hand_built_tool_map_keeps_the_rule_when_registered():
    with pytest.raises(ValueError, match=re.escape("^[a-zA-Z0-9_-]{1,64}$")):
        toolkit({"name": "weather.get", "description": "", "input_schema": {"type": "object"},
                 "execute": lambda a: "x", "source": "function"})  # fmt: skip


def test_a_streamed_answer_is_cut_to_its_request_shape_too():
    from toolnexus.core.wire import anthropic as A

    def event(kind, **data):
        return {"event": kind, "data": json.dumps({"type": kind, **data})}

    events = [
        event("message_start", message={"model": "m", "usage": {"input_tokens": 3}}),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": " \n"}),
        event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        event("content_block_delta", index=1, delta={"type": "citations_delta",
                                                     "citation": CITATION}),
        event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Green."}),
        event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2}),
        event("message_stop"),
    ]  # fmt: skip
    acc = A.stream_start()
    for e in events:
        acc, _ = A.stream_event(acc, e)
    (block,) = A.stream_turn(acc)["message"]["content"]
    assert block["text"] == "Green." and "file_id" not in block["citations"][0]
