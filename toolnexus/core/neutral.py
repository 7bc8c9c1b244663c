"""The neutral view, public: any conversation as neutral items, and back in any dialect.

    items = to_neutral(stored)                 # [("user", "hi"), ("assistant", ...), ...]
    back = from_neutral(items, "anthropic")    # a transcript in that dialect

An item is one of (see core/wire/view.py, which every feature of the library reads):

    ("system", text)
    ("user", text | [part, ...])                        parts as in toolnexus.parts
    ("assistant", [part, ...], [call, ...], [extra, ...], {own fields})
        call: (id, name, arguments: JSON text or an object, {the call's own fields})
    ("result", call id, content: text or a list of blocks, is_error)

Reading is lossless for what another dialect can carry; `extras` and `own` hold what only
the message's own dialect carries (reasoning, signatures, a refusal), which a writer of
another dialect drops or turns to text. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector

from .transcript import freeze_transcript
from .wire import DEFAULT_STYLE, DIALECTS, view
from .wire.parts import POLICIES
from .wire.translate import translate

__all__ = ["to_neutral", "from_neutral"]

_ARITY = {"system": 2, "user": 2, "assistant": 5, "result": 4}


def to_neutral(transcript: Sequence[Mapping]) -> list[tuple]:
    """Return a transcript's neutral items (any dialect, mixed ones too), in order.

    >>> to_neutral([{"role": "user", "content": "hi"},
    ...             {"role": "tool", "tool_call_id": "c1", "content": "4"}])
    [('user', 'hi'), ('result', 'c1', '4', False)]
    """
    return view.items(freeze_transcript(transcript))


def _check(item: Any, n: int) -> None:
    """Raise ValueError saying why `item` (the n-th) is not a neutral item."""
    if not isinstance(item, tuple) or not item or _ARITY.get(item[0]) != len(item):
        kinds = ", ".join(f"{k!r} ({a} fields)" for k, a in _ARITY.items())
        raise ValueError(f"item {n}: a neutral item is a tuple of one of {kinds}, got {item!r:.80}")
    if item[0] == "assistant" and not all(isinstance(c, tuple) and len(c) == 4 for c in item[2]):
        raise ValueError(f"item {n}: each call is (id, name, arguments, own fields)")


def from_neutral(
    items: Sequence[tuple], style: str = DEFAULT_STYLE, *, on_unsupported_part: str = "error"
) -> PVector:
    """Return neutral items as a transcript in `style` (a row of the dialect registry).

    System items stay in place as system messages (as the loop saves them); tool ids the
    dialect refuses are remapped, a call and its results alike; a part it cannot carry
    follows `on_unsupported_part` ("error": a ValueError naming it, "text": a placeholder).

    >>> t = from_neutral([("user", "hi"), ("assistant", [], [("functions.f:0", "f", {}, {})],
    ...                   [], {}), ("result", "functions.f:0", "4", False)], "anthropic")
    >>> [m["role"] for m in t], t[1]["content"][0]["id"] == t[2]["content"][0]["tool_use_id"]
    (['user', 'assistant', 'user'], True)
    """
    if style not in DIALECTS:
        raise ValueError(f"unknown style {style!r}: expected one of {tuple(DIALECTS)}")
    if on_unsupported_part not in POLICIES:
        raise ValueError(f"on_unsupported_part must be one of {POLICIES}")
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ValueError("neutral items are a list of tuples (see toolnexus.to_neutral)")
    for n, item in enumerate(items):
        _check(item, n)
    out = view.transcript_of(items, style, on_unsupported_part)
    return translate(out, style, keep_system=True, on_unsupported_part=on_unsupported_part).messages
