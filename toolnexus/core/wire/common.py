"""Shared pure helpers of the wire codecs: usage maps, JSON encoding of frozen values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, PVector, pmap

__all__ = [
    "usage", "add_usage", "ZERO_USAGE", "encode_json", "encode_body", "message_text", "turn",
]  # fmt: skip

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


def message_text(value: Any) -> str:
    """Return the compact JSON text of one value (a message) as a request body carries it."""
    return _ENCODER.encode(value)


def _messages_text(items: Sequence, messages: Sequence | None, texts: Sequence | None) -> str:
    # The body's messages end with the state's (a system message may lead), so item k
    # is message k - lead: one that is still the state's own value reuses its text.
    if texts is None or messages is None:
        return _ENCODER.encode(items)
    lead, n = len(items) - len(messages), len(messages)
    parts = [
        texts[k - lead] if 0 <= k - lead < n and m is messages[k - lead] else _ENCODER.encode(m)
        for k, m in enumerate(items)
    ]
    return "[" + ",".join(parts) + "]"


def encode_body(
    body: Mapping,
    messages: Sequence | None = None,
    texts: Sequence[str] | None = None,
    known: Mapping[str, tuple[Any, str]] | None = None,
) -> bytes:
    """Return the JSON of a request body; `texts[i]` is reused for `messages[i]` when given.

    `known` maps a key to (value, its JSON text): the text is reused while the body still
    holds that very value (a run's tools, encoded once per run).

    >>> from pyrsistent import pmap, pvector
    >>> m = pmap({"content": "hi"})
    >>> encode_body({"model": "m", "messages": pvector([m])}, pvector([m]), ['{"content":"hi"}'])
    b'{"model":"m","messages":[{"content":"hi"}]}'
    """
    parts = []
    for key, value in body.items():
        hit = known.get(key) if known else None
        if hit is not None and hit[0] is value:
            text = hit[1]
        elif key == "messages" and isinstance(value, (list, tuple, PVector)):
            text = _messages_text(value, messages, texts)
        else:
            text = _ENCODER.encode(value)
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
