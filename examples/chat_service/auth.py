"""One authentication for the chat service: bearer tokens, each naming its principal.

    TOOLNEXUS_AUTH=examples.chat_service.auth:bearer_tokens
    TOOLNEXUS_TOKENS=alice=<a long random token>,bob=<another>

A request with `Authorization: Bearer <token>` acts as that token's principal, and
touches that principal's conversations only. Any function(request) -> principal | None
works the same way: put your identity provider's check (a session, a verified JWT's
subject) in one and name it in TOOLNEXUS_AUTH.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from functools import lru_cache

__all__ = ["bearer_tokens", "parse_tokens"]

MIN_TOKEN = 16  # shorter tokens are guessable: refused when read


def parse_tokens(spec: str) -> dict[bytes, str]:
    """Return {sha256(token): principal} of "principal=token,..."; a ValueError when malformed.

    >>> sorted(parse_tokens("alice=0123456789abcdef").values())
    ['alice']
    """
    out: dict[bytes, str] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        who, sep, token = item.partition("=")
        if not sep or not who or len(token) < MIN_TOKEN:
            raise ValueError(
                f"TOOLNEXUS_TOKENS: each item is principal=token, a token of {MIN_TOKEN}+ "
                "characters"
            )
        out[hashlib.sha256(token.encode()).digest()] = who
    if not out:
        raise ValueError("TOOLNEXUS_TOKENS names no token")
    return out


@lru_cache(1)
def _tokens(spec: str) -> dict[bytes, str]:
    return parse_tokens(spec)


def bearer_tokens(request) -> str | None:
    """Return the principal of the request's bearer token, or None (not authenticated)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return None
    digest = hashlib.sha256(token.strip().encode()).digest()
    # Compared in constant time against each known digest: no timing hint of a prefix.
    found = None
    for known, who in _tokens(os.environ.get("TOOLNEXUS_TOKENS", "")).items():
        if hmac.compare_digest(known, digest):
            found = who
    return found
