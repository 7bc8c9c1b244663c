"""Exceptions for the host's mistakes and the provider's failures (tool errors are values)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .secrets import scrub_value, scrubber

__all__ = [
    "ProviderError",
    "RunTimeoutError",
    "RunCancelledError",
    "excerpt",
    "scrub_error",
    "scrub_chain",
    "status_error",
]

EXCERPT_CHARS = 500
# No mutant: an alias for annotations only (strings here, never evaluated).
Scrub = Callable[[str], str]  # pragma: no mutate


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
    `error_type` and `code` are the provider's own (`overloaded_error`, 502, ...) when it
    said them, e.g. in an error envelope inside a 200 or a stream (core.wire.inband).
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
        error_type: str | None = None,
        code: Any = None,
    ):
        super().__init__(message)
        self.error_type = error_type
        self.code = code
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
        error_type=_scrub_value(getattr(error, "error_type", None), scrub),
        code=_scrub_value(getattr(error, "code", None), scrub),
    )
    out.streamed = getattr(error, "streamed", False)
    out.__traceback__ = error.__traceback__
    scrub_chain(error, scrub)  # raised `from None` while handling it: its __context__
    return out


def scrub_chain(error: BaseException, secrets: Iterable[str | None] | Scrub) -> BaseException:
    """Scrub, in place, the text of `error` and of every exception in its chain
    (`__cause__`, `__context__`); return `error`.

    An error raised while handling `error` (`raise masked from None`) still carries it as
    `__context__`: tracebacks hide it, code walking the chain reads it. Scrubbing it where
    it is caught leaves only scrubbed copies there.

    >>> e = ValueError("dsn postgresql://u:s3cret-pw@h/db")
    >>> str(scrub_chain(e, ["s3cret-pw"]))
    'dsn postgresql://u:***@h/db'
    """
    scrub = _as_scrub(secrets)
    seen: list[BaseException] = []  # a chain is short: compared by identity
    todo: list[BaseException | None] = [error]
    while todo:
        e = todo.pop()
        if e is None or any(e is x for x in seen):
            continue
        seen.append(e)
        try:
            e.args = tuple(scrub_value(a, scrub) for a in e.args)
            for name in ("body", "url"):  # a ProviderError's own texts
                if isinstance(getattr(e, name, None), str):
                    setattr(e, name, scrub(getattr(e, name)))
        except (AttributeError, TypeError):  # an exception whose args cannot be set
            pass
        todo += [e.__cause__, e.__context__]
    return error


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
