"""`python -m toolnexus history search|clear`: read and prune a SQLite message log."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import date, timedelta
from pathlib import Path

USAGE_ERROR = 2  # bad input, like argparse's own errors


def default_db() -> Path:
    """Return the default message-log file: $TOOLNEXUS_HISTORY_DB, else under the data dir."""
    if os.environ.get("TOOLNEXUS_HISTORY_DB"):
        return Path(os.environ["TOOLNEXUS_HISTORY_DB"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "toolnexus" / "history.db"


def _fail(message: str, status: int = USAGE_ERROR) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status


def _is_day(text: str) -> bool:
    if text.strip().lower() in ("today", "yesterday"):
        return True
    try:
        date.fromisoformat(text.strip())
        return True
    except ValueError:
        return False


def _open(db: Path | None):
    from toolnexus.history import sqlite_log

    path = db or default_db()
    if not path.exists():
        return None, path
    return sqlite_log(path), path


def _line(e) -> str:
    text = " ".join(e["text"].split())
    cid = e["conversation_id"] or "-"
    return f"{e['timestamp']:%Y-%m-%d %H:%M:%S} UTC  {cid}  {e['direction']:<4}  {text}"


def search(args: argparse.Namespace) -> int:
    """Print the matching messages, oldest first, one per line."""
    from toolnexus.history.entry import parse_when

    try:
        since = parse_when(args.since) if args.since is not None else None
        until = parse_when(args.until, end=True) if args.until is not None else None
    except ValueError as e:
        return _fail(f"bad date: {e}")
    if args.limit is not None and args.limit < 1:
        return _fail(f"--limit must be at least 1, got {args.limit}")
    log, path = _open(args.db)
    if log is None:
        return _fail(f"no message log at {path}", 1)
    try:
        found = log["query"](contains=args.text or None, since=since, until=until, limit=args.limit)
    finally:
        log["close"]()
    for e in found:
        print(_line(e))
    n = len(found)
    print(f"{n} message{'s' * (n != 1)} in {path}", file=sys.stderr)
    return 0


def clear(args: argparse.Namespace) -> int:
    """Delete the messages recorded before a date; print how many were removed."""
    from toolnexus.history.entry import parse_when

    try:
        before = parse_when(args.before)
    except ValueError as e:
        return _fail(f"bad date: {e}")
    if _is_day(args.before):
        # "--before 2026-05-08" keeps all of May 8: remove up to the last instant of May 7.
        before -= timedelta(microseconds=1)
        what = f"before {args.before.strip()} (UTC)"
    else:
        what = f"at or before {before:%Y-%m-%d %H:%M:%S} UTC"
    log, path = _open(args.db)
    if log is None:
        return _fail(f"no message log at {path}", 1)
    try:
        removed = log["clear"](before=before)
    finally:
        log["close"]()
    print(f"removed {removed} message{'s' * (removed != 1)} recorded {what} from {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `history` command and its `search` and `clear` subcommands."""
    p = sub.add_parser("history", help="search or prune the message log (SQLite)")
    hsub = p.add_subparsers(dest="history_command", required=True)
    db_help = f"message-log file (default: {default_db()}; env TOOLNEXUS_HISTORY_DB)"
    dates = "ISO 8601, e.g. 2026-05-08 or 2026-05-08T14:30Z (UTC unless an offset is given)"

    s = hsub.add_parser("search", help="print matching messages, oldest first")
    s.add_argument("text", nargs="?", default="", help="text to find (literal, any case)")
    s.add_argument("--since", help=f"from this date or time; {dates}")
    s.add_argument("--until", help="up to this date (the whole day) or time")
    s.add_argument("--limit", type=int, help="only the newest N matches")
    s.add_argument("--db", type=Path, help=db_help)
    s.set_defaults(func=search)

    c = hsub.add_parser("clear", help="delete messages recorded before a date")
    c.add_argument(
        "--before",
        required=True,
        help=f"a date removes everything before that day; a time, everything up to it; {dates}",
    )
    c.add_argument("--db", type=Path, help=db_help)
    c.set_defaults(func=clear)
