"""`python -m toolnexus COMMAND`: each command lives in toolnexus/commands/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module has `register(subparsers)`, which adds its parser(s) with `func=` set.
COMMAND_MODULES = ("demo", "history", "chat", "fork")


def parser() -> argparse.ArgumentParser:
    """Return the argument parser with every command registered."""
    p = argparse.ArgumentParser(prog="python -m toolnexus", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"toolnexus.commands.{name}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; return its exit status."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
