"""Pure wire codecs, one module per dialect; `DIALECTS` is the table the loop reads."""

from types import MappingProxyType

from . import anthropic, gemini, openai, responses

__all__ = ["DIALECTS", "openai", "anthropic", "responses", "gemini"]

# Dialects as data: the loop looks up small functions here instead of branching on style.
DIALECTS = MappingProxyType(
    {"openai": openai, "anthropic": anthropic, "responses": responses, "gemini": gemini}
)
