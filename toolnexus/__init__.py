"""toolnexus: the tool-calling loop of any OpenAI-style or Anthropic-style endpoint, as values.

The core (client, tools, toolkits) loads with the package; the async driver, skills,
HTTP tools and the message log load on first use, so `import toolnexus` stays light.
"""

from .client import (
    ask,
    clear_chat_history,
    conversation,
    conversation_store,
    create_client,
    create_in_process_client,
    get_chat_history,
    metrics,
    run,
    stream,
)
from .core.errors import ProviderError, RunCancelledError, RunTimeoutError
from .core.tool import define_tool, execute_tool, sanitize, tool, tool_result
from .core.toolkit import execute, register, to_anthropic, to_gemini, to_openai, tool_names
from .toolkit import toolkit

# Public names loaded on first access: name -> submodule.
_LAZY = {
    "aask": "drivers.aio",
    "arun": "drivers.aio",
    "astream": "drivers.aio",
    "chat_history_tool": "history.tool",
    "http_tool": "http_tool",
    "list_skills": "skills",
    "skills_prompt": "skills",
    # content part constructors
    "audio": "parts",
    "audio_url": "parts",
    "file": "parts",
    "file_url": "parts",
    "image": "parts",
    "image_url": "parts",
    "text": "parts",
}

__all__ = [
    "ProviderError",
    "RunCancelledError",
    "RunTimeoutError",
    "aask",
    "arun",
    "ask",
    "astream",
    "audio",
    "audio_url",
    "chat_history_tool",
    "clear_chat_history",
    "conversation",
    "conversation_store",
    "create_client",
    "create_in_process_client",
    "define_tool",
    "execute",
    "execute_tool",
    "file",
    "file_url",
    "get_chat_history",
    "http_tool",
    "image",
    "image_url",
    "list_skills",
    "metrics",
    "register",
    "run",
    "sanitize",
    "skills_prompt",
    "stream",
    "text",
    "to_anthropic",
    "to_gemini",
    "to_openai",
    "tool",
    "tool_names",
    "tool_result",
    "toolkit",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
