"""toolnexus: the tool-calling loop of any OpenAI-style or Anthropic-style endpoint, as values."""

from .aio import aask, arun, astream
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
from .errors import ProviderError, RunCancelledError, RunTimeoutError
from .history.tool import chat_history_tool
from .http_tool import http_tool
from .skills import list_skills, skills_prompt
from .tool import define_tool, execute_tool, sanitize, tool, tool_result
from .toolkit import execute, register, to_anthropic, to_gemini, to_openai, tool_names, toolkit

__all__ = [
    "ProviderError",
    "RunCancelledError",
    "RunTimeoutError",
    "aask",
    "arun",
    "ask",
    "astream",
    "chat_history_tool",
    "clear_chat_history",
    "conversation",
    "conversation_store",
    "create_client",
    "create_in_process_client",
    "define_tool",
    "execute",
    "execute_tool",
    "get_chat_history",
    "http_tool",
    "list_skills",
    "metrics",
    "register",
    "run",
    "sanitize",
    "skills_prompt",
    "stream",
    "to_anthropic",
    "to_gemini",
    "to_openai",
    "tool",
    "tool_names",
    "tool_result",
    "toolkit",
]
