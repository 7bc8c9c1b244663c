"""The TypedDicts of toolnexus.types say what the verbs really return: every key a run's
result, usage, tool call and stream event holds is declared, and every required key is
there (over real HTTP: thinking, refusal, cache and reasoning details, sync and async)."""

from __future__ import annotations

import asyncio
import typing

import pytest
from dialect_kit import STYLES, covers

from toolnexus import aask, arun, astream, create_client, define_tool, run, stream
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.types import RunResult, StreamEvent, ToolCall, Usage


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


EVENT_TYPES = {
    typing.get_args(typing.get_type_hints(t)["type"])[0]: t for t in typing.get_args(StreamEvent)
}  # "text" -> TextEvent, ...
CALL = {"name": "add", "arguments": {"a": 1, "b": 2}}
SCRIPTS = {
    "openai": [
        tool_calls_reply(CALL, reasoning_content="Adding.", raw_usage={
            "prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13,
            "prompt_tokens_details": {"cached_tokens": 3},
            "completion_tokens_details": {"reasoning_tokens": 2}}),
        {"refusal": "I can't help with that."},
    ],
    "anthropic": [
        tool_calls_reply(CALL, thinking=[{"thinking": "Add them.", "signature": "s"}],
                         raw_usage={"input_tokens": 5, "output_tokens": 7,
                                    "cache_read_input_tokens": 40,
                                    "cache_creation_input_tokens": 6}),
        text_reply("3"),
    ],
    "responses": [
        tool_calls_reply(CALL, reasoning=[{"summary": "Adding.", "encrypted_content": "e"}],
                         raw_usage={"input_tokens": 9, "output_tokens": 4, "total_tokens": 13,
                                    "input_tokens_details": {"cached_tokens": 3},
                                    "output_tokens_details": {"reasoning_tokens": 2}}),
        {"refusal": "I can't help with that."},
    ],
    "gemini": [
        tool_calls_reply(CALL, thinking=[{"thinking": "Add them."}],
                         raw_usage={"promptTokenCount": 9, "candidatesTokenCount": 4,
                                    "totalTokenCount": 15, "cachedContentTokenCount": 3,
                                    "thoughtsTokenCount": 2}),
        text_reply("3"),  # its refusal is an ending (SAFETY), as Anthropic's: no field streams
    ],
}  # fmt: skip
# Each provider's own usage and reasoning shapes (and a refusal where the API streams one
# as its own field): a table, checked to cover the registry.
covers(SCRIPTS, "SCRIPTS")


def fits(value, shape) -> None:
    keys = set(value)
    assert shape.__required_keys__ <= keys, (
        f"{shape.__name__} misses {shape.__required_keys__ - keys}"
    )
    declared = shape.__required_keys__ | shape.__optional_keys__
    assert keys <= declared, f"{shape.__name__} does not declare {keys - declared}"


def fits_result(r) -> None:
    fits(r, RunResult)
    fits(r["usage"], Usage)
    for c in r["tool_calls"]:
        fits(c, ToolCall)


def fits_events(events) -> set[str]:
    for e in events:
        fits(e, EVENT_TYPES[e["type"]])
    fits_result(events[-1]["result"])
    return {e["type"] for e in events}


def client(fp, style):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k")


@pytest.mark.parametrize("style", STYLES)
def test_sync_results_and_events_fit_their_types(style):
    with fake_provider(SCRIPTS[style] * 2) as fp:
        r = run(client(fp, style), "q", toolkit=[add])
        events = list(stream(client(fp, style), "q", toolkit=[add]))
    fits_result(r)
    assert set(r["usage"]) > set(Usage.__required_keys__)  # the details were reported
    kinds = fits_events(events)
    assert {"thinking", "tool_call", "tool_result", "usage", "done"} <= kinds
    assert ("refusal" in kinds) == any("refusal" in reply for reply in SCRIPTS[style])


@pytest.mark.parametrize("style", STYLES)
def test_async_results_and_events_fit_their_types(style):
    async def main():
        c = client(fp, style)
        r = await arun(c, "q", toolkit=[add])
        events = [e async for e in astream(c, "q", toolkit=[add])]
        return r, events, await aask(c, "q")

    with fake_provider([*SCRIPTS[style] * 2, text_reply("hi")]) as fp:
        r, events, asked = asyncio.run(main())
    fits_result(r)
    fits_result(asked)
    assert "done" in fits_events(events)
