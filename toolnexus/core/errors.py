"""Exceptions for the host's mistakes and the provider's failures (tool errors are values)."""

from __future__ import annotations

__all__ = ["ProviderError", "RunTimeoutError", "RunCancelledError", "excerpt"]

EXCERPT_CHARS = 500


def excerpt(text: str, secrets: tuple[str | None, ...] = (), limit: int = EXCERPT_CHARS) -> str:
    """Return at most `limit` characters of `text`, with every secret masked.

    >>> excerpt("bad key sk-123", ("sk-123",))
    'bad key ***'
    """
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


class ProviderError(Exception):
    """The LLM endpoint failed: a non-2xx status (with a bounded body excerpt) or no answer."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str = "",
        url: str = "",
        headers: dict | None = None,
        network: bool = False,
    ):
        super().__init__(message)
        self.status = status
        self.body = body
        self.url = url
        self.headers = headers or {}  # the response's headers (Retry-After), never ours
        self.network = network  # the request failed on the network (the transport says so)


class RunTimeoutError(TimeoutError):
    """The run's deadline (`timeout_ms`) passed; the request in flight was abandoned."""


class RunCancelledError(Exception):
    """The run's cancellation token was set; the request in flight was abandoned."""
