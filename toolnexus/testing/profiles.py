"""Provider profiles: the fake provider answering as a named server does, quirks included.

    with fake_provider([{"fail": "overloaded"}, text_reply("hi")], profile="anthropic") as fp:
        client = create_client(base_url=fp.url, style=PROFILES["anthropic"]["style"], ...)

A profile is data: the client style that talks to it, and how that server says what
goes wrong (its HTTP error bodies and headers, its errors inside a 200 and inside a
stream) and how it streams (tool-call indexes, keep-alive comments). Each is what the
server's documentation, code or public bug reports show (`source`).

Profile-aware script keys, beside the neutral ones of `fake_provider`:
  {"fail": KIND}                   an HTTP error as the server sends it (status, body,
                                   headers); KIND is one of FAILURES
  {"fail": KIND, "retry_after": s} ... asking to wait s seconds, in the server's headers
  {"fail_inband": KIND}            HTTP 200 whose body is the server's error envelope
  {..., "stream_fail": KIND}       a stream that fails with the server's in-stream error
                                   after `fail_after` content events (default 0: before
                                   anything reached the consumer)
A reply is expanded into the fake provider's own vocabulary (`status`/`body`/`headers`,
`response`, `sse_events`: the stream's events as bytes) by `expand`, a pure function.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["PROFILES", "FAILURES", "KEYS", "expand", "profile_names"]

# The failures a script can ask for: (status, OpenAI-style type, Anthropic type, message).
# "overloaded" takes the profile's own status (Anthropic's 529, else 503).
FAILURES = MappingProxyType(
    {
        "overloaded": (503, "server_error", "overloaded_error", "Overloaded"),
        "rate_limited": (429, "rate_limit_exceeded", "rate_limit_error", "Rate limit reached"),
        "server": (500, "server_error", "api_error", "Internal server error"),
        "bad_gateway": (502, "server_error", "api_error", "Provider returned error"),
        "bad_request": (400, "invalid_request_error", "invalid_request_error", "Bad request"),
    }
)


def _sse(data: Any, event: str | None = None, field: str = "data") -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}{field}: {payload}\n\n".encode()


# ---- error shapes, one small function each (status, type, message) -> value ----------


def _openai_error(status: int, kind: str, message: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _anthropic_error(status: int, kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


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
    return _sse({"id": "gen-fake", "object": "chat.completion.chunk", "created": 0,
                 "model": "fake-model", "error": {"code": status, "message": message},
                 "choices": [{"index": 0, "delta": {"content": ""},
                              "finish_reason": "error"}]})  # fmt: skip


def _data_frame(shape: Callable) -> Callable:
    return lambda status, kind, message: _sse(shape(status, kind, message))


def _vllm_frame(status: int, kind: str, message: str) -> bytes:
    # vLLM's stream generator writes the error chunk, then still ends with [DONE].
    return _sse(_vllm_error(status, kind, message)) + _sse("[DONE]")


def _anthropic_frame(status: int, kind: str, message: str) -> bytes:
    return _sse(_anthropic_error(status, kind, message), "error")


def _llama_frame(status: int, kind: str, message: str) -> bytes:
    # llama.cpp builds through 2025 wrote `error: {...}`, a field SSE does not define
    # (ggml-org/llama.cpp#16109), then `data: [DONE]`.
    return _sse(_coded_error(status, kind, message)["error"], field="error") + _sse("[DONE]")


# ---- retry headers (seconds) -> headers --------------------------------------------


def _retry_after(seconds: float) -> dict:
    return {"retry-after": str(math.ceil(seconds))}


def _retry_after_ms(seconds: float) -> dict:
    # Azure OpenAI sends both; the SDKs read retry-after-ms first.
    return {"retry-after-ms": str(int(seconds * 1000)), "retry-after": str(math.ceil(seconds))}


def _retry_anthropic(seconds: float) -> dict:
    return {**_retry_after(seconds), "x-should-retry": "true"}


def _profile(style: str, source: str, **fields: Any) -> Mapping:
    base = {
        "style": style,
        "source": source,
        "overloaded_status": 503,
        "error_body": _openai_error,
        "stream_error": _data_frame(_openai_error),
        "retry_headers": _retry_after,
        # "repeat": every streamed call comes whole with index 0 (Ollama); "zero": in
        # fragments, every one with index 0 (Dynamo); "count": 0, 1, 2 as OpenAI.
        "tool_index": "count",
        "preamble": b"",  # bytes sent before the first event (comments, a first chunk)
        "whole_prefix": b"",  # bytes before a whole JSON answer
    }
    return MappingProxyType({**base, **fields})


PROFILES = MappingProxyType(
    {
        "openai": _profile("openai", "openai-python 3.3.1 src/openai/_streaming.py (error chunks)"),
        "anthropic": _profile(
            "anthropic",
            "docs.anthropic.com errors (529 overloaded_error, SSE error events); "
            "anthropic-sdk-python 0.121.0 _base_client.py (x-should-retry)",
            overloaded_status=529,
            error_body=_anthropic_error,
            stream_error=_anthropic_frame,
            retry_headers=_retry_anthropic,
        ),
        "azure": _profile(
            "openai",
            "learn.microsoft.com Azure OpenAI quotas (retry-after-ms, retry-after on 429); "
            "content filtering (a first chunk with no choices, prompt_filter_results)",
            retry_headers=_retry_after_ms,
            preamble=_sse(
                {
                    "choices": [],
                    "created": 0,
                    "id": "",
                    "model": "",
                    "object": "",
                    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
                }
            ),
        ),
        "dynamo": _profile(
            "openai",
            "ai-dynamo/dynamo#4723 (parallel calls streamed in fragments, all index 0)",
            tool_index="zero",
        ),
        "ollama": _profile(
            "openai",
            "ollama/ollama#15457 (parallel tool calls streamed with index 0, distinct ids)",
            tool_index="repeat",
        ),
        "vllm": _profile(
            "openai",
            "vllm-project/vllm ErrorResponse ({'object': 'error', message, type, code}), "
            "also in a stream",
            error_body=_vllm_error,
            stream_error=_vllm_frame,
        ),
        "llama.cpp": _profile(
            "openai",
            "ggml-org/llama.cpp#5961 (error JSON), #16109 (`error:` SSE field before it)",
            error_body=_coded_error,
            stream_error=_llama_frame,
        ),
        "deepseek": _profile(
            "openai",
            "api-docs.deepseek.com (keep-alive: empty lines before a whole answer, "
            "`: keep-alive` comments in a stream)",
            preamble=b": keep-alive\n\n",
            whole_prefix=b"\n\n",
        ),
        "openrouter": _profile(
            "openai",
            "openrouter.ai/docs errors (200 with {'error': {'code': 502}}, mid-stream "
            "error chunks with finish_reason 'error', `: OPENROUTER PROCESSING`)",
            error_body=_coded_error,
            stream_error=_openrouter_chunk,
            preamble=b": OPENROUTER PROCESSING\n\n",
        ),
        "litellm": _profile(
            "openai",
            "BerriAI/litellm proxy errors (string codes: {'code': '429'})",
            error_body=_litellm_error,
            stream_error=_data_frame(_litellm_error),
        ),
    }
)


def profile_names(style: str | None = None) -> list[str]:
    """Return the names of the profiles (of one client style when given)."""
    return [n for n, p in PROFILES.items() if style is None or p["style"] == style]


def _failure(profile: Mapping, kind: str) -> tuple[int, str, str]:
    if kind not in FAILURES:
        raise ValueError(f"unknown failure {kind!r}: one of {sorted(FAILURES)}")
    status, openai_type, anthropic_type, message = FAILURES[kind]
    if kind == "overloaded":
        status = profile["overloaded_status"]
    kind_name = anthropic_type if profile["style"] == "anthropic" else openai_type
    return status, kind_name, message


def _http_failure(reply: Mapping, profile: Mapping) -> dict:
    status, kind, message = _failure(profile, reply["fail"])
    headers = dict(reply.get("headers") or {})
    if reply.get("retry_after") is not None:
        headers = {**profile["retry_headers"](reply["retry_after"]), **headers}
    elif profile["style"] == "anthropic":
        headers.setdefault("x-should-retry", "true" if status in (429, 529) or status >= 500
                           else "false")  # fmt: skip
    return {"status": status, "body": json.dumps(profile["error_body"](status, kind, message)),
            "headers": headers}  # fmt: skip


_OWN = frozenset({"status", "drop", "stall", "response", "sse", "sse_events"})
KEYS = frozenset({"fail", "fail_inband", "stream_fail"})  # the keys only a profile reads


def expand(reply: Mapping, profile: Mapping | str, dialect: str, events: Callable) -> Mapping:
    """Return a script reply in the fake provider's own vocabulary, as `profile` sends it.

    `events(reply)` returns the SSE events (bytes each) of the plain reply when the
    request asked for a stream, else None. Replies without profile keys, and whole
    answers of profiles with nothing to add, come back unchanged.
    """
    profile = PROFILES[profile] if isinstance(profile, str) else profile
    if _OWN.intersection(reply):  # already in the fake provider's vocabulary
        return reply
    if reply.get("fail"):
        return _http_failure(reply, profile)
    if reply.get("fail_inband"):
        status, kind, message = _failure(profile, reply["fail_inband"])
        return {"response": profile["error_body"](status, kind, message)}
    stream = events(reply)
    if stream is not None and dialect == "responses" and reply.get("stream_fail"):
        return {**reply, "sse_events": _responses_failed(reply, profile, stream)}
    if stream is None or dialect == "responses":
        return {**reply, "prefix": profile["whole_prefix"]} if profile["whole_prefix"] else reply
    if profile["tool_index"] != "count" and dialect == "openai":
        stream = _calls_at_zero(stream, whole=profile["tool_index"] == "repeat")
    if reply.get("stream_fail"):
        status, kind, message = _failure(profile, reply["stream_fail"])
        cut = 1 + int(reply.get("fail_after", 0))
        stream = [*stream[:cut], profile["stream_error"](status, kind, message)]
    if profile["preamble"]:
        stream = [profile["preamble"], *stream]
    return {**reply, "sse_events": stream}


def _responses_failed(reply: Mapping, profile: Mapping, stream: list) -> list:
    """Return a Responses stream cut after `fail_after` events past its first, then the
    dialect's own `error` event (the profile's type as its code)."""
    _, kind, message = _failure(profile, reply["stream_fail"])
    cut = 1 + int(reply.get("fail_after", 0))
    error = {"type": "error", "code": kind, "message": message, "param": None,
             "sequence_number": cut}  # fmt: skip
    return [*stream[:cut], _sse(error)]


def _calls_at_zero(events: list[bytes], whole: bool) -> list[bytes]:
    """Return an openai stream whose tool calls all say index 0, with their own ids: in
    fragments as given, or (`whole`) each in one chunk, as Ollama sends parallel calls."""
    if not whole:
        return [_fragments_at_zero(e) for e in events]
    out: list[bytes] = []
    calls: list[dict] = []
    for raw in events:
        text = raw.decode()
        data = text.partition("data: ")[2].strip()
        chunk = json.loads(data) if data.startswith("{") else None
        choices = (chunk or {}).get("choices") or [{}]
        fragments = (choices[0].get("delta") or {}).get("tool_calls")
        if not fragments:
            if calls and chunk is not None and choices[0].get("finish_reason"):
                out += [_call_chunk(chunk, c) for c in calls]
                calls = []
            out.append(raw)
            continue
        for f in fragments:
            if f.get("id"):
                calls.append({**f, "index": 0, "function": dict(f["function"])})
            else:
                fn = calls[-1]["function"]
                fn["arguments"] = fn.get("arguments", "") + f["function"]["arguments"]
    return out


def _fragments_at_zero(raw: bytes) -> bytes:
    data = raw.decode().partition("data: ")[2].strip()
    chunk = json.loads(data) if data.startswith("{") else {}
    delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
    if not delta.get("tool_calls"):
        return raw
    delta["tool_calls"] = [{**f, "index": 0} for f in delta["tool_calls"]]
    return _sse(chunk)


def _call_chunk(template: Mapping, call: Mapping) -> bytes:
    delta = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    return _sse({**template, "choices": [choice]})
