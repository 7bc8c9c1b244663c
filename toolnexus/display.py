"""Readable views of conversations: `show(x)` for notebooks and terminals, `plain(x)` for JSON.

`show` takes a transcript (either dialect), a RunResult, a stream's list of events or a
message-log query result, and returns a `Chat`: plain text as its repr, an HTML chat as
its `_repr_html_` (every piece of text HTML-escaped). The parsing into rows is pure and
shared with the chat command's `show`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence, Set
from pathlib import PurePath
from typing import Any, NamedTuple

from .core.wire import view

__all__ = ["Chat", "Row", "plain", "rows_of", "show", "text_of_rows"]


def plain(x: Any) -> Any:
    """Return `x` as JSON-ready plain data: dicts, lists, str, numbers, bool, None.

    Immutable maps and vectors become dicts and lists, tuples and sets lists, datetimes
    and dates ISO strings, UUIDs and paths strings, bytes base64 text.

    >>> from toolnexus.core.frozen import freeze
    >>> plain(freeze({"usage": {"total_tokens": 3}, "ids": ("a",)})) == {
    ...     "usage": {"total_tokens": 3}, "ids": ["a"]}
    True
    """
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, Mapping):
        return {(k if isinstance(k, str) else str(k)): plain(v) for k, v in x.items()}
    if isinstance(x, _dt.date | _dt.time):
        return x.isoformat()
    if isinstance(x, uuid.UUID | PurePath):
        return str(x)
    if isinstance(x, bytes | bytearray):
        return base64.b64encode(bytes(x)).decode("ascii")
    if isinstance(x, Sequence | Set):
        return [plain(v) for v in x]
    return x  # anything else is left for json.dumps(default=...) to judge


# ---- rows: what a conversation shows, in order (pure) ------------------------------------


class Row(NamedTuple):
    """One line of a chat view: kind (message|call|result|usage|status|entry), who, text."""

    kind: str
    who: str
    text: str
    error: bool = False


def _json(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False, default=str, separators=(", ", ": "))


def _text_of(content: Any) -> str:
    """Return the text of message content: a string, or the text of its parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, Mapping) and part.get("type") == "refusal":
            continue  # shown as its own row
        elif isinstance(part, Mapping) and part.get("type") not in ("tool_use", "tool_result"):
            texts.append(f"[{part.get('type', 'part')}]")
    return "\n".join(texts)


def _args(raw: Any) -> str:
    return raw if isinstance(raw, str) else _json(raw if raw is not None else {})


def _item_rows(role: str, item: tuple, names: dict) -> list[Row]:
    """Return the rows of one neutral item (core.wire.view): reasoning is not shown."""
    kind = item[0]
    if kind == "result":
        _, i, content, error = item
        return [Row("result", names.get(i, i if i is not None else "?"), _text_of(content), error)]
    if kind != "assistant":
        text = _text_of(item[1])
        return [Row("message", role, text)] if text else []
    _, parts, calls, _extras, own = item
    text = _text_of(parts)
    rows = [Row("message", role, text)] if text else []
    if isinstance(own.get("refusal"), str) and own["refusal"]:
        rows.append(Row("message", role, f"[refusal] {own['refusal']}"))
    for i, name, raw, _ in calls:
        names[i] = name or "?"
        rows.append(Row("call", role, f"{name or '?'}({_args(raw)})"))
    return rows


def _message_rows(m: Mapping, names: dict) -> list[Row]:
    """Return the rows of one message (any dialect, read through the neutral view);
    `names` maps call ids to tool names."""
    role = m.get("role", "?")
    rows = [r for item in view.read(m) for r in _item_rows(role, item, names)]
    return rows or [Row("message", role, "")]


def transcript_rows(messages: Iterable[Mapping], system: str | None = None) -> list[Row]:
    """Return the rows of a transcript (any dialect's shape)."""
    names: dict = {}
    rows = [Row("message", "system", system)] if system else []
    for m in messages:
        rows.extend(_message_rows(m, names))
    return rows


def _usage_row(u: Mapping) -> Row:
    p, c = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
    return Row(
        "usage", "usage", f"{p} prompt + {c} completion = {u.get('total_tokens', p + c)} tokens"
    )


def result_rows(r: Mapping) -> list[Row]:
    """Return the rows of a RunResult: its transcript, its usage, its status."""
    rows = transcript_rows(r.get("messages") or ())
    if r.get("usage"):
        rows.append(_usage_row(r["usage"]))
    status = f"{r.get('status', '?')} after {r.get('turns', '?')} turn(s), model {r.get('model')}"
    if r.get("limit"):
        status += f", limit {r['limit']}"
    if r.get("refusal") is not None:
        status += ", refused"
    return [*rows, Row("status", "status", status)]


