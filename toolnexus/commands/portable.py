"""`python -m toolnexus export ID` / `import ID FILE`: conversations as GenAI messages.

python -m toolnexus export work --store sqlite:chats.db > work.json     # a JSON array
python -m toolnexus export work --lines --out work.jsonl                # JSON lines
python -m toolnexus import copy work.json --store file:chats --style anthropic

The format is the OpenTelemetry GenAI input messages (docs/portable.md). `import` refuses
to overwrite a stored conversation unless `--replace`; FILE `-` reads stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from .places import STORE_HELP, CommandError, describe, open_store


def _text(messages: list, lines: bool) -> str:
    if lines:
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    return json.dumps(messages, ensure_ascii=False, indent=2) + "\n"


def export_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Write conversation ID as GenAI messages: a JSON array, or JSON lines."""
    from toolnexus import to_genai

    store = open_store(args.store, read_only=True)
    transcript = store["get"](args.id)
    if transcript is None:
        raise CommandError(f"no conversation {args.id!r} in {describe(store)}")
    text = _text(to_genai(transcript), args.lines)
    if args.out:
        Path(args.out).expanduser().write_text(text, encoding="utf-8")
    else:
        (out or sys.stdout).write(text)
    return 0


def parse_messages(text: str, source: str) -> list[Any]:
    """Return the messages of a JSON array or of JSON lines, or raise a CommandError."""
    stripped = text.strip()
    if not stripped:
        raise CommandError(f"{source}: empty: expected a JSON array or JSON lines of messages")
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError as e:
            raise CommandError(f"{source}: not a JSON array: {e}") from None
        return value
    messages = []
    for n, line in enumerate(stripped.splitlines(), 1):
        if not line.strip():
            continue
        try:
            messages.append(json.loads(line))
        except ValueError as e:
            raise CommandError(f"{source} line {n}: not JSON: {e}") from None
    return messages


def import_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Save the GenAI messages of FILE (a JSON array or JSON lines) as conversation ID."""
    from toolnexus import from_genai

    if args.file == "-":
        text, source = sys.stdin.read(), "stdin"
    else:
        path = Path(args.file).expanduser()
        if not path.is_file():
            raise CommandError(f"{args.file!r}: no such file")
        text, source = path.read_text(encoding="utf-8"), args.file
    transcript = from_genai(parse_messages(text, source), args.style)
    store = open_store(args.store)
    if not args.replace and store["get"](args.id) is not None:
        raise CommandError(f"{args.id!r} is already stored in {describe(store)}: add --replace")
    store["save"](args.id, transcript)
    print(
        f"imported {len(transcript)} messages as {args.id} ({args.style})", file=out or sys.stdout
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `export` and `import` commands."""
    from toolnexus.core.wire import DEFAULT_STYLE, DIALECTS

    from .chat import _guarded

    e = sub.add_parser("export", help="write a conversation as OpenTelemetry GenAI messages")
    e.add_argument("id")
    e.add_argument("--store", help=STORE_HELP)
    e.add_argument("--lines", action="store_true", help="JSON lines, one message a line")
    e.add_argument("--out", help="write to this file (default: stdout)")
    e.set_defaults(func=_guarded(export_command))
    i = sub.add_parser("import", help="save OpenTelemetry GenAI messages as a conversation")
    i.add_argument("id")
    i.add_argument("file", help="a JSON array or JSON lines of messages (- for stdin)")
    i.add_argument("--store", help=STORE_HELP)
    i.add_argument("--style", choices=tuple(DIALECTS), default=DEFAULT_STYLE,
                   help=f"the dialect to store it in (default: {DEFAULT_STYLE})")  # fmt: skip
    i.add_argument("--replace", action="store_true", help="overwrite a stored conversation")
    i.set_defaults(func=_guarded(import_command))
