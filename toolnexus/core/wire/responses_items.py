"""Responses messages <-> the neutral view (view.py), and the rest of its algebra.

Rule 1: pure. A Responses turn is `{"role": "assistant", "items": [...]}` (reasoning,
the said message, function calls) and its results one `{"role": "tool", "items":
[function_call_output, ...]}`; its plain text messages are chat's role-and-content
ones. Writing neutral items is `writers.write_responses`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyrsistent import pvector

from ..frozen import FrozenMap
from . import responses as R

__all__ = ["read", "native", "gathers", "close", "closer", "keeper", "keep_results",
           "RESPONSES_BLOCKS"]  # fmt: skip

# Content part types only the Responses dialect has.
RESPONSES_BLOCKS = frozenset({"input_text", "input_image", "input_file", "output_text"})
_SYSTEM_ROLES = frozenset({"system", "developer"})


def _blocks(message: Mapping) -> list:
    content = message.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def native(message: Mapping) -> bool:
    """Return whether a message is right for Responses as it is (ids aside): its own
    turns and results, non-empty text, or a user's input parts."""
    if R.owns(message):
        return True
    role, content = message.get("role"), message.get("content")
    if set(message) - {"role", "content"} or role not in ("user", "assistant", *_SYSTEM_ROLES):
        return False
    if isinstance(content, str):
        return bool(content)
    blocks = _blocks(message)
    return (
        role == "user"
        and bool(blocks)
        and len(blocks) == len(content)
        and all(b.get("type") in RESPONSES_BLOCKS - {"output_text"} for b in blocks)
    )


def read(m: Mapping, ids: Mapping) -> list[tuple]:
    """Return the neutral items of a Responses turn or results message."""
    items = [i for i in m.get("items") or () if isinstance(i, Mapping)]
    if m.get("role") != "assistant":
        return [("result", ids.get(i.get("call_id"), i.get("call_id")), i.get("output"), False)
                for i in items if i.get("type") == "function_call_output"]  # fmt: skip
    parts, calls, extras, refusals = [], [], [], []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            i = item.get("call_id")
            calls.append((ids.get(i, i), item.get("name", ""), item.get("arguments"), {}))
        elif kind == "reasoning":
            extras.append(item)
        elif kind == "message" or (kind is None and item.get("role") == "assistant"):
            content = item.get("content")
            if isinstance(content, str):
                parts.append(FrozenMap({"type": "text", "text": content}))
                continue
            blocks = _blocks(item)
            refusals += [b.get("refusal") or "" for b in blocks if b.get("type") == "refusal"]
            said = [R.from_part(b) for b in blocks if b.get("type") != "refusal"]
            parts += [p for p in said if p is not None]
    # A refusal is the model's own kind of answer: the view keeps it apart from its text.
    own = {"refusal": "".join(refusals)} if refusals else {}
    return [("assistant", parts, calls, extras, own)]


def gathers(message: Mapping) -> bool:
    """Return True: a results message holds all of its turn's outputs."""
    return True


def closer(output_item: Callable, results_message: Callable, result_items: Callable) -> Callable:
    """Return the `close` of a dialect whose turn's results share one message of its own
    shape (Responses, Gemini), made of its output item and results message."""

    def close(
        caller: Mapping, gathered: Mapping | None, ids: Sequence[str], text: str
    ) -> tuple[FrozenMap | None, list[FrozenMap]]:
        made = [output_item(i, text) for i in ids]
        if gathered is not None:  # one results message per turn: these join it
            return results_message([*result_items(gathered), *made]), []
        return None, [results_message(made)]

    return close


# Error outputs for calls left open: merged into the turn's results message, or a new one.
close = closer(R.output_item, R.results_message, R.result_items)


def keeper(field: str, is_result: Callable, call_id: Callable) -> Callable:
    """Return the `keep_results` of a dialect whose results are elements of a message's
    `field` (Responses' items, Gemini's parts): `is_result(element)` tells one,
    `call_id(element)` the call it answers."""

    def keep_results(message: Mapping, wanted: Callable) -> Mapping | None:
        given = message.get(field) or ()
        kept = [e for e in given if not is_result(e) or wanted(call_id(e))]
        if len(kept) == len(given):
            return message  # the same object: nothing dropped
        return FrozenMap(message).set(field, pvector(kept)) if kept else None

    return keep_results


def _is_output(item: object) -> bool:
    return isinstance(item, Mapping) and item.get("type") == "function_call_output"


# A results message with only the outputs `wanted(call_id)` accepts (None: none left).
keep_results = keeper("items", _is_output, lambda item: item.get("call_id"))
