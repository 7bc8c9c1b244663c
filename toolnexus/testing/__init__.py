"""The public test kit: a loopback fake provider that refuses what the real APIs refuse
(the providers' published request schemas when jsonschema is installed, and their
documented rules), and the store contract kit."""

from .fake_provider import (
    FakeProvider,
    anthropic_response,
    fake_provider,
    openai_response,
    text_reply,
    tool_calls_reply,
)
from .fake_responses import responses_response, responses_stream
from .validators import (
    SchemaChecksSkipped,
    schema_problems,
    validate_anthropic_request,
    validate_openai_request,
    validate_request,
    validate_responses_request,
)

__all__ = [
    "FakeProvider",
    "SchemaChecksSkipped",
    "anthropic_response",
    "fake_provider",
    "openai_response",
    "responses_response",
    "responses_stream",
    "text_reply",
    "tool_calls_reply",
    "check_store_contract",
    "store_contract_machine",
    "transcripts",
    "conversation_ids",
    "validate_openai_request",
    "validate_anthropic_request",
    "validate_responses_request",
    "validate_request",
    "schema_problems",
]

# The contract kit needs hypothesis (a test dependency): loaded on first use, so the
# fake provider stays importable without it.
_KIT = {
    "check_store_contract": "contract",
    "store_contract_machine": "contract",
    "transcripts": "strategies",
    "conversation_ids": "strategies",
}


def __getattr__(name: str):
    if name in _KIT:
        import importlib

        return getattr(importlib.import_module(f".{_KIT[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
