"""The in-memory store: the default, a fresh one per client."""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping, Sequence

from ...core.transcript import freeze_transcript
from ...store._rows import check_id
from ...store.fused import derive, view
from ...store.locks import local_lock

__all__ = ["in_memory_store"]


def in_memory_store(state: MutableMapping | None = None) -> dict:
    """Return a store backed by `state` (a dict you may keep for REPL inspection).

    It carries its own "lock" (an in-process `local_lock`), so clients sharing one
    in-memory store exclude each other per id, as they do on a durable store.

    >>> s = in_memory_store()
    >>> s["get"]("nobody") is None
    True
    >>> s["save"]("a", [{"role": "user", "content": "hi"}]); s["get"]("a")[0]["content"]
    'hi'
    """
    backing = {} if state is None else state
    lock = threading.Lock()

    def get(id: str):
        return backing.get(check_id(id))

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        # Transcripts are values: keeping the frozen object is safe, no copy needed.
        check_id(id)
        frozen = freeze_transcript(transcript)
        with lock:
            backing[id] = frozen

    def delete(id: str) -> None:
        with lock:
            backing.pop(id, None)

    def ids():
        with lock:
            return tuple(backing)

    return derive(
        {
            "get": get,
            "save": save,
            "delete": delete,
            "ids": ids,
            "lock": local_lock(),
            "desc": "in_memory()",
            "fused": {"view": view(freeze_transcript)},  # get returns what save kept
        }
    )  # binds the fused calls to these operations
