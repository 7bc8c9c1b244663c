"""Provider profiles: the fake provider answering as a named server does, quirks included.

    with fake_provider([{"fail": "overloaded"}, text_reply("hi")], profile="anthropic") as fp:
        client = create_client(base_url=fp.url, style=PROFILES["anthropic"]["style"], ...)

A profile is data: the client style that talks to it, and how that server says what
goes wrong (its HTTP error bodies and headers, its errors inside a 200 and inside a
stream) and how it streams (tool-call indexes, keep-alive comments). Each is what the
server's documentation, code or public bug reports show (`source`). Each dialect's kit
module gives the profiles of the servers that speak it (its record's `profiles`, see
`testing.fakes`); this module merges them over a neutral base and names no dialect.

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

from .fakes import Fake
from .registry import FAKES

__all__ = ["PROFILES", "FAILURES", "KEYS", "expand", "profile_names", "default_profile"]

# The failures a script can ask for: (status, the `type` OpenAI-style envelopes give it,
# the `type` Anthropic's gives it, message). "overloaded" takes the profile's own status
# (Anthropic's 529, else 503). A profile names its types itself (`error_types`, from its
# dialect's kit module); the type columns stay for this table's readers.
FAILURES = MappingProxyType(
    {
        "overloaded": (503, "server_error", "overloaded_error", "Overloaded"),
        "rate_limited": (429, "rate_limit_exceeded", "rate_limit_error", "Rate limit reached"),
        "server": (500, "server_error", "api_error", "Internal server error"),
        "bad_gateway": (502, "server_error", "api_error", "Provider returned error"),
        "bad_request": (400, "invalid_request_error", "invalid_request_error", "Bad request"),
    }
)


def _retry_after(seconds: float) -> dict:
    return {"retry-after": str(math.ceil(seconds))}


def _no_headers(status: int) -> dict:
    return {}


# What every profile has unless its fields say otherwise; its dialect's kit module gives
# the rest: `source`, `error_types` (FAILURES' kind -> its type), `error_body` and
# `stream_error` ((status, type, message) -> its error body / its in-stream error bytes).
_BASE = {
    "overloaded_status": 503,
    "retry_headers": _retry_after,  # seconds -> the headers asking to wait
    "status_headers": _no_headers,  # status -> headers a failure carries unless given
    # "repeat": every streamed call comes whole with index 0 (Ollama); "zero": in
    # fragments, every one with index 0 (Dynamo); "count": 0, 1, 2 as OpenAI.
    "tool_index": "count",
    "preamble": b"",  # bytes sent before the first event (comments, a first chunk)
    "whole_prefix": b"",  # bytes before a whole JSON answer
}
_GIVEN = ("source", "error_types", "error_body", "stream_error")


def _profile(name: str, fake: Fake, fields: Mapping) -> Mapping:
    """Return a whole profile of `fake`'s dialect (TypeError naming what it lacks)."""
    missing = [k for k in _GIVEN if k not in fields]
    missing += [f"error_types[{k!r}]" for k in FAILURES if k not in fields.get("error_types", {})]
    if missing:
        raise TypeError(f"profile {name!r} of {fake.name!r} lacks {missing}")
    return MappingProxyType({"style": fake.name, **_BASE, **fields})


def _profiles() -> Mapping[str, Mapping]:
    """Return every fake's profiles by name, each whole (TypeError for a name given twice)."""
    out: dict[str, Mapping] = {}
    for fake in FAKES.values():
        for name, fields in fake.profiles.items():
            if name in out:
                raise TypeError(f"profile {name!r} is given twice")
            out[name] = _profile(name, fake, fields)
    return MappingProxyType(out)


PROFILES = _profiles()


def default_profile(dialect: str) -> str:
    """Return the profile a plain fake provider answers `dialect`'s failures in: its
    own first one, else the first row's (a dialect of its API, as Responses is)."""
    own = FAKES[dialect].profiles or next(iter(FAKES.values())).profiles
    return next(iter(own))


def profile_names(style: str | None = None) -> list[str]:
    """Return the names of the profiles (of one client style when given)."""
    return [n for n, p in PROFILES.items() if style is None or p["style"] == style]


def _failure(profile: Mapping, kind: str) -> tuple[int, str, str]:
    if kind not in FAILURES:
        raise ValueError(f"unknown failure {kind!r}: one of {sorted(FAILURES)}")
    status, *_, message = FAILURES[kind]
    if kind == "overloaded":
        status = profile["overloaded_status"]
    return status, profile["error_types"][kind], message


def _http_failure(reply: Mapping, profile: Mapping) -> dict:
    status, kind, message = _failure(profile, reply["fail"])
    headers = dict(reply.get("headers") or {})
    if reply.get("retry_after") is not None:
        headers = {**profile["retry_headers"](reply["retry_after"]), **headers}
    else:  # what the server says of every failure (Anthropic's x-should-retry)
        own = profile["status_headers"](status)
        headers = {**headers, **{k: v for k, v in own.items() if k not in headers}}
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
    fake = FAKES[dialect]
    stream = events(reply)
    if stream is not None and fake.stream_failed is not None and reply.get("stream_fail"):
        _, kind, message = _failure(profile, reply["stream_fail"])
        cut = 1 + int(reply.get("fail_after", 0))
        return {**reply, "sse_events": fake.stream_failed(stream, cut, kind, message)}
    if stream is None or fake.stream_failed is not None:  # its own stream: no quirks
        return {**reply, "prefix": profile["whole_prefix"]} if profile["whole_prefix"] else reply
    if profile["tool_index"] != "count" and fake.index_calls is not None:
        stream = fake.index_calls(stream, whole=profile["tool_index"] == "repeat")
    if reply.get("stream_fail"):
        status, kind, message = _failure(profile, reply["stream_fail"])
        cut = 1 + int(reply.get("fail_after", 0))
        stream = [*stream[:cut], profile["stream_error"](status, kind, message)]
    if profile["preamble"]:
        stream = [profile["preamble"], *stream]
    return {**reply, "sse_events": stream}
