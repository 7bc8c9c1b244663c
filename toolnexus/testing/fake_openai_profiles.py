"""The servers that speak OpenAI's chat completions, as profiles (see `testing.profiles`):
OpenAI's own, and the compatible ones with their error shapes and stream quirks.

Each profile is fields over `testing.profiles`' neutral base; its style is this dialect.
What each server does is what its documentation, code or public bug reports show
(`source`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType

from .replies import frame

__all__ = ["PROFILES", "ERROR_TYPES", "openai_error"]

# The `type` OpenAI's envelope gives each failure a script can ask for.
ERROR_TYPES = MappingProxyType({"overloaded": "server_error", "rate_limited": "rate_limit_exceeded",
                                "server": "server_error", "bad_gateway": "server_error",
                                "bad_request": "invalid_request_error"})  # fmt: skip


# ---- error shapes, one small function each (status, type, message) -> value ----------


def openai_error(status: int, kind: str, message: str) -> dict:
    """Return OpenAI's error envelope."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _vllm_error(status: int, kind: str, message: str) -> dict:
    # vLLM's ErrorResponse: a flat object, "object": "error", the HTTP status as code.
    return {"object": "error", "message": message, "type": kind, "param": None, "code": status}


def _coded_error(status: int, kind: str, message: str) -> dict:
    # llama.cpp and OpenRouter: {"error": {"code": <HTTP status>, "message", ...}}.
    return {"error": {"code": status, "message": message, "type": kind}}


def _litellm_error(status: int, kind: str, message: str) -> dict:
    # LiteLLM's proxy: every field a string, the status too ("429").
    return {"error": {"message": message, "type": kind, "param": "None", "code": str(status)}}


def _openrouter_chunk(status: int, kind: str, message: str) -> bytes:
    # OpenRouter's mid-stream error: a chunk with a top-level error and finish "error".
    return frame({"id": "gen-fake", "object": "chat.completion.chunk", "created": 0,
                  "model": "fake-model", "error": {"code": status, "message": message},
                  "choices": [{"index": 0, "delta": {"content": ""},
                               "finish_reason": "error"}]})  # fmt: skip


def _data_frame(shape: Callable) -> Callable:
    return lambda status, kind, message: frame(shape(status, kind, message))


def _vllm_frame(status: int, kind: str, message: str) -> bytes:
    # vLLM's stream generator writes the error chunk, then still ends with [DONE].
    return frame(_vllm_error(status, kind, message)) + frame("[DONE]")


def _llama_frame(status: int, kind: str, message: str) -> bytes:
    # llama.cpp builds through 2025 wrote `error: {...}`, a field SSE does not define
    # (ggml-org/llama.cpp#16109), then `data: [DONE]`.
    return frame(_coded_error(status, kind, message)["error"], field="error") + frame("[DONE]")


def _retry_after_ms(seconds: float) -> dict:
    # Azure OpenAI sends both; the SDKs read retry-after-ms first.
    return {"retry-after-ms": str(int(seconds * 1000)), "retry-after": str(math.ceil(seconds))}


def _server(source: str, **fields: object) -> MappingProxyType:
    """Return a profile's fields: OpenAI's error shapes unless the server has its own."""
    base = {"source": source, "error_types": ERROR_TYPES, "error_body": openai_error,
            "stream_error": _data_frame(openai_error)}  # fmt: skip
    return MappingProxyType({**base, **fields})


_AZURE_FILTER = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
                 "prompt_filter_results": [{"prompt_index": 0,
                                            "content_filter_results": {}}]}  # fmt: skip

# The first is OpenAI's own: the plain fake provider answers failures as it does.
PROFILES = MappingProxyType(
    {
        "openai": _server("openai-python 3.3.1 src/openai/_streaming.py (error chunks)"),
        "azure": _server(
            "learn.microsoft.com Azure OpenAI quotas (retry-after-ms, retry-after on 429); "
            "content filtering (a first chunk with no choices, prompt_filter_results)",
            retry_headers=_retry_after_ms,
            preamble=frame(_AZURE_FILTER),
        ),
        "dynamo": _server(
            "ai-dynamo/dynamo#4723 (parallel calls streamed in fragments, all index 0)",
            tool_index="zero",
        ),
        "ollama": _server(
            "ollama/ollama#15457 (parallel tool calls streamed with index 0, distinct ids)",
            tool_index="repeat",
        ),
        "vllm": _server(
            "vllm-project/vllm ErrorResponse ({'object': 'error', message, type, code}), "
            "also in a stream",
            error_body=_vllm_error,
            stream_error=_vllm_frame,
        ),
        "llama.cpp": _server(
            "ggml-org/llama.cpp#5961 (error JSON), #16109 (`error:` SSE field before it)",
            error_body=_coded_error,
            stream_error=_llama_frame,
        ),
        "deepseek": _server(
            "api-docs.deepseek.com (keep-alive: empty lines before a whole answer, "
            "`: keep-alive` comments in a stream)",
            preamble=b": keep-alive\n\n",
            whole_prefix=b"\n\n",
        ),
        "openrouter": _server(
            "openrouter.ai/docs errors (200 with {'error': {'code': 502}}, mid-stream "
            "error chunks with finish_reason 'error', `: OPENROUTER PROCESSING`)",
            error_body=_coded_error,
            stream_error=_openrouter_chunk,
            preamble=b": OPENROUTER PROCESSING\n\n",
        ),
        "litellm": _server(
            "BerriAI/litellm proxy errors (string codes: {'code': '429'})",
            error_body=_litellm_error,
            stream_error=_data_frame(_litellm_error),
        ),
    }
)
