"""Shared pure helpers of the wire codecs: usage maps, JSON encoding of frozen values."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyrsistent import PMap, PVector, pmap

__all__ = ["usage", "add_usage", "ZERO_USAGE", "encode_json", "encode_body", "turn"]

ZERO_USAGE = pmap({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})


def usage(prompt: Any, completion: Any) -> PMap:
    """Return a usage map from prompt and completion token counts (missing counts are 0).

    >>> usage(3, None) == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
    True
    """
    p, c = int(prompt or 0), int(completion or 0)
    return pmap({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c})


def add_usage(a: Mapping, b: Mapping) -> PMap:
    """Return the sum of two usage maps."""
    return usage(
        a["prompt_tokens"] + b["prompt_tokens"], a["completion_tokens"] + b["completion_tokens"]
    )


def _plain(o: Any) -> Any:
    # json's C encoder calls this only for values it cannot encode itself:
    # frozen maps and vectors become a shallow dict/list and it recurses on.
    if isinstance(o, PMap):
        return dict(o.iteritems())  # 5x faster than dict(o), which looks each key up again
    if isinstance(o, (PVector, tuple)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_plain)


def encode_json(value: Any) -> bytes:
    """Return compact UTF-8 JSON of a value that may hold pmaps and pvectors."""
    return _ENCODER.encode(value).encode("utf-8")


# JSON text of frozen values, by identity. Values are immutable, so a text stays right
# for as long as its value lives; each entry holds its value, so an id is never reused
# while cached. A request re-sends the whole history each turn: this encodes each
# message (and a toolkit's tools) once, not once per turn.
_TEXT: dict[int, tuple[Any, str]] = {}
_TEXT_MAX = 8192


def _text(value: Any) -> str:
    # The cache first: a hit is the same object (each entry holds it), and an id lookup
    # is cheaper than the ABC check below that a miss needs.
    hit = _TEXT.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    text = _ENCODER.encode(value)
    if not isinstance(value, (PMap, PVector)):
        return text
    if len(_TEXT) >= _TEXT_MAX:
        _TEXT.clear()  # a crude bound: the next turn re-encodes what it needs
    _TEXT[id(value)] = (value, text)
    return text


def _array_text(items: Any) -> str:
    return "[" + ",".join(_text(m) for m in items) + "]"


def encode_body(body: Mapping) -> bytes:
    """Return the JSON of a request body, reusing the text of frozen values already sent.

    >>> from pyrsistent import pmap, pvector
    >>> m = pmap({"content": "hi"})
    >>> encode_body({"model": "m", "messages": pvector([m])})
    b'{"model":"m","messages":[{"content":"hi"}]}'
    """
    parts = []
    for key, value in body.items():
        if isinstance(value, (list, tuple, PVector)):
            text = _array_text(value)
        else:
            text = _text(value)
        parts.append(_ENCODER.encode(key) + ":" + text)
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def turn(message: Mapping, text: str, tool_calls, use: Mapping, finish: Any, model: Any) -> PMap:
    """Return a normalized model turn, the one shape every codec decodes into.

    `message` is the assistant message to append to the transcript (provider shape);
    `tool_calls` is a sequence of {id, name, arguments} where `arguments` is raw: a
    JSON string (openai) or a mapping (anthropic); the loop parses it.
    """
    from pyrsistent import freeze

    return pmap(
        {
            "message": freeze(message, strict=False),
            "text": text,
            "tool_calls": freeze(
                tool_calls if isinstance(tool_calls, PVector) else list(tool_calls), strict=False
            ),
            "usage": use,
            "finish": finish,
            "model": model,
        }
    )
