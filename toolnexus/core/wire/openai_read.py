"""Reading a chat completions answer's JSON (pure): shape checks that name what is wrong,
and the fields of a message or call the loop does not read (kept and replayed as sent).
Shared by the whole-answer decoder (`openai`) and the stream's (`openai_stream`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector

from .common import MalformedResponse, to_json

__all__ = ["READ_CALL", "extra_fields", "args_text", "mapping", "array", "str_or_none"]


# The tool call fields the loop reads (everything else on a call is kept as it came).
READ_CALL = frozenset({"id", "type", "function", "index"})
_NOTHING = (None, "", [], {})  # a field holding these says nothing (`annotations: []`)
# Fields a provider requires back on replay even when empty: DeepSeek refuses an assistant
# message of its thinking mode without `reasoning_content` ("Missing `reasoning_content`
# field"), and its answer may carry it as "".
_KEPT_EMPTY = frozenset({"reasoning_content"})


def extra_fields(given: Mapping, read: frozenset) -> dict:
    """Return the fields of `given` the loop does not read (None values: nothing said;
    a field the provider wants back even empty is kept as it came)."""
    if given.keys() <= read:  # the usual case: nothing else (one C-level set check)
        return {}
    return {
        k: v
        for k, v in given.items()
        if k not in read and (v not in _NOTHING or (k in _KEPT_EMPTY and isinstance(v, str)))
    }


def args_text(raw: Any) -> str:
    """Return a call's arguments as JSON text (a provider that sent an object gets it encoded)."""
    if isinstance(raw, str):
        return raw
    return to_json(raw).decode("utf-8")


def mapping(value: Any, where: str) -> Mapping:
    """Return `value` as an object ({} for null); else MalformedResponse naming `where`."""
    if type(value) is dict:  # what json.loads makes: no ABC check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedResponse(f"{where} is a JSON {type(value).__name__}, not an object")
    return value


def array(value: Any, where: str) -> Sequence:
    """Return `value` as an array (() for null); else MalformedResponse naming `where`."""
    if type(value) is list:  # what json.loads makes
        return value
    if value is None:
        return ()
    if not isinstance(value, (list, tuple, PVector)):
        raise MalformedResponse(f"{where} is a JSON {type(value).__name__}, not an array")
    return value


def str_or_none(value: Any) -> str | None:
    """Return `value` if it is a string, else None."""
    return value if isinstance(value, str) else None
