"""In-band errors: an error envelope where an answer (or a stream chunk) was expected.

Servers say "this failed" inside a 200 and inside streams, in a few shapes:

  {"error": {"message", "type"?, "code"?}}        OpenAI-compatible (OpenRouter's 200 with
                                                  code 502, a stream's error chunk)
  {"type": "error", "error": {"type", "message"}} Anthropic (`event: error`, a 529 body)
  {"object": "error", "message", "type", "code"}  vLLM's error chunk
  {"type": "error", "code", "message"}            Responses' `error` stream event
  {"error": "text", "error_type"?}                Ollama's native errors, TGI's stream errors

`envelope` finds the error map in any of them (the same rule for every dialect: none
defines an answer that looks like one), `inband_error` turns it into a ProviderError
carrying the provider's message, type and code, with `status` from the code when it is
an HTTP status, else from the type (`overloaded_error` is 529), so the retry rules treat
it like its status class (core.retry).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ProviderError, excerpt
from .jsonload import load

__all__ = ["ERROR_TYPE_STATUS", "InBandError", "envelope", "status_of", "inband_error",
           "error_fields", "provider_words"]  # fmt: skip


class InBandError(ProviderError, ValueError):
    """An error the provider sent in place of an answer. A ValueError too, as every
    decoding error (see common.MalformedResponse)."""


# The HTTP status each documented error type goes with (Anthropic's errors page; OpenAI's
# error types), for an error that came without one (an SSE error event).
ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def envelope(obj: Any) -> Mapping | None:
    """Return the error map of an error envelope, else None (an answer, or not a map).

    >>> envelope({"error": {"code": 502, "message": "down"}})["code"]
    502
    >>> envelope({"object": "error", "message": "m", "code": 400})["message"]
    'm'
    >>> envelope({"id": "r", "error": None, "output": []}) is None
    True
    """
    if type(obj) is not dict and not isinstance(obj, Mapping):  # exact type first: no ABC
        return None
    err = obj.get("error")
    if err is not None:  # an answer has none: no ABC check of None
        if isinstance(err, Mapping):
            return err
        if isinstance(err, str) and err:  # {"error": "text"} (Ollama; TGI adds "error_type")
            return {"message": err, "type": obj.get("error_type")}
    if obj.get("object") == "error" or obj.get("type") == "error":
        return obj
    return None


def status_of(code: Any, error_type: Any = None) -> int | None:
    """Return the HTTP status an error's code names (100..599), else its type's, else None.

    >>> status_of(502), status_of("429"), status_of("server_error")
    (502, 429, 500)
    >>> status_of(None, "overloaded_error"), status_of("model_not_found")
    (529, None)
    """
    if isinstance(code, str) and code.isascii() and code.isdigit() and len(code) == 3:
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return code
    for name in (error_type, code):
        if isinstance(name, str) and name in ERROR_TYPE_STATUS:
            return ERROR_TYPE_STATUS[name]
    return None


def error_fields(err: Mapping) -> dict:
    """Return the ProviderError fields of an error map: status, error_type, code."""
    error_type, code = err.get("type"), err.get("code")
    if error_type is None:  # Google's envelope: {"code", "message", "status": "NOT_FOUND"}
        error_type = err.get("status")
    error_type = error_type if isinstance(error_type, str) and error_type != "error" else None
    code = code if isinstance(code, (str, int)) and not isinstance(code, bool) else None
    return {"status": status_of(code, error_type), "error_type": error_type, "code": code}


def inband_error(obj: Any, text: str | None = None) -> ProviderError | None:
    """Return the ProviderError of an error envelope (message, type, code, status), else None.

    `text` is the JSON the object was read from (the error's body); without it the
    object is encoded. The codec knows no secrets: drivers scrub what it returns.

    >>> e = inband_error({"error": {"code": 502, "message": "Provider returned error"}})
    >>> str(e), e.status, e.code
    ('Provider returned error', 502, 502)
    >>> err = {"type": "overloaded_error", "message": "Overloaded"}
    >>> e = inband_error({"type": "error", "error": err})
    >>> e.status, e.error_type
    (529, 'overloaded_error')
    """
    err = envelope(obj)
    if err is None:
        return None
    if text is None:
        try:
            text = json.dumps(obj, default=str)
        except (ValueError, RecursionError):
            text = repr(type(obj))
    message = err.get("message")
    if not isinstance(message, str) or not message:
        message = f"error in the answer: {excerpt(text, limit=200)}"
    return InBandError(excerpt(message, limit=1000), body=excerpt(text), **error_fields(err))


def provider_words(content: bytes) -> tuple[Any, Any] | None:
    """Return (error_type, code) of an error body's envelope, else None (never raises).

    >>> provider_words(b'{"type": "error", "error": {"type": "overloaded_error"}}')
    ('overloaded_error', None)
    >>> provider_words(b"<html>bad gateway</html>") is None
    True
    """
    try:
        err = envelope(load(content))
    except (ValueError, RecursionError):
        return None
    if err is None:
        return None
    fields = error_fields(err)
    return fields["error_type"], fields["code"]
