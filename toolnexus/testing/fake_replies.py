"""The fake provider's answers (pure): a script's replies as each dialect's whole answer
and as its SSE stream, read off the kit's registry (each dialect's own builders are in
its testing/fake_<name>.py). `fake_provider` serves them; tests build answers with them
too.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .fake_anthropic import anthropic_response, anthropic_stream
from .fake_openai import openai_response, openai_stream
from .registry import FAKES
from .replies import DEFAULT_USAGE, text_reply, tool_calls_reply

__all__ = [
    "DEFAULT_USAGE",
    "RESPONSES",
    "text_reply",
    "tool_calls_reply",
    "openai_response",
    "anthropic_response",
    "openai_stream",
    "anthropic_stream",
    "stream_events",
]

# Each dialect's whole answer of a reply: (reply, model, seq) -> its response body.
RESPONSES = MappingProxyType({name: f.response for name, f in FAKES.items()})


def stream_events(reply: Mapping, body: Mapping, dialect: str, model: str, seq: int) -> list:
    """Return the SSE events (bytes each) a streamed request in `dialect` gets: a recorded
    stream or a profile's as given, else the dialect's own of the reply."""
    if reply.get("sse") is not None:  # a real provider's stream, byte for byte
        raw = reply["sse"]
        return [raw.encode() if isinstance(raw, str) else bytes(raw)]
    if reply.get("sse_events") is not None:  # a profile's stream (testing.profiles)
        return list(reply["sse_events"])
    return FAKES[dialect].stream(reply, body, model, seq)
