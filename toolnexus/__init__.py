"""toolnexus: the tool-calling loop of any OpenAI-style or Anthropic-style endpoint, as values.

The core (client, tools, toolkits) loads with the package; the async driver, skills,
HTTP tools and the message log load on first use, so `import toolnexus` stays light.
"""

import typing as _typing

from .api import aask, arun, ask, astream, conversation, forget, run, stream
from .client import (
    Client,
    clear_chat_history,
    close,
    conversation_store,
    create_client,
    create_in_process_client,
    get_chat_history,
    metrics,
)
from .core.errors import ProviderError, RunCancelledError, RunTimeoutError
from .core.genai import from_genai, to_genai
from .core.neutral import from_neutral, to_neutral
from .core.output import OutputError
from .core.retry import failure_kind, provider_fault
from .core.tool import define_tool, execute_tool, sanitize, tool, tool_result
from .core.toolkit import (
    execute,
    provider_tool,
    provider_tools,
    register,
    to_anthropic,
    to_gemini,
    to_openai,
    tool_names,
)
from .core.wire.common import to_json
from .fallback import Fallback, fallback
from .toolkit import toolkit

if _typing.TYPE_CHECKING:  # type checkers see the lazy names below as what they are
    from ._version import __version__ as __version__
    from .display import plain, show
    from .history.tool import chat_history_tool
    from .http_tool import http_tool
    from .skills import list_skills, skills_prompt
    from .types import RunResult, Store, StreamEvent, ToolResult

# Public names loaded on first access: name -> submodule.
_LAZY = {
    "RunResult": "types",
    "Store": "types",
    "StreamEvent": "types",
    "ToolResult": "types",
    "__version__": "_version",  # read from the package metadata only when asked
    "chat_history_tool": "history.tool",
    "http_tool": "http_tool",
    "list_skills": "skills",
    "plain": "display",
    "show": "display",
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
    "Client",
    "Fallback",
    "close",
    "OutputError",
    "ProviderError",
    "failure_kind",
    "provider_fault",
    "RunCancelledError",
    "RunResult",
    "RunTimeoutError",
    "Store",
    "StreamEvent",
    "ToolResult",
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
    "fallback",
    "file",
    "file_url",
    "forget",
    "from_genai",
    "from_neutral",
    "get_chat_history",
    "http_tool",
    "image",
    "image_url",
    "list_skills",
    "metrics",
    "plain",
    "provider_tool",
    "provider_tools",
    "register",
    "run",
    "sanitize",
    "show",
    "skills_prompt",
    "stream",
    "text",
    "to_anthropic",
    "to_gemini",
    "to_genai",
    "to_neutral",
    "to_json",
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
