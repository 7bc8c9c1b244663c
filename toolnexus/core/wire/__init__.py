"""Pure wire codecs, one module per dialect; `DIALECTS` is the registry the library reads.

Each row is one declared `Dialect` record (dialect.py says what every field is), checked
whole when registered. Every table per dialect elsewhere is read off these rows; a new
dialect is its codec modules and one row here. The first row is the default style.
"""

from types import MappingProxyType
from typing import Literal

from . import anthropic, chat, gemini, gemini_items, openai, responses, responses_items, writers
from .dialect import Dialect, register

__all__ = ["DIALECTS", "DEFAULT_STYLE", "Style", "Dialect", "HOSTS"]


def _codec(module: object, **own: object) -> dict:
    """Return the fields a codec module defines by their own names, with `own` over them."""
    names = ("url", "headers", "body", "stream_body", "user_message", "user_message_parts",
             "later_params", "with_output", "cache_body", "cache_tools", "tool_entry",
             "encode_tools", "omissions", "omit", "refused_part", "parse_response",
             "stream_start", "stream_event", "stream_turn", "tool_result_messages",
             "replayable", "valid_call_id", "to_part", "from_part")  # fmt: skip
    fields = {n: getattr(module, n) for n in names}
    fields.update(key_env=tuple(module.KEY_ENV), owned_params=tuple(module.OWNED_PARAMS))
    return {**fields, **own}


# The role-and-content shape's reading and algebra, the two chat dialects' alike.
_CHAT = dict(owns=None, read=chat.read, call_ids=chat.call_ids, result_ids=chat.result_ids,
             gathers=chat.gathers, close=chat.close, keep_results=chat.keep_results)  # fmt: skip
# Well-known hosts of OpenAI's wire format and the provider each is (OpenTelemetry's
# gen_ai.provider.name, a best guess, as the conventions ask).
_OPENAI_HOSTS = {"api.openai.com": "openai", "api.deepseek.com": "deepseek",
                 "api.groq.com": "groq", "api.mistral.ai": "mistral_ai", "api.x.ai": "x_ai",
                 "api.perplexity.ai": "perplexity", "api.moonshot.ai": "moonshot_ai"}  # fmt: skip

OPENAI = Dialect(
    name="openai", provider="openai", hosts=MappingProxyType(_OPENAI_HOSTS),
    write=writers.write_openai, native=chat.native_chat, **_CHAT, **_codec(openai),
)  # fmt: skip
ANTHROPIC = Dialect(
    name="anthropic", provider="anthropic",
    hosts=MappingProxyType({"api.anthropic.com": "anthropic"}),
    write=writers.write_anthropic, native=chat.native_blocks, **_CHAT, **_codec(anthropic),
)  # fmt: skip
# Responses is OpenAI's API: the conventions have no provider named after it.
RESPONSES = Dialect(
    name="responses", provider="openai", owns=responses.owns, read=responses_items.read,
    write=writers.write_responses, native=responses_items.native,
    call_ids=responses.call_ids, result_ids=responses.result_ids,
    gathers=responses_items.gathers, close=responses_items.close,
    keep_results=responses_items.keep_results, server_state_body=responses.server_state_body,
    stored=responses.stored, forgotten=responses.forgotten, **_codec(responses),
)  # fmt: skip
GEMINI = Dialect(
    name="gemini", provider="gcp.gemini",
    hosts=MappingProxyType({"generativelanguage.googleapis.com": "gcp.gemini"}),
    owns=gemini.owns, read=gemini_items.items, write=gemini_items.write,
    native=gemini_items.native, call_ids=gemini.call_ids, result_ids=gemini.result_ids,
    gathers=gemini_items.gathers, close=gemini_items.close,
    keep_results=gemini_items.keep_results, model_url=gemini.model_url, **_codec(gemini),
)  # fmt: skip

DIALECTS = register(OPENAI, ANTHROPIC, RESPONSES, GEMINI)
DEFAULT_STYLE = next(iter(DIALECTS))
# The names a client's `style` takes, for type checkers (a test holds it to the registry).
Style = Literal["openai", "anthropic", "responses", "gemini"]
# Every row's well-known hosts: host -> OpenTelemetry provider name.
HOSTS = MappingProxyType({h: p for d in DIALECTS.values() for h, p in d.hosts.items()})
