"""What a chat completions request leaves out where the server refuses it (pure; `openai`
exposes these as its own; see core.flow).

An assistant message keeps every field its provider sent (DeepSeek's `reasoning_content`,
OpenRouter's `reasoning_details`, Gemini's `extra_content` on a call) and gives it back to
the same dialect. A strict server of that dialect (Groq, Mistral, MiniMax, OpenAI's own)
refuses the fields it does not define ("property 'reasoning_content' is unsupported",
"Extra inputs are not permitted"): the flow then asks once more without them
(`omit({"foreign_fields"})`) and remembers it for that endpoint and model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyrsistent import pvector

from ..frozen import FrozenMap
from .common import refusal_text

__all__ = ["omissions", "refused_part", "omit"]

# The assistant message and tool call fields chat completions defines (everything else on
# them is some provider's own).
_MESSAGE = frozenset({"role", "content", "refusal", "name", "audio", "tool_calls", "function_call"})
_CALL = frozenset({"id", "type", "function"})
# The provider fields a refusal names when it refuses them.
_FOREIGN = ("reasoning_content", "reasoning_details", "reasoning", "extra_content", "thinking")
# A refusal that asks for one of them back (DeepSeek: "Missing `reasoning_content` field",
# "must be passed back") is not one to answer by leaving them out.
_WANTED = ("missing", "must be passed back", "required")


def omissions(model: str) -> frozenset:
    """Return what requests to `model` leave out from the start: nothing (each server
    says what it refuses)."""
    return frozenset()


def refused_part(error: Any) -> str | None:
    """Return what a refusal says the request should leave out ("foreign_fields": a 400
    naming a provider's own field of an assistant message), or None.

    >>> from toolnexus.core.errors import ProviderError
    >>> refused_part(ProviderError("property 'reasoning_content' is unsupported", status=400))
    'foreign_fields'
    >>> refused_part(ProviderError("Missing `reasoning_content` field", status=400)) is None
    True
    """
    text = refusal_text(error)
    if text is None:
        return None
    if any(w in text for w in _WANTED) or not any(f in text for f in _FOREIGN):
        return None
    return "foreign_fields"


def _own(message: Mapping) -> Mapping:
    """Return an assistant message with only the fields chat completions defines."""
    calls = message.get("tool_calls")
    if message.keys() <= _MESSAGE and not any(c.keys() - _CALL for c in calls or ()):
        return message
    out = FrozenMap({k: v for k, v in message.items() if k in _MESSAGE})
    if calls:
        calls = [FrozenMap({k: v for k, v in c.items() if k in _CALL}) for c in calls]
        out = out.set("tool_calls", pvector(calls))
    return out


def omit(body: Mapping, names: frozenset) -> Mapping:
    """Return a request body without what `names` says the server refuses (the same
    object when it holds none of it)."""
    messages = body.get("messages")
    if "foreign_fields" not in names or not messages:
        return body
    out = [_own(m) if m.get("role") == "assistant" else m for m in messages]
    if all(map(lambda a, b: a is b, out, messages)):
        return body
    return {**body, "messages": out}
