"""What a loaded transcript becomes for the loop, pure: the whole pass and the O(new) one.

A transcript loaded from a store is made ready to replay once per exchange: translated
to the client's dialect (system messages kept in place), repaired (every tool call
answered, no orphan result), made replayable by the dialect (no empty answer or text
block), and each message encoded once (its JSON text, for the request bodies). `whole`
does that to every message: O(history).

Most loads are a transcript this runtime already made ready (the runtime's memo of what
it saved) plus what another worker added since: `extended` makes ready only the new
messages, and gives exactly what `whole` would, whenever it applies:

- translate keeps a transcript as it is exactly when every message is right for the
  dialect and every call id is used once (`native_call_ids`): known of the old messages
  by the memo's `facts` (their call ids, set only when they are right), checked for the
  new ones alone; then it keeps the new ones as they are too, and lifts no system text;
- repair carries only the calls still open from one message to the next: where none is
  open at the end of the old messages (`open_calls`, read from their last turn), the
  repair of the whole is the old messages' repair followed by the new ones' alone;
- replayable and the encoding look at one message at a time.

Anything else (another dialect, a reused or invalid call id, a turn left open, messages
that are not the memo's own objects) falls back to `whole`. The tests prove the equality
with a property over random transcripts split at random points.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from typing import Any, NamedTuple

from pyrsistent import PSet, PVector, pset, pvector

from .frozen import FrozenMap, known_jsons
from .rowvector import RowVector, starts_with
from .steps import text_of, texts_of
from .transcript import freeze_transcript, open_calls, repair
from .wire import DIALECTS
from .wire.translate import native_call_ids, translate

__all__ = ["Loaded", "whole", "extended", "facts_after"]


class Loaded(NamedTuple):
    """A transcript made ready: what the loop replays, the system text lifted out of it,
    the JSON text of each message (None: not kept) and its facts (see `facts_after`)."""

    history: Sequence
    lifted: str
    texts: PVector | None
    facts: tuple[str, PSet] | None


def whole(loaded: Any, dialect: str, policy: str = "error", encode: bool = True) -> Loaded:
    """Return `loaded` made ready for `dialect`: translated (system messages kept in
    place; `policy` for parts the dialect cannot carry), repaired, replayable, encoded.

    `facts` is (dialect, the call ids) when the history is right for the dialect as it
    is (what `translate` would keep), else None.
    """
    if loaded is None or (type(loaded) in _EMPTY_KINDS and not loaded):
        # No history (a run without an id, a new conversation): nothing to look at.
        return Loaded(_NONE, "", _NONE if encode else None, (dialect, _NO_IDS))
    if type(loaded) is RowVector:  # read from rows: its plain messages stay unbuilt
        ready = _whole_rows(loaded, dialect, encode)
        if ready is not None:
            return ready
    # The messages as a list too: each pass below is a C loop, and a list's is several
    # times cheaper than a pvector's (a tree walk per item).
    listed = list(loaded) if isinstance(loaded, PVector) else None
    if listed is not None and set(map(type, listed)) <= _FROZEN:
        frozen = loaded  # what freeze_transcript gives our own values back as
    else:
        frozen = freeze_transcript(loaded)
        listed = list(frozen)
    try:
        odd = _not_plain(listed)
    except TypeError:  # an unhashable role: the general way names it
        odd = None
    ids = _kept_ids(frozen, odd, dialect) if odd is not None else None
    if ids is None:
        return general(frozen, dialect, policy, encode)
    # right as it is, nothing to repair or clean (the usual load): texts_of, on the list
    known = known_jsons(listed) if encode else None
    texts = (pvector(known) if None not in known else texts_of(frozen)) if encode else None
    return Loaded(frozen, "", texts, (dialect, ids))


_FROZEN = frozenset({FrozenMap})
_NONE, _NO_IDS = pvector(), pset()
_EMPTY_KINDS = frozenset({list, tuple, type(_NONE)})


def _whole_rows(loaded: RowVector, dialect: str, encode: bool) -> Loaded | None:
    """`whole` of a transcript read from rows when it keeps it as it is, looking only at
    the messages that are not plain text (the rows' own JSON is each message's); None
    when it may not (`whole` then takes the way of any other transcript)."""
    frozen = loaded.frozen(freeze_transcript)
    k = frozen.rows_count()
    try:
        after = _not_plain(list(frozen.after_rows()))
    except TypeError:  # an unhashable role: the general way names it
        return None
    odd = frozen.odd_rows() + [k + i for i in after]
    ids = _kept_ids(frozen, odd, dialect)
    if ids is None:
        return None
    known = frozen.jsons() if encode else None
    texts = (pvector(known) if None not in known else texts_of(frozen)) if encode else None
    return Loaded(frozen, "", texts, (dialect, ids))


def general(frozen: PVector, dialect: str, policy: str = "error", encode: bool = True) -> Loaded:
    """`whole`, looking at every message (what it does when the quick look cannot tell)."""
    ids = native_call_ids(frozen, dialect, keep_system=True)
    if ids is not None:  # what translate would return, without its second look
        moved, lifted = frozen, ""
    else:
        done = translate(frozen, dialect, on_unsupported_part=policy, keep_system=True)
        moved, lifted = done.messages, done.system
    history = DIALECTS[dialect].replayable(repair(moved))
    if ids is None or history is not frozen:  # changed on the way: its own facts
        ids = native_call_ids(history, dialect, keep_system=True)
    facts = (dialect, ids) if ids is not None else None
    return Loaded(history, lifted, texts_of(history) if encode else None, facts)


def _kept_ids(frozen: PVector, odd: list[int], dialect: str) -> PSet | None:
    """Return the call ids of `frozen` when `whole` keeps it as it is (right for the
    dialect, nothing repaired or cleaned), found looking only at its messages that are
    not plain text; None when it may not (`whole` then takes the general way).

    A plain text message ({role: user|assistant, content: non-empty text}, most of a
    conversation) is right in every dialect with no call id, closes no call (repair
    finds none open before it when the messages before it are kept) and is replayed as
    it is, so the whole is kept exactly when each run of the other messages is kept.
    Which messages are plain is read at C speed from the messages themselves (nothing a
    store or a user may have marked on them). `odd`: the indexes of those messages.
    """
    ids = pset()
    replayable = DIALECTS[dialect].replayable
    for run in _runs(frozen, odd):
        ids = native_call_ids(run, dialect, keep_system=True, taken=ids)
        if ids is None or repair(run) is not run or replayable(run) is not run:
            return None
    return ids


_TEXT_ROLES = frozenset({"user", "assistant"})
_get = dict.get
_TWO, _STR = frozenset({2}), frozenset({str})


def _not_plain(messages: Sequence) -> list[int]:
    """Return the indexes of the messages that are not plain text, at C speed."""
    n = len(messages)
    content = list(map(_get, messages, repeat("content")))
    if set(map(len, messages)) == _TWO and set(map(type, content)) == _STR and all(content):
        if set(map(_get, messages, repeat("role"))) <= _TEXT_ROLES:
            return []  # all plain (a chat without tools): half the passes of the mask
    odd = set(compress(range(n), map(operator.ne, map(len, messages), repeat(2))))
    odd.update(compress(range(n), map(operator.is_not, map(type, content), repeat(str))))
    odd.update(compress(range(n), map(operator.not_, content)))
    roles = map(_TEXT_ROLES.__contains__, map(_get, messages, repeat("role")))
    odd.update(compress(range(n), map(operator.not_, roles)))
    return sorted(odd)


def _runs(messages: PVector, odd: list[int]) -> list[PVector]:
    """Return the runs of consecutive messages at the indexes `odd` (sorted), as slices."""
    runs, start = [], None
    for k, i in enumerate(odd):
        if start is None:
            start = i
        if k + 1 == len(odd) or odd[k + 1] != i + 1:
            runs.append(messages[start : i + 1])
            start = None
    return runs


def extended(memo: Mapping | None, loaded: Any, dialect: str, encode: bool = True) -> Loaded | None:
    """Return `loaded` made ready from the memo of what its first messages became, or None.

    `memo` holds `messages` (a transcript), `history` and `texts` (what `whole` made of
    it) and `facts` (the facts of `messages`: see `facts_after`; None if unknown).
    Applies when `loaded` is those very messages (by identity) followed by new ones, the
    facts are for `dialect`, no tool call is open at the end of `messages` and the new
    ones keep the whole right for the dialect: then the result equals
    `whole(loaded, dialect)` (its facts are known when `history` is `messages`), at the
    cost of the new messages alone. None otherwise (make it whole).
    """
    if memo is None or not isinstance(loaded, PVector):
        return None
    facts, known = memo.get("facts"), memo["messages"]
    if facts is None or facts[0] != dialect or len(loaded) <= len(known):
        return None
    if (encode and memo["texts"] is None) or not starts_with(loaded, known):
        return None
    if open_calls(known):
        return None
    new = freeze_transcript(loaded[len(known) :])
    ids = native_call_ids(new, dialect, keep_system=True, taken=facts[1])
    if ids is None:
        return None
    ready = DIALECTS[dialect].replayable(repair(new))
    out = None  # the facts of the history returned: those of the memo's, plus the new
    if memo["history"] is known:
        out = facts_after(facts, ready, dialect) if ready is not new else (dialect, ids)
    history = _vector(memo["history"]).extend(ready)
    texts = memo["texts"].extend(map(text_of, ready)) if encode else None
    return Loaded(history, "", texts, out)


def _vector(items: Sequence) -> PVector:
    return items if isinstance(items, PVector) else pvector(items)


def facts_after(
    facts: tuple[str, PSet] | None, added: Sequence[Mapping], dialect: str
) -> tuple[str, PSet] | None:
    """Return the facts of a history with `facts` once `added` messages follow it: (the
    dialect, every call id) while the whole stays right for the dialect, else None.

    What the runtime keeps with a saved transcript, so the next load need not look at
    its old messages again: established once per message, when it is first read or
    written.
    """
    if facts is None or facts[0] != dialect:
        return None
    ids = native_call_ids(added, dialect, keep_system=True, taken=facts[1])
    return (dialect, ids) if ids is not None else None
