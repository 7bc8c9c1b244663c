"""The `chat_history` tool: lets a model search its own conversation's message log."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..core.frozen import FrozenMap
from ..core.tool import tool, tool_result, with_execute
from .entry import parse_when

__all__ = ["chat_history_tool", "chat_history_scoper", "render", "scope_ids", "TOOL_NAME"]

TOOL_NAME = "chat_history"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_LINE_CHARS = 400  # one long message must not eat the whole budget

_DATE_HELP = (
    "ISO 8601 date or date-time in UTC unless an offset is given, e.g. 2026-05-08, "
    "2026-05-08T14:30Z or 2026-05-08T14:30+02:00; 'today' and 'yesterday' also work."
)

SCHEMA = {
    "type": "object",
    "properties": {
        "contains": {
            "type": "string",
            "description": "Only messages containing this text (case-insensitive, literal).",
        },
        "since": {
            "type": "string",
            "description": "Only messages at or after this time. A date alone means from the "
            "start of that day. " + _DATE_HELP,
        },
        "until": {
            "type": "string",
            "description": "Only messages at or before this time. A date alone means up to the "
            "end of that day. " + _DATE_HELP,
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIMIT,
            "description": f"At most this many of the newest matches (default {DEFAULT_LIMIT}).",
        },
    },
    "additionalProperties": False,
}


def scope_ids(scope: Any) -> tuple[str, ...]:
    """Return the conversation ids of a scope: one id, or an explicit collection of ids.

    >>> scope_ids("user-42")
    ('user-42',)
    >>> scope_ids({"b", "a"})
    ('a', 'b')
    """
    if isinstance(scope, str):
        ids: Collection = (scope,)
    elif isinstance(scope, Collection) and not isinstance(scope, (bytes, Mapping)):
        ids = scope
    else:
        raise ValueError(
            "scope must be a conversation id or a collection of conversation ids, "
            f"got {type(scope).__name__}"
        )
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise ValueError(f"scope must name at least one non-empty conversation id, got {scope!r}")
    return tuple(sorted(set(ids)))


def _line(e: Mapping, show_conversation: bool) -> str:
    text = " ".join(e["text"].split())  # one line per message, whatever it contained
    if len(text) > _LINE_CHARS:
        text = text[: _LINE_CHARS - 1] + "…"
    where = f" [{e['conversation_id']}]" if show_conversation else ""
    return f"{e['timestamp']:%Y-%m-%d %H:%M} UTC{where} {e['direction']}: {text}"


def _omitted(count: int) -> str:
    return f"… {count} older not shown (narrow with since/until/contains)"


def render(
    entries: Sequence[Mapping], max_chars: int, now: datetime, show_conversation: bool = False
) -> str:
    """Return entries (oldest first) as dated lines, newest first, in at most `max_chars`.

    >>> from toolnexus.history.entry import make_entry
    >>> es = [make_entry("c", t, d, datetime(2026, 5, 8, h, tzinfo=UTC))
    ...       for t, d, h in [("hi", "user", 9), ("hello!", "ai", 10)]]
    >>> print(render(es, 4000, datetime(2026, 5, 9, tzinfo=UTC)))
    2 messages, newest first (now: 2026-05-09 00:00 UTC):
    2026-05-08 10:00 UTC ai: hello!
    2026-05-08 09:00 UTC user: hi
    """
    stamp = f"(now: {now:%Y-%m-%d %H:%M} UTC)"
    if not entries:
        return f"No messages found {stamp}."
    n = len(entries)
    head = f"{n} message{'s' * (n != 1)}, newest first {stamp}:"
    every = [_line(e, show_conversation) for e in reversed(entries)]
    if len(head) + sum(1 + len(line) for line in every) <= max_chars:
        return "\n".join([head, *every])
    # Not all fit: a note ends the text, so every line shown leaves room for it.
    lines, used = [head], len(head)
    reserve = 1 + len(_omitted(n))
    for i, line in enumerate(every):
        if used + 1 + len(line) + reserve > max_chars:
            lines.append(_omitted(n - i))
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines)


def _error(message: str) -> FrozenMap:
    return tool_result(f"Error: {message}", True)


def _window(args: Mapping, now: Callable[[], datetime]) -> tuple:
    """Return (since, until) from the tool input; ValueError with a model-readable message."""
    out = []
    for key, end in (("since", False), ("until", True)):
        value = args.get(key)
        if value is None or value == "":
            out.append(None)
            continue
        try:
            out.append(parse_when(value, end=end, now=now))
        except ValueError as e:
            raise ValueError(f"{key}: {e}") from None
    return tuple(out)


def _limit(args: Mapping) -> int:
    value = args.get("limit", DEFAULT_LIMIT)
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # some models send 10.0
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {value!r}")
    return value


def _search(log: Mapping, ids: tuple, contains: Any, since: Any, until: Any, limit: int):
    """Return the newest `limit` matches across the scoped conversations, oldest first."""
    found = []
    for cid in ids:  # newest-N of a union = newest-N of the per-conversation newest-N
        found.extend(
            log["query"](
                contains=contains or None,
                since=since,
                until=until,
                limit=limit,
                conversation_id=cid,
            )
        )
    found.sort(key=lambda e: e["timestamp"])
    return found[-limit:]


def chat_history_tool(
    log: Mapping,
    *,
    scope: str | Collection[str],
    max_chars: int = 4000,
    now: Callable[[], datetime] | None = None,
) -> FrozenMap:
    """Return the `chat_history` tool: search the message log within `scope` only.

    `scope` is one conversation id, or an explicit collection of ids (a wider scope, for
    example every conversation of one user). Results are dated lines, newest first,
    within `max_chars`. Bad input comes back as an error result the model can read.
    `now` (a clock returning an aware datetime) is for tests and "today"/"yesterday".
    """
    return chat_history_scoper(log, max_chars=max_chars, now=now)(scope)


def chat_history_scoper(
    log: Mapping, *, max_chars: int = 4000, now: Callable[[], datetime] | None = None
) -> Callable[[str | Collection[str]], FrozenMap]:
    """Return `scoped(scope)`: `chat_history_tool(log, scope=scope, ...)`, where the tool
    of one conversation is built once and only its handler is made per scope (a service
    scopes the tool to each conversation it answers)."""
    if not isinstance(log, Mapping) or not callable(log.get("query")):
        raise ValueError("log must be a message log (a mapping with a callable 'query')")
    if not isinstance(max_chars, int) or max_chars < 200:
        raise ValueError(f"max_chars must be an integer >= 200, got {max_chars!r}")
    clock = now or (lambda: datetime.now(UTC))

    def search_in(ids: tuple) -> Callable[[Mapping], FrozenMap]:
        def execute(args: Mapping) -> FrozenMap:
            contains = args.get("contains")
            if contains is not None and not isinstance(contains, str):
                return _error(f"contains must be a string, got {type(contains).__name__}")
            try:
                since, until = _window(args, clock)
                limit = _limit(args)
            except ValueError as e:
                return _error(str(e))
            hits = _search(log, ids, contains, since, until, limit)
            return tool_result(render(hits, max_chars, clock().astimezone(UTC), len(ids) > 1))

        return execute

    def described(who: str, ids: tuple) -> FrozenMap:
        description = (
            f"Search the earlier messages of {who} (what the user said and what you answered). "
            "Filter by text and by date; results are dated lines, newest first. Use it to "
            "answer questions like 'what did we talk about yesterday?'."
        )
        return tool(TOOL_NAME, description, SCHEMA, search_in(ids))

    one = described("this conversation", ("~",))  # its handler is replaced per scope

    def scoped(scope: str | Collection[str]) -> FrozenMap:
        ids = scope_ids(scope)
        if len(ids) == 1:
            return with_execute(one, search_in(ids))
        return described(f"{len(ids)} conversations", ids)

    return scoped
