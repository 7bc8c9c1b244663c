"""What the CLI prints is text, never terminal commands.

A model, a tool's answer, a log or a store may hold control characters: an escape
sequence can rewrite lines, change the window title or write the clipboard (OSC 52).
Every character a terminal would act on is printed as its `\\uXXXX` escape instead
(valid inside JSON strings too, so `export`'s JSON stays JSON); newlines and tabs stay.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

__all__ = ["EscapedStream", "escape_controls"]

# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), and the
# bidirectional overrides and isolates (text that reads other than it is). One class of
# single characters: the scan is linear, nothing backtracks.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    return f"\\u{ord(m[0]):04x}"


def escape_controls(text: str) -> str:
    """Return `text` with each control character a terminal acts on as its \\uXXXX escape.

    >>> escape_controls("ok\\tdone\\n\\x1b]52;c;aGk=\\x07")
    'ok\\tdone\\n\\\\u001b]52;c;aGk=\\\\u0007'
    """
    return UNSAFE.sub(_escape, text)


class EscapedStream:
    """A text stream that writes through `escape_controls` to the stream it wraps."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        """Write `text` escaped; return its length (as a text stream does)."""
        self._stream.write(escape_controls(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        """Write each line escaped."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding...
        return getattr(self._stream, name)
