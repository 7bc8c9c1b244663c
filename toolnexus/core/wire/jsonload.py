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
from array import array
from itertools import accumulate
from json.decoder import WHITESPACE, JSONDecodeError
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_BYTES", "JSONLimitError", "load", "nesting_exceeds"]

MAX_DEPTH = 100  # a response envelope is ~5 deep; a tool's arguments rarely pass 10
MAX_BYTES = 32 * 1024 * 1024

# Every pass below is a regex without backtracking (each match is a fixed width or a
# run of one character class, and a failed attempt costs O(1) or ends the scan), so a
# model's or a provider's bytes cost linear time whatever they hold. An unrolled
# string pattern ('"[^"\\]*(?:\\.[^"\\]*)*"') looks linear but is not: on '"\\"\\"...'
# with no closing quote it rescans from every escaped quote (120 KB: 68 s).
_ESCAPE = re.compile(r"\\.", re.DOTALL)  # a backslash and the character it escapes
_NOT_STRUCTURE = re.compile(r'[^\[\]{}"]+')
_STRING = re.compile(r'"[^"]*"')  # once escapes are gone, a string is quote to quote
# Opening brackets count +1, closing ones -1 (signed bytes), for a running depth.
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class JSONLimitError(ValueError):
    """A JSON document deeper or larger than the limit (never decoded)."""


def nesting_exceeds(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """Return whether the arrays and objects of a JSON text may nest deeper than `max_depth`.

    Exact for well-formed JSON; for malformed text it errs towards True (the decoder
    would reject that text anyway). Linear time on any text: a few C-speed regex passes
    that cannot backtrack, then a running sum over the brackets left.

    >>> nesting_exceeds('{"a": [1, {"b": "[[["}]}', 3), nesting_exceeds("[[[]]]", 2)
    (False, True)
    >>> nesting_exceeds("[" * 100_000, 100)
    True
    """
    opens = text.count("[") + text.count("{")
    if opens <= max_depth:  # the usual case: too few brackets to nest that deep
        return False
    return _max_depth(_skeleton(text)) > max_depth


def _skeleton(text: str) -> str:
    """Return the brackets of `text` that lie outside its strings, in order.

    Escapes go first (left to right, as a JSON reader pairs them); a backslash outside a
    string is an error at that very spot for the decoder, so what it might hide lies
    after the point where decoding stops. A string never closed hides nothing: its
    brackets stay and count (erring towards "too deep").
    """
    if "\\" in text:
        text = _ESCAPE.sub("", text)
    marks = _NOT_STRUCTURE.sub("", text)  # brackets and quotes only
    if '"' in marks:
        marks = _STRING.sub("", marks).replace('"', "")  # and a quote left open
    return marks


def _max_depth(skeleton: str) -> int:
    """Return the deepest running depth of a bracket skeleton (linear, in C).

    Before the first error a JSON text's depth never goes below zero, so the maximum
    over the whole text is at least the depth the decoder reaches.
    """
    if not skeleton:
        return 0
    steps = array("b", skeleton.encode("ascii").translate(_DEPTH_STEP))
    return max(accumulate(steps))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every call (json.loads with an option builds a new one each time, a
# third of a small document's cost); its C scanner keeps no state between calls, as the
# module-level decoder behind json.loads shows.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# Its decode() steps, run inline by `load` (two Python frames and, for a document with no
# surrounding whitespace, both regex matches fewer per document): the C scanner, and
# json's own whitespace pattern for what may surround the value.
_SCAN = _DECODER.scan_once
_SPACE = WHITESPACE.match


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
    if type(data) is bytes:  # an answer's body: decoded as it is, no copy first
        text = data.decode("utf-8")
    else:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    if nesting_exceeds(text, max_depth):
        raise JSONLimitError(f"JSON nested deeper than {max_depth} levels")
    try:
        obj, end = _SCAN(text, _SPACE(text, 0).end() if text[:1] in " \t\n\r" else 0)
    except StopIteration as e:  # what JSONDecoder.raw_decode says
        raise JSONDecodeError("Expecting value", text, e.value) from None
    except RecursionError:  # a caller already deep in its own stack: still only an error
        raise JSONLimitError(f"JSON nested too deep to decode here ({max_depth} allowed)") from None
    if end != len(text):  # only whitespace may follow (JSONDecoder.decode's test)
        end = _SPACE(text, end).end()
        if end != len(text):
            raise JSONDecodeError("Extra data", text, end)
    return obj
