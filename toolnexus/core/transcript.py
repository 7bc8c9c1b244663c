"""Pure transcript algebra: tool calls and results, turn groups, safe cuts, trim, repair,
and the versioned JSON freeze/thaw every durable store uses.

A transcript is a sequence of messages in the provider's own shape (openai or
anthropic); every function here reads the dialect from the messages themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from pyrsistent import PVector, pvector

from .frozen import FrozenMap, freeze, thaw
from .rowvector import RowVector
from .wire import view
from .wire.jsonload import MAX_BYTES, load

__all__ = [
    "is_turn_start",
    "FORMAT_VERSION",
    "INTERRUPTED",
    "TranscriptFormatError",
    "dangling",
    "dumps",
    "freeze_transcript",
    "readable",
    "is_system",
    "is_tool_result",
    "loads",
    "open_calls",
    "repair",
    "safe_cuts",
    "thaw_transcript",
    "tool_call_ids",
    "tool_result_ids",
    "trim",
    "trim_past",
    "turn_groups",
]

FORMAT_VERSION = 1


class TranscriptFormatError(ValueError):
    """Raised when data is not a transcript this version of toolnexus can read."""


def freeze_transcript(messages: Sequence[Mapping] | None) -> PVector:
    """Return `messages` as an immutable pvector of FrozenMaps, every object in its
    order (a no-op on frozen input).

    >>> t = freeze_transcript([{"role": "user", "content": "hi"}])
    >>> type(t).__name__, t[0] == {"role": "user", "content": "hi"}, freeze_transcript(t) is t
    ('PVector', True, True)
    """
    if messages is None:
        return pvector()
    if type(messages) is RowVector:  # its rows were checked when read: only the rest
        return messages.frozen(freeze_transcript)
    if isinstance(messages, PVector) and set(map(type, messages)) <= {FrozenMap}:
        return messages  # already frozen (our own values): no per-message checks
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TranscriptFormatError(f"a transcript is a list of messages, got {type(messages)}")
    for m in messages:
        check_message(m)
    # Through a list: a tuple of messages becomes a pvector too.
    return freeze(list(messages))


def check_message(m: Any) -> None:
    """Raise TranscriptFormatError unless `m` is a message: a map with a string "role"
    and, if it has "tool_calls", a list of them.

    >>> check_message({"role": "assistant", "content": None, "tool_calls": 5})
    Traceback (most recent call last):
    ...
    toolnexus.core.transcript.TranscriptFormatError: a message's tool_calls must be a list, got int
    """
    if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
        raise TranscriptFormatError(f"not a message (a map with a string 'role'): {m!r:.200}")
    calls = m.get("tool_calls")
    if calls is not None and not _is_list(calls):
        raise TranscriptFormatError(
            f"a message's tool_calls must be a list, got {type(calls).__name__}"
        )


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def thaw_transcript(messages: Sequence[Mapping]) -> list[dict]:
    """Return a transcript as plain lists and dicts (JSON-ready)."""
    return thaw(messages)


def json_text(plain: Any) -> str:
    """Return the compact JSON text of plain data as it is stored (non-ASCII kept); NaN or
    infinity, which no JSON reader (`loads` included) would take back, is a
    TranscriptFormatError.

    >>> json_text({"role": "user", "n": float("nan")})
    Traceback (most recent call last):
    ...
    toolnexus.core.transcript.TranscriptFormatError: not JSON: Out of range float values ...
    """
    try:
        return json.dumps(plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as e:
        raise TranscriptFormatError(f"not JSON: {e}") from None


def dumps(messages: Sequence[Mapping]) -> str:
    """Return the versioned JSON document of a transcript (see `json_text`)."""
    return json_text({"version": FORMAT_VERSION, "messages": thaw(messages)})


def _migrate(doc: Any) -> list:
    """Return the message list of any known format version (a bare list is version 0)."""
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, Mapping) or "version" not in doc:
        raise TranscriptFormatError("not a transcript document (no 'version')")
    if doc["version"] != FORMAT_VERSION:
        raise TranscriptFormatError(
            f"unknown transcript format version {doc['version']!r}"
            f" (this toolnexus reads 0..{FORMAT_VERSION})"
        )
    if doc.get("messages") is None:  # never written so: cut short or edited, not empty
        raise TranscriptFormatError("a transcript document has no 'messages' list")
    return doc["messages"]


def loads(text: str | bytes) -> PVector:
    """Return the frozen transcript of a versioned JSON document (TranscriptFormatError if not)."""
    try:
        doc = load(text)  # bounded: a stored document nested 100,000 deep is only corrupt
    except (ValueError, TypeError) as e:
        raise TranscriptFormatError(f"not JSON: {e}") from None
    return freeze_transcript(_migrate(doc))


# ---- the algebra: tool calls, results, turn groups, safe cuts ---------------
#
# Dialect-neutral: each message is read through the record of the dialect whose shape
# it is (core.wire.view.record_of): which calls it makes, which it answers, whether a
# turn's results share one message, how calls left open are answered. A message that
# answers tool calls is never a safe place to start a transcript: the calls it answers
# would be cut away.

INTERRUPTED = "Error: interrupted: the tool call did not complete, so it has no result."


def is_system(message: Mapping) -> bool:
    """Return whether a message is a system message.

    >>> is_system({"role": "system", "content": "be brief"}), is_system({"role": "user"})
    (True, False)
    """
    return message.get("role") == "system"


def tool_call_ids(message: Mapping) -> tuple[str, ...]:
    """Return the ids of the tool calls a message makes (openai or anthropic shape).

    >>> tool_call_ids({"role": "assistant", "content": None,
    ...                "tool_calls": [{"id": "c1", "type": "function",
    ...                                "function": {"name": "f", "arguments": "{}"}}]})
    ('c1',)
    >>> tool_call_ids({"role": "assistant", "content": [{"type": "text", "text": "hm"},
    ...                {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]})
    ('t1',)
    """
    return view.call_ids(message)


def tool_result_ids(message: Mapping) -> tuple[str, ...]:
    """Return the ids of the tool calls a message answers (openai or anthropic shape).

    >>> tool_result_ids({"role": "tool", "tool_call_id": "c1", "content": "4"})
    ('c1',)
    >>> tool_result_ids({"role": "user", "content": [
    ...     {"type": "tool_result", "tool_use_id": "t1", "content": "4", "is_error": False}]})
    ('t1',)
    >>> tool_result_ids({"role": "user", "content": "hi"})
    ()
    """
    return view.result_ids(message)


def _shape(message: Mapping) -> tuple[tuple, tuple]:
    """Return `(tool_result_ids(message), tool_call_ids(message))`."""
    if len(message) == 2 and type(message.get("content")) is str and message.get("role") != "tool":
        return (), ()  # plain text (most messages): no calls, no results
    return tool_result_ids(message), tool_call_ids(message)


def is_tool_result(message: Mapping) -> bool:
    """Return whether a message answers tool calls (so a transcript must not start with it).

    >>> is_tool_result({"role": "tool", "tool_call_id": "c1", "content": "4"})
    True
    >>> is_tool_result({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    False
    """
    return bool(tool_result_ids(message))


def _body_start(transcript: Sequence[Mapping]) -> int:
    # A leading system message belongs to the whole conversation, not to a turn.
    return 1 if transcript and is_system(transcript[0]) else 0


def is_turn_start(message: Mapping) -> bool:
    """Return whether a message starts a turn: a user message that answers no tool call.

    Only there may a retained tail start: a tool result would lose its call, and an
    assistant message may not lead (Anthropic requires the first message be a user's).

    >>> is_turn_start({"role": "user", "content": "hi"})
    True
    >>> is_turn_start({"role": "assistant", "content": "hello"})
    False
    """
    return message.get("role") == "user" and not is_tool_result(message)


def safe_cuts(transcript: Sequence[Mapping]) -> tuple[int, ...]:
    """Return the indices where a retained tail may start: the turn starts.

    A leading system message is not a cut point: it is kept apart from any tail.

    >>> safe_cuts([{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
    ...            {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
    ...            {"role": "tool", "tool_call_id": "c", "content": "r"},
    ...            {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}])
    (1, 5)
    """
    start = _body_start(transcript)
    return tuple(i for i in range(start, len(transcript)) if is_turn_start(transcript[i]))


def turn_groups(transcript: Sequence[Mapping]) -> tuple[PVector, ...]:
    """Return the transcript split into turns: each group starts at a safe cut.

    A leading system message is a group of its own; a turn is a user message and all
    that follows it up to the next turn start (answers, tool calls and their results),
    so no group can be split without orphaning a result or leading with an assistant.

    >>> [len(g) for g in turn_groups([{"role": "user", "content": "q"},
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}, {"id": "b"}]},
    ...     {"role": "tool", "tool_call_id": "a", "content": "1"},
    ...     {"role": "tool", "tool_call_id": "b", "content": "2"},
    ...     {"role": "assistant", "content": "3"}, {"role": "user", "content": "q2"}])]
    [5, 1]
    """
    t = freeze_transcript(transcript)
    start = _body_start(t)
    bounds = sorted({start, *safe_cuts(t), len(t)})
    head = (t[:1],) if start else ()
    return head + tuple(t[a:b] for a, b in pairwise(bounds) if b > a)


def trim(transcript: Sequence[Mapping], max_messages: int) -> PVector:
    """Return the longest tail of at most `max_messages` messages starting at a safe cut.

    A leading system message is kept as is and does not count against the budget. When
    no safe tail fits, the tail from the most recent safe cut is returned (safety over
    size): a tool result never loses its call. Returns a new transcript; does not modify
    the input.

    >>> t = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
    ...      {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
    ...      {"role": "tool", "tool_call_id": "c", "content": "r"},
    ...      {"role": "assistant", "content": "a"},
    ...      {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]
    >>> [m["role"] for m in trim(t, 3)]
    ['system', 'user', 'assistant']
    >>> [m["role"] for m in trim(t, 1)]
    ['system', 'user', 'assistant']
    """
    if not isinstance(max_messages, int) or isinstance(max_messages, bool) or max_messages < 0:
        raise ValueError(f"max_messages must be an integer >= 0, got {max_messages!r}")
    t = freeze_transcript(transcript)
    start = _body_start(t)
    if len(t) - start <= max_messages:
        return t
    cuts = safe_cuts(t)
    fitting = [i for i in cuts if len(t) - i <= max_messages]
    cut = fitting[0] if fitting else (cuts[-1] if cuts else len(t))
    # pvector slices and extend share structure: this costs O(kept), not O(len(t)).
    return t[:start] + t[cut:]


def trim_past(transcript: Sequence[Mapping], max_messages: int, keep: int) -> PVector:
    """Return the transcript as it is while it holds at most `max_messages` messages,
    else `trim(transcript, keep)`: cut rarely, in bigger steps, so its front holds
    between cuts (a provider's prompt cache keeps hitting it). The leading system
    message counts for neither; the cut is at a safe boundary, as `trim`'s.

    >>> t = [{"role": "user", "content": str(i)} for i in range(5)]
    >>> len(trim_past(t, 5, 2)), [m["content"] for m in trim_past(t, 4, 2)]
    (5, ['3', '4'])
    """
    if not isinstance(keep, int) or isinstance(keep, bool) or not 0 <= keep <= max_messages:
        raise ValueError(f"keep must be an integer from 0 to {max_messages}, got {keep!r}")
    t = freeze_transcript(transcript)
    if len(t) - _body_start(t) <= max_messages:
        return t
    return trim(t, keep)


# ---- repair: every call answered right after it, no result without its call --


def _close(out: list, caller: Mapping | None, open_calls: list, merge_at: int | None) -> None:
    """Append (or merge) synthesized results for the calls still open; mutates `out` only."""
    if not open_calls:
        return
    gathered = out[merge_at] if merge_at is not None else None
    record = view.record_of(gathered if gathered is not None else caller)
    merged, more = record.close(caller, gathered, open_calls, INTERRUPTED)
    if merged is not None:
        out[merge_at] = merged
    out.extend(more)


def _answered_part(message: FrozenMap, open_calls: list) -> FrozenMap | None:
    """Return `message` without the results that answer no open call (None if nothing is left).

    Removes the answered ids from `open_calls` (a local list of the repair pass).
    """

    def wanted(i: Any) -> bool:
        if i in open_calls:
            open_calls.remove(i)
            return True
        return False

    return view.record_of(message).keep_results(message, wanted)


def repair(transcript: Sequence[Mapping]) -> PVector:
    """Return a transcript every provider accepts: each tool call answered, no orphan result.

    Calls left without a result (a crash mid-turn, a hand-written store) get a
    synthesized error result ("interrupted") right after their message, in that
    message's dialect; a result whose call is not the message just before it is
    dropped. Idempotent; a well-formed transcript is returned as is (the same object).

    >>> t = repair([{"role": "user", "content": "q"},
    ...             {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}])
    >>> t[-1]["role"], t[-1]["tool_call_id"], t[-1]["content"].split(":")[1].strip()
    ('tool', 'c', 'interrupted')
    >>> len(repair([{"role": "tool", "tool_call_id": "x", "content": "?"}]))
    0
    """
    t = freeze_transcript(transcript)
    out, open_calls, caller, merge_at, changed = _walk(t)
    changed = changed or bool(open_calls)
    _close(out, caller, open_calls, merge_at)
    return pvector(out) if changed else t


def _walk(t: Sequence[Mapping]) -> tuple[list, list, Mapping | None, int | None, bool]:
    """Return repair's pass over `t` before its last close: (the messages so far, the calls
    still open, the message that made them, the result message to merge into, whether
    anything changed)."""
    out: list = []
    open_calls: list = []
    caller: Mapping | None = None
    merge_at: int | None = None  # this turn's anthropic result message, to merge into
    changed = False
    for m in t:
        results, calls = _shape(m)
        if results:
            kept = _answered_part(m, open_calls)
            changed = changed or kept is not m
            if kept is not None and is_tool_result(kept):
                out.append(kept)
                merge_at = len(out) - 1 if view.record_of(kept).gathers(kept) else merge_at
                continue
            if kept is None:
                continue
            m, calls = kept, ()  # only non-result blocks are left: an ordinary user message
        changed = changed or bool(open_calls)
        _close(out, caller, open_calls, merge_at)
        out.append(m)
        caller, open_calls, merge_at = m, list(calls), None
    return out, open_calls, caller, merge_at, changed


def open_calls(transcript: Sequence[Mapping]) -> tuple:
    """Return the ids of the tool calls `repair` would find unanswered at the end of a
    transcript (the last turn's), reading only its tail: O(the last turn).

    Where this is empty, repairing a transcript with more messages after it is repairing
    each part alone (nothing open crosses the boundary; see core.loading).

    >>> open_calls([{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}])
    ('c',)
    >>> open_calls([{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
    ...             {"role": "tool", "tool_call_id": "c", "content": "4"}])
    ()
    """
    # The walk starts over at each message that answers nothing: from the last one on,
    # it goes as it would over the whole transcript.
    start = len(transcript)
    while start > 0:
        start -= 1
        if not _shape(transcript[start])[0]:
            break
    return tuple(_walk(transcript[start:])[1])


def dangling(transcript: Sequence[Mapping]) -> FrozenMap:
    """Return {"unanswered": call ids without a result, "orphaned": result ids without a call}.

    A result counts only in the messages right after its call, as providers require.

    >>> d = dangling([{"role": "tool", "tool_call_id": "x", "content": "?"}])
    >>> d["unanswered"], d["orphaned"]
    ((), ('x',))
    """
    unanswered: list = []
    orphaned: list = []
    open_calls: list = []
    for m in freeze_transcript(transcript):
        results, calls = _shape(m)
        if results:
            for i in results:
                if i in open_calls:
                    open_calls.remove(i)
                else:
                    orphaned.append(i)
            continue
        unanswered += open_calls
        open_calls = list(calls)
    unanswered += open_calls
    return FrozenMap({"unanswered": tuple(unanswered), "orphaned": tuple(orphaned)})


def readable(text: str | bytes, what: str = "a message", bound: int = MAX_BYTES) -> str | bytes:
    """Return `text` (JSON about to be stored) if a store's reader takes it back, else raise
    TranscriptFormatError: a save that no later get could read is refused before it is
    written (UTF-8 with no lone surrogate, at most `bound` bytes, as `load` reads; bytes
    are UTF-8 already: their size alone is checked).

    >>> readable('{"a":1}')
    '{"a":1}'
    >>> readable("\\ud83d")
    Traceback (most recent call last):
    ...
    toolnexus.core.transcript.TranscriptFormatError: a message holds a lone surrogate ...
    """
    if len(text) * 4 <= bound and text.isascii():
        return text  # the usual case: no encode needed
    try:
        size = len(text) if type(text) is bytes else len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise TranscriptFormatError(
            f"{what} holds a lone surrogate ({text[e.start : e.end]!r} at {e.start}), which is "
            "not UTF-8: no store can keep it (half of a character split apart: repair the "
            "text before saving)"
        ) from None
    if size > bound:
        raise TranscriptFormatError(
            f"{what} is {size:,} bytes as JSON, over the {bound:,} bytes a store reads back "
            "per message: it would be saved but never read again (send a large file by "
            "URL, or bound parts with max_part_bytes)"
        )
    return text
