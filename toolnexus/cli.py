"""`python -m toolnexus COMMAND`: each command lives in toolnexus/commands/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# Each module has `register(subparsers)`, which adds its parser(s) with `func=` set.
COMMAND_MODULES = ("demo", "history", "chat", "fork", "forget", "portable")


def parser() -> argparse.ArgumentParser:
    """Return the argument parser with every command registered."""
    from toolnexus import __version__

    p = argparse.ArgumentParser(prog="python -m toolnexus", description=__doc__)
    p.add_argument("--version", action="version", version=f"toolnexus {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"toolnexus.commands.{name}").register(sub)
    return p


def _quiet_closed_pipe() -> int:
    """Stop writing to a stdout whose reader has gone (`... | head -1`): status 0, quietly.

    The reader took what it wanted, as `head` does; Unix tools end there without a word.
    """
    # Python flushes stdout again at exit, which would fail once more: point it at devnull.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests, embedding)
        pass
    return 0


def _run(args: argparse.Namespace) -> int:
    """Run a parsed command with stdout and stderr escaping control characters."""
    from .commands.terminal import EscapedStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapedStream(out), EscapedStream(err)  # type: ignore[assignment]
    try:
        return int(args.func(args) or 0)
    finally:
        sys.stdout, sys.stderr = out, err


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; return its exit status."""
    try:
        try:
            args = parser().parse_args(argv)
        except SystemExit:  # --help / --version printed: flush while we can still be quiet
            sys.stdout.flush()
            raise
        status = _run(args)
        sys.stdout.flush()  # a closed pipe shows up here for short outputs
        return status
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _quiet_closed_pipe()
