"""`python -m toolnexus forget ID`: remove a stored conversation and its message-log entries.

python -m toolnexus forget work --store sqlite:chats.db   # the transcript, its log entries
python -m toolnexus forget work --log none                # the transcript only

The log is the one `chat` writes beside the store (or --log PATH); a log file that does
not exist is not created. Other conversations are not touched.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from .places import (
    STORE_HELP,
    CommandError,
    describe,
    lock_for,
    log_path_for,
    open_store,
    parse_store_spec,
    place_log,
    require_parent,
)


def _log(option: str | None, spec: str | None) -> dict | None:
    """Return the message log to clear: --log PATH, none, else the store's default (if any)."""
    from toolnexus.history import sqlite_log

    if option == "none":
        return None
    if option is not None:
        path = require_parent(Path(option).expanduser(), "--log")
        if not path.exists():
            raise CommandError(f"--log {option!r}: no message log there")
        return sqlite_log(path)
    place = parse_store_spec(spec)
    path = log_path_for(place)
    if path is None:
        return place_log(place)
    return sqlite_log(path) if path.exists() else None


def forget_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Remove conversation ID's transcript and its entries in the message log."""
    from toolnexus.api import forget_in

    store = open_store(args.store)
    log = _log(args.log, args.store)
    stored = store["get"](args.id) is not None
    try:
        done = forget_in(store, log, args.id, lock_for(args.lock, args.store, store))
    finally:
        if log is not None:
            log["close"]()
    entries = done["log_entries"]
    if not stored and not entries:
        print(f"nothing stored under {args.id!r} in {describe(store)}", file=out or sys.stdout)
        return 0
    where = f" and {entries} message-log entries" if log is not None else ""
    print(f"forgot {args.id}: its transcript{where}", file=out or sys.stdout)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `forget` command."""
    from .chat import _guarded

    f = sub.add_parser("forget", help="remove a stored conversation and its message-log entries")
    f.add_argument("id")
    f.add_argument("--store", help=STORE_HELP)
    f.add_argument("--log", help="the message log to clear: PATH or none (default: the store's)")
    f.add_argument("--lock", help="auto (default) | local | file:DIR: the lock `chat` takes")
    f.set_defaults(func=_guarded(forget_command))
