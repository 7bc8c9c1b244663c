"""Writing message rows, pure: a message's row text and the digest chain over rows.

Rule 1: imports core/ only; no I/O. (Re-exported by store._rows, which uses them.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from ..core.frozen import thaw
from ..core.transcript import TranscriptFormatError, json_text, readable

__all__ = ["GENESIS", "encode_message", "encode_rows", "chain", "digest_of"]

GENESIS = "0" * 32  # the digest of the empty transcript


def encode_message(message: Mapping) -> str:
    """Return the compact JSON of one message, its keys in its own order (order is data).

    >>> encode_message({"role": "user", "content": "hi"})
    '{"role":"user","content":"hi"}'
    """
    return json_text(_plain(message))


def _plain(message: Mapping) -> dict:
    plain = thaw(message)
    if not isinstance(plain, dict) or not isinstance(plain.get("role"), str):
        raise TranscriptFormatError(f"not a message (a map with a string 'role'): {message!r:.200}")
    return plain


def encode_rows(messages: Iterable[Mapping]) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """Return the row texts of messages, and the same with None where a row would not read
    back as the very message (JSON makes a number key a string, a tuple a list): the
    memo's texts, which a read matches to give saved values back.

    >>> encode_rows([{"role": "user", "content": "hi"}, {"role": "user", "n": (1,)}])
    (('{"role":"user","content":"hi"}', '{"role":"user","n":[1]}'), ('{"role":"user","content":"hi"}', None))
    """  # noqa: E501
    texts, kept = [], []
    for message in messages:
        plain = _plain(message)
        text = readable(json_text(plain))
        texts.append(text)
        kept.append(text if json.loads(text) == plain else None)
    return tuple(texts), tuple(kept)


def chain(digest: str, encoded: Iterable[str]) -> str:
    """Return the digest after appending the encoded messages to a transcript of `digest`.

    >>> chain(chain(GENESIS, ["a"]), ["b"]) == chain(GENESIS, ["a", "b"])
    True
    """
    for text in encoded:
        digest = hashlib.blake2b((digest + text).encode("utf-8"), digest_size=16).hexdigest()
    return digest


def digest_of(messages: Iterable[Mapping]) -> str:
    """Return the chained digest of a whole transcript."""
    return chain(GENESIS, map(encode_message, messages))
