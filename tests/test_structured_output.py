"""Structured output (issue 24, item 6): `output_schema=` on every verb, over the fake
provider: OpenAI's response_format json_schema (strict when the schema allows), Anthropic's
output_config.format; the answer parsed and checked; a misfit is an error, never saved."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import NotRequired, Optional, TypedDict

import pytest
from dialect_kit import covers
from published import available, spec_problems

from toolnexus import (
    OutputError,
    aask,
    arun,
    ask,
    astream,
    conversation,
    conversation_store,
    create_client,
    define_tool,
    run,
    stream,
    toolkit,
)
from toolnexus.core.frozen import thaw
from toolnexus.core.output import output_spec
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

DIALECTS = tuple(sorted(_REGISTRY))  # every row of the dialect registry

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
ANSWER = json.dumps({"city": "Oslo", "temp": 3})


@dataclasses.dataclass
class Weather:
    city: str
    temp: int


@dataclasses.dataclass
class Loose:
    city: str
    note: Optional[str] = None  # noqa: UP045


class Place(TypedDict):
    city: str
    country: NotRequired[str]


def _client(fp, style, **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", **options)


def _check_specs(fp, style):
    if available():
        for r in fp.requests:
            assert spec_problems(r["body"], style) == []


# Where and how each API is asked for an answer in a JSON schema (named "output"): the
# request field and its value, facts of the APIs; a table checked to cover the registry.
ASKED = covers({
    "openai": ("response_format", {"type": "json_schema", "json_schema": {
        "name": "output", "schema": WEATHER, "strict": True}}),
    "anthropic": ("output_config", {"format": {"type": "json_schema", "schema": WEATHER}}),
    "responses": ("text", {"format": {"type": "json_schema", "name": "output",
                                      "schema": WEATHER, "strict": True}}),
    "gemini": ("generationConfig", {"responseMimeType": "application/json",
                                    "responseJsonSchema": WEATHER}),
}, "ASKED")  # fmt: skip


@pytest.mark.parametrize("style", DIALECTS)
def test_a_json_schema_answer_is_asked_for_parsed_and_checked(style):
    with fake_provider([text_reply(ANSWER)]) as fp:
        r = run(_client(fp, style), "weather in Oslo?", output_schema=WEATHER)
    assert thaw(r["output"]) == {"city": "Oslo", "temp": 3}
    field, asked = ASKED[style]
    assert fp.requests[0]["body"][field] == asked
    _check_specs(fp, style)


def test_without_output_schema_output_is_none_and_nothing_is_asked():
    with fake_provider([text_reply("hi")]) as fp:
        r = run(_client(fp, "openai"), "hi")
    assert r["output"] is None and "response_format" not in fp.requests[0]["body"]


def test_a_dataclass_gives_its_schema_strict_when_every_field_is_required():
    spec = output_spec(Weather)
    assert thaw(spec["schema"]) == WEATHER and spec["name"] == "Weather" and spec["strict"]
    loose = output_spec(Loose)
    assert not loose["strict"] and thaw(loose["schema"])["required"] == ["city"]
    assert thaw(loose["schema"])["properties"]["note"] == {"type": ["string", "null"]}


def test_a_typeddict_gives_its_schema():
    schema = thaw(output_spec(Place)["schema"])
    assert schema["required"] == ["city"] and set(schema["properties"]) == {"city", "country"}


@pytest.mark.parametrize("style", DIALECTS)
def test_a_dataclass_schema_goes_out_and_comes_back(style):
    with fake_provider([text_reply(ANSWER)]) as fp:
        r = run(_client(fp, style), "weather?", output_schema=Weather)
    assert r["output"]["temp"] == 3
    field, _ = ASKED[style]
    asked = json.dumps(fp.requests[0]["body"][field])
    assert '"Weather"' in asked or '"name"' not in asked  # named by its class, where named
    _check_specs(fp, style)


def test_a_non_strict_schema_is_sent_with_strict_false():
    with fake_provider([text_reply('{"city": "Oslo"}')]) as fp:
        r = run(_client(fp, "openai"), "weather?", output_schema=Loose)
    assert r["output"]["city"] == "Oslo"
    assert fp.requests[0]["body"]["response_format"]["json_schema"]["strict"] is False
    _check_specs(fp, "openai")


@pytest.mark.parametrize("style", DIALECTS)
def test_an_answer_that_does_not_fit_names_the_field_and_is_not_saved(style):
    bad = json.dumps({"city": "Oslo", "temp": "cold"})
    with fake_provider([text_reply(bad)]) as fp:
        c = _client(fp, style)
        with pytest.raises(OutputError, match=r"output\.temp: expected integer") as e:
            run(c, "weather?", output_schema=WEATHER, conversation_id="w1")
    assert e.value.text == bad
    assert conversation_store(c)["get"]("w1") is None  # not saved as a good turn


@pytest.mark.parametrize(
    "answer, problem",
    [("sunny", "not JSON"), ('{"city": "Oslo"}', "missing required field output.temp"),
     ('{"city": "Oslo", "temp": 3, "x": 1}', "output.x: unexpected")],
)  # fmt: skip
def test_each_kind_of_misfit_is_an_output_error(answer, problem):
    with fake_provider([text_reply(answer)]) as fp:
        with pytest.raises(OutputError, match=problem):
            run(_client(fp, "openai"), "weather?", output_schema=WEATHER)


@define_tool
def temperature(city: str) -> str:
    """Return a city's temperature."""
    return "3"


def test_tools_run_first_and_the_final_answer_is_the_output():
    script = [tool_calls_reply(("temperature", {"city": "Oslo"})), text_reply(ANSWER)]
    with fake_provider(script) as fp:
        r = run(_client(fp, "anthropic"), "weather?", toolkit=toolkit(temperature),
                output_schema=Weather)  # fmt: skip
    assert r["tool_call_count"] == 1 and r["output"]["city"] == "Oslo"
    assert all("output_config" in req["body"] for req in fp.requests)
    _check_specs(fp, "anthropic")


def test_a_bad_output_schema_is_refused_before_anything_is_sent():
    with fake_provider([text_reply(ANSWER)]) as fp:
        with pytest.raises(TypeError, match="output_schema"):
            run(_client(fp, "openai"), "weather?", output_schema=42)
    assert fp.requests == []


@pytest.mark.parametrize("style", DIALECTS)
def test_every_verb_takes_output_schema(style):
    with fake_provider([text_reply(ANSWER, chunk=7)] * 8) as fp:
        c = _client(fp, style)
        outs = [
            ask(c, "q", output_schema=Weather)["output"],
            ask(c, "q", output_schema=Weather, on_text=lambda d: None)["output"],
            [e for e in stream(c, "q", output_schema=Weather)][-1]["result"]["output"],
            asyncio.run(arun(c, "q", output_schema=Weather))["output"],
            asyncio.run(aask(c, "q", output_schema=Weather))["output"],
            conversation(c)["send"]("q", output_schema=Weather)["output"],
        ]

        async def last_event():
            return [e async for e in astream(c, "q", output_schema=Weather)][-1]

        outs.append(asyncio.run(last_event())["result"]["output"])
    assert [thaw(o) for o in outs] == [{"city": "Oslo", "temp": 3}] * 7
    asked = ("response_format", "output_config", "text", "generationConfig")  # each one's way
    assert all(sum(k in r["body"] for k in asked) == 1 for r in fp.requests)
    _check_specs(fp, style)