def event_rows(events: Iterable[Mapping]) -> list[Row]:
    """Return the rows of a stream's events (text deltas joined into one message)."""
    rows: list[Row] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            rows.append(Row("message", "assistant", "".join(text)))
            text.clear()

    for ev in events:
        kind = ev.get("type")
        if kind in ("text", "refusal"):  # thinking is not part of the answer shown
            text.append(ev.get("delta") or "")
            continue
        if kind == "thinking":
            continue
        flush()
        if kind == "tool_call":
            rows.append(Row("call", "assistant", f"{ev.get('name', '?')}({_json(ev.get('args'))})"))
        elif kind == "tool_result":
            rows.append(Row("result", ev.get("name", "?"), str(ev.get("output", "")),
                            bool(ev.get("is_error"))))  # fmt: skip
        elif kind == "usage":
            rows.append(_usage_row(ev.get("usage") or {}))
        elif kind == "pending":
            rows.append(Row("status", "pending", _json(ev.get("request"))))
        elif kind == "done":
            r = ev.get("result") or {}
            rows.append(Row("status", "status", f"{r.get('status', 'done')}"))
    flush()
    return rows


def log_rows(entries: Iterable[Mapping]) -> list[Row]:
    """Return the rows of message-log entries (time, conversation, direction, text)."""
    rows = []
    for e in entries:
        ts = e.get("timestamp")
        when = ts.strftime("%Y-%m-%d %H:%M:%S") if hasattr(ts, "strftime") else str(ts)
        who = "assistant" if e.get("direction") == "ai" else "user"
        rows.append(
            Row(
                "entry", who, f"[{when} UTC, {e.get('conversation_id') or '-'}] {e.get('text', '')}"
            )
        )
    return rows


def _kind_of(x: Any) -> str:
    """Return what `x` is: result, events, log, transcript (TypeError for anything else)."""
    if isinstance(x, Mapping) and "messages" in x:
        return "result"
    if isinstance(x, Sequence) and not isinstance(x, str | bytes):
        first = x[0] if len(x) else {}
        if isinstance(first, Mapping):
            if "type" in first and "role" not in first:
                return "events"
            if "direction" in first and "timestamp" in first:
                return "log"
            return "transcript"
    raise TypeError(
        "show() takes a transcript, a RunResult, a list of stream events or a message-log "
        f"query result, got {type(x).__name__}"
    )


def rows_of(x: Any) -> list[Row]:
    """Return the rows of a transcript, RunResult, stream event list or message-log result."""
    kind = _kind_of(x)
    if kind == "result":
        return result_rows(x)
    if kind == "events":
        return event_rows(x)
    if kind == "log":
        return log_rows(x)
    return transcript_rows(x)


# ---- rendering ------------------------------------------------------------------------


def _line(row: Row) -> str:
    if row.kind == "call":
        return f"{row.who} -> {row.text}"
    if row.kind == "result":
        return f"{'tool error' if row.error else 'tool'} {row.who}: {row.text}"
    return f"{row.who}: {row.text}" if row.text else f"{row.who}:"


def text_of_rows(rows: Iterable[Row]) -> str:
    """Return rows as plain text, one entry per line (continuation lines indented)."""
    return "\n".join(_line(r).replace("\n", "\n  ") for r in rows)


_COLORS = {"user": "#e8f0fe", "assistant": "#f1f3f4", "system": "#fff8e1", "call": "#e6f4ea",
           "result": "#fce8e6", "usage": "#ffffff", "status": "#ffffff"}  # fmt: skip
_STYLE = (
    "margin:2px 0;padding:4px 8px;border-radius:6px;white-space:pre-wrap;"
    "font-family:system-ui,sans-serif;font-size:13px;background:{bg}"
)


def _html_row(row: Row) -> str:
    if row.kind == "call":
        label, body = f"{row.who} calls", f"<code>{html.escape(row.text)}</code>"
    elif row.kind == "result":
        label = f"{row.who} {'error' if row.error else 'result'}"
        body = html.escape(row.text)
    else:
        label, body = row.who, html.escape(row.text)
    bg = _COLORS.get(
        row.kind if row.kind in ("call", "result", "usage", "status") else row.who, "#f1f3f4"
    )
    if row.kind == "result" and not row.error:
        bg = "#f6f6f6"
    return f'<div style="{_STYLE.format(bg=bg)}"><b>{html.escape(label)}</b> {body}</div>'


def html_of_rows(rows: Iterable[Row]) -> str:
    """Return rows as an HTML chat (all text escaped)."""
    return '<div class="toolnexus-chat">' + "".join(_html_row(r) for r in rows) + "</div>"


class Chat:
    """A readable view of a conversation: text as its repr, HTML in a notebook."""

    __slots__ = ("rows",)

    def __init__(self, rows: Sequence[Row]):
        self.rows = tuple(rows)

    def __repr__(self) -> str:
        return text_of_rows(self.rows)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return html_of_rows(self.rows)


def show(x: Any) -> Chat:
    """Return a readable view of a transcript, RunResult, stream events or message-log result.

    >>> show([{"role": "user", "content": "hi <b>"}, {"role": "assistant", "content": "hello"}])
    user: hi <b>
    assistant: hello
    >>> "hi &lt;b&gt;" in show([{"role": "user", "content": "hi <b>"}])._repr_html_()
    True
    """
    if isinstance(x, Iterable) and not isinstance(x, Sequence | Mapping | str | bytes):
        x = list(x)  # a generator of events, consumed once
    return Chat(rows_of(x))
