"""Conversation ids, checked the same way by every store, pure."""

from __future__ import annotations

from typing import Any

__all__ = ["check_id", "check_text_id"]


def check_id(id: Any) -> str:
    """Return `id` if it is a conversation id (a non-empty string), else raise ValueError:
    every store refuses a bad id the same way."""
    if not isinstance(id, str) or not id:
        raise ValueError(f"a conversation id must be a non-empty string, got {id!r}")
    return id


def check_text_id(id: Any, desc: str) -> str:
    """Return `id` if a store keeping ids as UTF-8 text can hold it, else raise ValueError
    (a lone surrogate: the drivers would raise a raw UnicodeEncodeError mid-statement)."""
    check_id(id)
    if not id.isascii():  # the usual id is ASCII: no encoding tried
        try:
            id.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"{desc}: conversation id {id!r:.80} holds a lone surrogate "
                f"({id[e.start : e.end]!r} at {e.start}), which this store's UTF-8 text "
                "cannot hold: pass valid Unicode, or wrap the store in sanitize_ids to "
                "keep any string as an id"
            ) from None
    return id
