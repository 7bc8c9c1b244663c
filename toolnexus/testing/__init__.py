"""The public test kit: a loopback fake provider (and, with the stores, the contract kit)."""

from .fake_provider import (
    FakeProvider,
    anthropic_response,
    fake_provider,
    openai_response,
    text_reply,
    tool_calls_reply,
)

__all__ = [
    "FakeProvider",
    "anthropic_response",
    "fake_provider",
    "openai_response",
    "text_reply",
    "tool_calls_reply",
]
