"""Fork and rewind a stored conversation, cutting only at turn boundaries.

    fork(store, "chat-1", "chat-1-alt", at=4)   # the first 4 messages, a new conversation
    rewind(store, "chat-1")                      # drop the last turn

A turn boundary is where a turn starts (a user message that answers no tool call,
`core.transcript.safe_cuts`) or the end: a cut anywhere else would orphan a tool
result or leave a call unanswered.

A durable store forks without pulling the conversation through Python, through its
fused "fork" call (see store.fused; it needs get and save): `fork(src, dst, at, check)
-> count | None`, which copies on the server (SQL INSERT ... SELECT, a Redis script),
raises KeyError for an absent `src`, and calls `check(message)` on the one message at
index `at` (None when `at` is the end), which raises ValueError if it is no turn start.
A decorator that replaces `get` or `save` (capped, encrypted, namespaced...) drops it,
so it is never bypassed, and any other store forks by get + save.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

from ..core.transcript import freeze_transcript, is_turn_start, safe_cuts
from .fused import fused_call

__all__ = ["fork", "rewind", "turn_boundaries", "check_boundary", "decode_row", "forked_digest"]


def turn_boundaries(transcript: Any) -> tuple[int, ...]:
    """Return the message counts a prefix of `transcript` may have: its turn starts and its end.

    >>> turn_boundaries([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
    ...                  {"role": "user", "content": "q2"}])
    (2, 3)
    """
    t = freeze_transcript(transcript)
    return tuple(sorted(i for i in {*safe_cuts(t), len(t)} if i > 0))


def check_boundary(at: int, message: Mapping | None) -> None:
    """Raise ValueError unless a prefix of `at` messages ending before `message` is whole.

    `message` is the message at index `at` (None: `at` is the end of the transcript).
    """
    if message is not None and not is_turn_start(message):
        raise ValueError(
            f"at={at} is not a turn boundary: message {at} is a {message.get('role')!r} message"
            " inside a turn (pick a count from turn_boundaries, or `show` numbering)"
        )


def decode_row(backend: str, id: str, version: Any, text: Any) -> Mapping:
    """Return the message of one stored row (for a backend's boundary check)."""
    from . import _rows

    return _rows.decode_rows(backend, id, version, 1, [(0, text)])[0]


def forked_digest(digest: str, count: int, n: int) -> str:
    """Return the head digest of a fork of `n` of `count` messages whose source has `digest`.

    A whole copy keeps the digest (same messages, same chain). A prefix's chain is not
    known without reading its messages, so it gets a digest no transcript has: the next
    save of the fork then replaces its rows once instead of appending (never wrong).
    """
    if n == count:
        return digest
    import uuid

    return f"fork-{uuid.uuid4().hex}"


def _check_at(at: Any) -> None:
    if at is not None and (not isinstance(at, int) or isinstance(at, bool) or at < 1):
        raise ValueError(f"at must be a message count >= 1, got {at!r}")


def _lock(store: Mapping, id: str):
    lock = store.get("lock")
    return lock(id) if callable(lock) else nullcontext()


def fork(store: Mapping, src: str, dst: str, *, at: int | None = None) -> int | None:
    """Copy conversation `src` (or its first `at` messages) to `dst`; return the count copied.

    `at` must be a turn boundary (else ValueError); `src` is never changed and `dst` is
    replaced, under dst's lock (an exchange in flight on dst is never undone by it).
    KeyError if `src` is absent. The count is None when the store copied without reading
    it (a whole file copy).
    """
    _check_at(at)
    if src == dst:
        raise ValueError("fork: src and dst are the same conversation")
    fast = fused_call(store, "fork")
    if fast is not None:
        with _lock(store, dst):  # an exchange in flight on dst saves first, then the fork
            return fast(src, dst, at, lambda m: check_boundary(at, m))
    transcript = store["get"](src)
    if transcript is None:
        raise KeyError(f"no conversation {src!r} to fork")
    t = freeze_transcript(transcript)
    n = len(t) if at is None else at
    if n > len(t):
        raise ValueError(f"at={at} is past the end of {src!r} ({len(t)} messages)")
    check_boundary(n, t[n] if n < len(t) else None)
    with _lock(store, dst):
        store["save"](dst, t[:n])
    return n


def rewind(store: Mapping, id: str, turns: int = 1) -> Any:
    """Drop the last `turns` turns of a conversation; return what is kept (and saved).

    A leading system message stays. ValueError when the conversation has fewer turns;
    KeyError when it is absent. Holds the store's "lock" (when it has one) around the
    read and the save, so a run on the same id is never half undone.
    """
    if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
        raise ValueError(f"turns must be an integer >= 1, got {turns!r}")
    with _lock(store, id):
        transcript = store["get"](id)
        if transcript is None:
            raise KeyError(f"no conversation {id!r} to rewind")
        t = freeze_transcript(transcript)
        starts = safe_cuts(t)
        if turns > len(starts):
            raise ValueError(f"{id!r} has {len(starts)} turns, cannot rewind {turns}")
        kept = t[: starts[-turns]]
        store["save"](id, kept)
    return kept
