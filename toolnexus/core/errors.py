"""Exceptions for the host's mistakes and the provider's failures (tool errors are values)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .secrets import scrubber

__all__ = [
    "ProviderError",
    "RunTimeoutError",
    "RunCancelledError",
    "excerpt",
    "scrub_error",
    "status_error",
]

EXCERPT_CHARS = 500
Scrub = Callable[[str], str]


def _as_scrub(secrets: Iterable[str | None] | Scrub) -> Scrub:
    return secrets if callable(secrets) else scrubber(secrets)


def excerpt(
    text: str, secrets: Iterable[str | None] | Scrub = (), limit: int = EXCERPT_CHARS
) -> str:
    """Return at most `limit` characters of `text`, with every form of every secret masked.

    `secrets` is a sequence of secret values or a scrubber (`core.secrets.scrubber`).

    >>> excerpt("bad key sk-123", ("sk-123",))
    'bad key ***'
    """
    scrub = _as_scrub(secrets)
    # Cut before scrubbing (bounded work), scrub, then cut again: a secret the first cut
    # split is still caught, as a fragment.
    text = scrub(text[: limit * 4 + 64])
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


class ProviderError(Exception):
    """The LLM endpoint failed: a non-2xx status (with a bounded body excerpt) or no answer.

    `retry_after` is the wait in seconds the provider asked for when that wait was too
    long to sleep (longer than the run's limit or past its deadline), else None.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str = "",
        url: str = "",
        headers: dict | None = None,
        network: bool = False,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.body = body
        self.url = url
        self.headers = headers or {}  # the response's headers (Retry-After), never ours
        self.network = network  # the request failed on the network (the transport says so)
        self.retry_after = retry_after


def _scrub_value(value: Any, scrub: Scrub) -> Any:
    return scrub(value) if isinstance(value, str) else value


def scrub_error(error: ProviderError, secrets: Iterable[str | None] | Scrub) -> ProviderError:
    """Return a copy of a ProviderError with every secret scrubbed from its text and headers.

    For errors built where the secrets are unknown (a codec decoding an SSE `error` event
    that echoes the key): the driver that holds the key passes them through this.
    """
    scrub = _as_scrub(secrets)
    headers = error.headers if isinstance(error.headers, Mapping) else {}
    out = ProviderError(
        scrub(str(error)),
        status=error.status,
        body=_scrub_value(error.body, scrub),
        url=_scrub_value(error.url, scrub),
        headers={k: _scrub_value(v, scrub) for k, v in headers.items()},
        retry_after=error.retry_after,
        network=error.network,
    )
    out.streamed = getattr(error, "streamed", False)
    out.__traceback__ = error.__traceback__
    return out


def status_error(
    url: str,
    status: int,
    headers: Mapping,
    content: bytes,
    secrets: Iterable[str | None] | Scrub = (),
) -> ProviderError:
    """Return the ProviderError of a non-2xx response: a bounded body excerpt, scrubbed.

    `headers` is the response's headers as a plain dict (names lower-cased).

    >>> e = status_error("http://h/v1", 401, {}, b'{"error": "bad key sk-abcdefghijklmnop"}',
    ...                  ("sk-abcdefghijklmnop",))
    >>> str(e), e.status
    ('POST http://h/v1 returned 401: {"error": "bad key ***"}', 401)
    """
    scrub = _as_scrub(secrets)
    text = excerpt(content.decode("utf-8", "replace"), scrub)
    return ProviderError(
        f"POST {scrub(url)} returned {status}: {text}",
        status=status,
        body=text,
        url=scrub(url),
        headers={k: _scrub_value(v, scrub) for k, v in dict(headers).items()},
    )


class RunTimeoutError(TimeoutError):
    """The run's deadline (`timeout_ms`) passed; the request in flight was abandoned."""


class RunCancelledError(Exception):
    """The run's cancellation token was set; the request in flight was abandoned."""
