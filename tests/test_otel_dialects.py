"""OpenTelemetry content capture and provider names read every dialect of the registry
(issue 36): the second chat span of a tool exchange carries the user's prompt, the
model's tool call and the tool's result as GenAI parts, in every dialect, with the SDK's
in-memory exporter over the loopback fake provider."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from toolnexus import create_client, define_tool, otel, run  # noqa: E402
from toolnexus.core.wire import DIALECTS  # noqa: E402
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply  # noqa: E402

# The names the GenAI conventions give each dialect's provider (by its wire format, on a
# host the conventions do not name): Responses is OpenAI's API.
CONVENTION_NAMES = {"openai", "anthropic", "gcp.gemini"}


@pytest.fixture
def spans(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel._api()
    monkeypatch.setitem(otel._state, "tracer", provider.get_tracer("toolnexus"))
    monkeypatch.setenv(otel.CONTENT_ENV, "true")
    yield exporter.get_finished_spans
    provider.shutdown()


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@pytest.mark.parametrize("style", DIALECTS)
def test_a_tool_exchanges_input_messages_in_every_dialect(spans, style):
    script = [tool_calls_reply({"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}),
              text_reply("five")]  # fmt: skip
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", api_key="k")
        run(c, "2+3?", toolkit=[add])
    chats = [s for s in spans() if s.name.startswith("chat ")]
    assert len(chats) == 2
    second = json.loads(chats[1].attributes["gen_ai.input.messages"])
    parts = [p for m in second for p in m["parts"]]
    assert {"type": "text", "content": "2+3?"} in parts
    (call,) = [p for p in parts if p["type"] == "tool_call"]
    assert call["name"] == "add" and call["arguments"] == {"a": 2, "b": 3}
    (answer,) = [p for p in parts if p["type"] == "tool_call_response"]
    assert answer["id"] == call["id"] and answer["response"] == "5"
    # no part is a message's raw JSON dumped as text
    assert not any(p["type"] == "text" and p["content"].startswith(("{", "[")) for p in parts)


@pytest.mark.parametrize("style", DIALECTS)
def test_every_dialects_provider_name_is_one_the_conventions_have(spans, style):
    with fake_provider([text_reply("hi")]) as fp:
        run(create_client(base_url=fp.url, style=style, model="m", api_key="k"), "hi")
    names = {s.attributes.get("gen_ai.provider.name") for s in spans()} - {None}
    assert names and names <= CONVENTION_NAMES, names
