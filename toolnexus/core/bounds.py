"""Memory bounds a process sets from its environment, pure (the caller passes the env).

Rule 1: imports nothing of toolnexus; no I/O (os.environ is read by the caller).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_MEMO_BYTES", "UNENCODED_MESSAGE_BYTES", "memo_bytes_bound"]

# What a memo counts for a message whose JSON text it does not hold (an in-process model's
# transcript, a row read without its text): a typical short message.
UNENCODED_MESSAGE_BYTES = 512

# The JSON bytes of conversations remembered (a runtime's memo, and each durable store
# value's): about six times that in memory.
DEFAULT_MEMO_BYTES = 16 * 1024 * 1024


def memo_bytes_bound(env: Mapping[str, str]) -> int:
    """Return the memo's byte bound: TOOLNEXUS_MEMO_BYTES (an integer >= 0) or 16 MiB.

    >>> memo_bytes_bound({}), memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": "64000000"})
    (16777216, 64000000)
    """
    raw = env.get("TOOLNEXUS_MEMO_BYTES", "").strip()
    if not raw:
        return DEFAULT_MEMO_BYTES
    if not (raw.isascii() and raw.isdigit()):  # isdigit alone takes "²", int() does not
        raise ValueError(f"TOOLNEXUS_MEMO_BYTES must be a number of bytes, got {raw!r}")
    return int(raw)
