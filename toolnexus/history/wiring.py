"""Helpers the client uses to wire a message log into runs (the log never imports the client)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..core.frozen import FrozenMap
from ..core.toolkit import register, toolkit
from .entry import make_entry
from .tool import TOOL_NAME, chat_history_scoper, chat_history_tool

__all__ = [
    "exchange_entries",
    "record_exchange",
    "require_log",
    "lookup_tool_for",
    "with_lookup_tool",
    "lookup_toolkits",
]

logger = logging.getLogger("toolnexus.history")


class NoMessageLogError(ValueError):
    """The client was created without `message_log`, so it has no history to read or clear."""


def require_log(log: Any) -> Mapping:
    """Return `log` when it is a message log; else raise NoMessageLogError saying how to get one."""
    if log is None:
        raise NoMessageLogError(
            "this client has no message log: create it with "
            "message_log=sqlite_log('history.db') (or in_memory_log(), postgres_log(...))"
        )
    missing = [k for k in ("record", "query", "clear") if not callable(log.get(k))]
    if missing:
        raise NoMessageLogError(f"message_log lacks callable {missing}: not a message log")
    return log


def _report(on_metric: Callable | None, event: Mapping) -> None:
    if on_metric is None:
        return
    try:
        on_metric(event)
    except Exception:  # a broken metrics hook must not turn a logged failure into a lost run
        logger.exception("on_metric raised while reporting a message-log error")


def exchange_entries(
    conversation_id: str | None,
    prompt: str,
    answers: str | Sequence[str] | None,
    asked_at: datetime | None = None,
    now: datetime | None = None,
) -> list[FrozenMap]:
    """Return the log entries of an exchange: the prompt (at `asked_at`, default `now`),
    then each non-empty answer text (at `now`, default the current UTC time), in order.

    `answers` is every assistant text of the run (the text that came with tool calls
    too), or one string."""
    at = now or datetime.now(UTC)
    texts = (answers,) if isinstance(answers, str) else tuple(answers or ())
    entries = [make_entry(conversation_id, prompt, "user", asked_at or at)]
    entries.extend(make_entry(conversation_id, t, "ai", at) for t in texts if t)
    return entries


def record_exchange(
    log: Mapping,
    conversation_id: str | None,
    prompt: str,
    answers: str | Sequence[str] | None,
    now: datetime | None = None,
    strict: bool = False,
    on_metric: Callable[[Mapping], Any] | None = None,
    *,
    asked_at: datetime | None = None,
) -> tuple:
    """Record a run's user prompt and every AI text it produced; return the entries recorded.

    The prompt is stamped `asked_at` (default `now`), the answer `now` (default: the current
    UTC time); empty answers are not recorded. All go in one `record_many`
    when the log has it. A failure never loses the run: it is logged and reported as
    on_metric({"event": "log_error", "error"}) (no conversation id), and raised only if
    `strict`.
    """
    try:
        entries = exchange_entries(conversation_id, prompt, answers, asked_at, now)
        if callable(log.get("record_many")):
            log["record_many"](entries)
        else:
            for e in entries:
                log["record"](e)
        return tuple(entries)
    except Exception as e:
        # Only the exception type and message: never the prompt (it may be private).
        error = f"{type(e).__name__}: {e}"
        logger.warning("message log: recording conversation %r failed: %s", conversation_id, error)
        # Metrics never carry a conversation id (the client's rule): the log line has it.
        _report(on_metric, {"event": "log_error", "error": error})
        if strict:
            raise
        return ()


def lookup_tool_for(
    log: Mapping | None, conversation_id: str | None, enabled: bool = True
) -> FrozenMap | None:
    """Return the `chat_history` tool scoped to `conversation_id`, or None when there is none.

    None when there is no log, no conversation id (privacy: nothing to scope to) or the
    lookup tool is disabled.
    """
    if log is None or conversation_id is None or not enabled:
        return None
    return chat_history_tool(log, scope=conversation_id)


def with_lookup_tool(
    tk: FrozenMap | None, log: Mapping | None, conversation_id: str | None, enabled: bool = True
) -> FrozenMap | None:
    """Return toolkit `tk` plus the scoped lookup tool (a new toolkit; `tk` is unchanged).

    A toolkit that already has a tool named "chat_history" is returned as it is: the
    caller's own tool wins.
    """
    if log is None or conversation_id is None or not enabled:
        return tk
    if tk is not None and TOOL_NAME in tk["index"]:
        return tk
    t = chat_history_tool(log, scope=conversation_id)
    return toolkit(t) if tk is None else register(tk, t)


def lookup_toolkits(
    tk: FrozenMap | None, log: Mapping | None, enabled: bool = True
) -> Callable[[str | None], FrozenMap | None]:
    """Return `scoped(conversation_id)`, equal to `with_lookup_tool(tk, log, conversation_id,
    enabled)`: the toolkit with the lookup tool, and its request entries, are built once
    here, and each conversation only swaps in the tool's handler scoped to it."""
    if log is None or not enabled or (tk is not None and TOOL_NAME in tk["index"]):
        return lambda conversation_id: tk
    scoper = chat_history_scoper(log)
    full = register(tk if tk is not None else toolkit(), scoper("~"))  # "~": replaced below
    at = len(full["tools"]) - 1

    def scoped(conversation_id: str | None) -> FrozenMap | None:
        if conversation_id is None:
            return tk
        t = scoper(conversation_id)
        return full.update(
            {"tools": full["tools"].set(at, t), "index": full["index"].set(TOOL_NAME, t)}
        )

    return scoped
