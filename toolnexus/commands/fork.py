"""`python -m toolnexus show | fork | rewind`: a stored conversation's turns, a branch of it,
or its last turns undone.

python -m toolnexus show work                 # turns numbered, each with its --at
python -m toolnexus fork work work-alt --at 4 # the turns before message 4, as work-alt
python -m toolnexus rewind work --turns 1     # drop the last turn
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from .chat import STORE_HELP, CommandError, _desc, _guarded, open_store, render_transcript


def render_turns(messages: Sequence[Mapping]) -> str:
    """Return a transcript as text with a header per turn naming the `--at` that forks before it.

    >>> print(render_turns([{"role": "user", "content": "hi"},
    ...                     {"role": "assistant", "content": "hello"},
    ...                     {"role": "user", "content": "again"}]))
    -- turn 1 --
    user: hi
    assistant: hello
    -- turn 2 (--at 2 keeps the turns before it) --
    user: again
    """
    from toolnexus.core.transcript import safe_cuts

    starts = safe_cuts(messages)
    bounds = [0 if not starts else starts[0], *starts[1:], len(messages)]
    parts = [render_transcript(messages[: bounds[0]])] if bounds[0] else []
    for n, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False), start=1):
        head = (
            f"-- turn {n} --" if n == 1 else f"-- turn {n} (--at {a} keeps the turns before it) --"
        )
        parts.append(head + "\n" + render_transcript(messages[a:b]))
    return "\n".join(p for p in parts if p)


def show(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print a stored conversation readably, its turns numbered (with the `fork --at` of each)."""
    store = open_store(args.store, read_only=True)
    transcript = store["get"](args.id)
    if not transcript:
        raise CommandError(f"no conversation {args.id!r} in {_desc(store)}")
    print(render_turns(transcript), file=out or sys.stdout)
    return 0


def fork_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Copy a conversation (or its turns before --at) to a new id."""
    from toolnexus.store import fork

    store = open_store(args.store)
    try:
        n = fork(store, args.src, args.dst, at=args.at)
    except KeyError:
        raise CommandError(f"no conversation {args.src!r} in {_desc(store)}") from None
    count = "" if n is None else f" ({n} messages)"
    print(f"forked {args.src} -> {args.dst}{count}", file=out or sys.stdout)
    return 0


def rewind_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Drop the last --turns turns of a conversation."""
    from toolnexus.store import rewind

    store = open_store(args.store)
    try:
        kept = rewind(store, args.id, args.turns)
    except KeyError:
        raise CommandError(f"no conversation {args.id!r} in {_desc(store)}") from None
    print(f"rewound {args.id} by {args.turns} turn(s): {len(kept)} messages kept",
          file=out or sys.stdout)  # fmt: skip
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `show`, `fork` and `rewind` commands."""
    s = sub.add_parser("show", help="print a stored conversation")
    s.add_argument("id")
    s.add_argument("--store", help=STORE_HELP)
    s.set_defaults(func=_guarded(show))

    f = sub.add_parser("fork", help="copy a stored conversation (or its first turns) to a new id")
    f.add_argument("src")
    f.add_argument("dst")
    f.add_argument("--at", type=int, help="keep the messages before this one (see `show`)")
    f.add_argument("--store", help=STORE_HELP)
    f.set_defaults(func=_guarded(fork_command))

    r = sub.add_parser("rewind", help="drop the last turns of a stored conversation")
    r.add_argument("id")
    r.add_argument("--turns", type=int, default=1)
    r.add_argument("--store", help=STORE_HELP)
    r.set_defaults(func=_guarded(rewind_command))
