"""Bounded JSON decoding: a depth and size limit, and never a RecursionError.

Bytes from a provider (response bodies, SSE data, tool arguments a model wrote) are
untrusted: `[[[[...` 100,000 deep makes `json.loads` raise RecursionError, and a deep
value that does decode would crash whatever walks it next. `load` checks the nesting
before decoding, in C-speed passes over the text, and raises `ValueError` (a
`JSONLimitError` for a limit) for anything that is not a bounded JSON document.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_BYTES", "JSONLimitError", "load", "nesting_exceeds"]

MAX_DEPTH = 100  # a response envelope is ~5 deep; a tool's arguments rarely pass 10
MAX_BYTES = 32 * 1024 * 1024

# A JSON string (which may hold brackets that are not structure); tolerant of bad
# escapes, which json.loads rejects later anyway.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: C-speed runs
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PAIR = re.compile(r"[\[{][\]}]")  # an innermost pair (a mismatched one fails to decode)


class JSONLimitError(ValueError):
    """A JSON document deeper or larger than the limit (never decoded)."""


def nesting_exceeds(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """Return whether the arrays and objects of a JSON text may nest deeper than `max_depth`.

    Exact for well-formed JSON; for malformed text it errs towards True (the decoder
    would reject that text anyway). Each pass removes every innermost pair, so a
    document of depth d empties in d passes; at most `max_depth` passes run.

    >>> nesting_exceeds('{"a": [1, {"b": "[[["}]}', 3), nesting_exceeds("[[[]]]", 2)
    (False, True)
    >>> nesting_exceeds("[" * 100_000, 100)
    True
    """
    opens = text.count("[") + text.count("{")
    if opens <= max_depth:  # the usual case: too few brackets to nest that deep
        return False
    skeleton = _NOT_BRACKET.sub("", _STRING.sub("", text))
    passes = 0
    while skeleton and passes < max_depth:
        skeleton, n = _PAIR.subn("", skeleton)
        if n == 0:
            break
        passes += 1
    # What is left never closed (or nests deeper still): count it all as depth.
    left = skeleton.count("[") + skeleton.count("{")
    return passes + left > max_depth if skeleton else False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every call (json.loads with an option builds a new one each time, a
# third of a small document's cost); its C scanner keeps no state between calls, as the
# module-level decoder behind json.loads shows.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def load(data: str | bytes | bytearray, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES):
    """Return the value of a JSON text, or raise ValueError (JSONLimitError for a limit).

    NaN and Infinity (which Python's json accepts) are refused: they are not JSON.

    >>> load(b'{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> try:
    ...     load("[" * 5 + "]" * 5, max_depth=4)
    ... except JSONLimitError as e:
    ...     print(e)
    JSON nested deeper than 4 levels
    """
    if len(data) > max_bytes:
        raise JSONLimitError(f"JSON larger than {max_bytes} bytes ({len(data)})")
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    if nesting_exceeds(text, max_depth):
        raise JSONLimitError(f"JSON nested deeper than {max_depth} levels")
    try:
        return _DECODER.decode(text)
    except RecursionError:  # a caller already deep in its own stack: still only an error
        raise JSONLimitError(f"JSON nested too deep to decode here ({max_depth} allowed)") from None
