"""What a client's options imply for its runs: the flow's configuration, built once.

A client value is immutable, so what its fields imply is derived once, when the client
is made (and again by `c.set(...)`, which makes a new client): `plan(fields, runtime)`
returns read-only maps, one flow configuration per kind of run (plain or streaming),
plus what the driver needs. Reading a dozen fields of a record on every run cost more
than the rest of the setup together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = ["plan", "conversation_lock"]


def _emitter(runtime: Any, user: Callable | None) -> Callable[[Mapping], None]:
    record = runtime.sink()["on_metric"]
    if user is None:
        return record

    def emit(event: Mapping) -> None:
        record(event)
        user(event)

    return emit


def _log_fn(log: Mapping | None, strict: bool, emit: Callable) -> Callable | None:
    if log is None:
        return None
    from .history.wiring import record_exchange

    def record(cid: str | None, prompt: str, answers: Sequence[str], asked_at: Any) -> Any:
        return record_exchange(log, cid, prompt, answers, strict=strict, on_metric=emit,
                               asked_at=asked_at)  # fmt: skip

    return record


def _save_logged(store: Mapping, log: Mapping | None) -> Callable | None:
    """Return the store's "save_logged" bound to the client's log, when it applies.

    Only while "save" is still the store's own: a decorator that wraps "save" (capped,
    namespaced, ...) and copies the rest of the map must never be bypassed.
    """
    save_logged = store.get("save_logged") if log is not None else None
    if save_logged is None or getattr(save_logged, "save", None) is not store["save"]:
        return None
    from .history.wiring import exchange_entries

    def save(cid: str, messages: Any, prompt: str, answers: Sequence[str], asked_at: Any) -> bool:
        entries = exchange_entries(cid, prompt, answers, asked_at)
        return bool(save_logged(cid, messages, log, entries))

    return save


def _stands_for(fn: Any, store: Mapping, *names: str) -> bool:
    """Whether a fused call still stands for the store's own `names` (get, save, lock)."""
    return fn is not None and all(getattr(fn, n, None) is store[n] for n in names)


def _fused(o: Mapping, store: Mapping, save_logged: Callable | None) -> tuple:
    """Return the store's ("lock_load", "save_release", "save_logged_release") calls that
    apply (None for the others).

    Only when the exchange takes the store's own lock (no `lock=`) and each fused call
    still stands for the store's own get, save and lock: a decorator that wraps one of
    them and copies the rest of the map must never be bypassed (the flow then makes the
    separate calls). "save_release" saves without a log: only when no "save_logged"
    applies; "save_logged_release" is "save_logged" on the lock's connection.
    """
    if o["lock"] is not None or not callable(store.get("lock")):
        return None, None, None
    lock_load = store.get("lock_load")
    if not _stands_for(lock_load, store, "get", "lock"):
        return None, None, None
    save_release = store.get("save_release") if save_logged is None else None
    if not _stands_for(save_release, store, "save"):
        save_release = None
    both = store.get("save_logged_release") if save_logged is not None else None
    if not _stands_for(both, store, "save", "lock"):
        return lock_load, save_release, None
    from .history.wiring import exchange_entries

    log = o["message_log"]

    def save_logged_release(held: Any, cid: str, messages: Any, prompt: str,
                            answers: Sequence[str], asked_at: Any) -> tuple:  # fmt: skip
        entries = exchange_entries(cid, prompt, answers, asked_at)
        return both(held, cid, messages, log, entries)

    return lock_load, save_release, save_logged_release


def conversation_lock(lock: Callable | None, store: Mapping, runtime: Any) -> Callable:
    """Return the lock an exchange takes: `lock=`, else the store's own, else in-process.

    The in-process default belongs to the client's runtime, so every run of the client
    (and of clients evolved from it) shares it.
    """
    paired = store.get("lock")
    return lock or (paired if callable(paired) else None) or runtime.local_lock()


def plan(o: Mapping, runtime: Any) -> MappingProxyType:
    """Return {False: the flow configuration of a plain run, True: of a streaming one,
    "emit": the metric emitter} for a client's fields `o` (read-only maps)."""
    from .drivers.sync import rng
    from .skills import system_for

    system_prompt, store = o["system_prompt"], o["store"]
    emit = _emitter(runtime, o["on_metric"])
    save_logged = _save_logged(store, o["message_log"])
    lock_load, save_release, save_logged_release = _fused(o, store, save_logged)
    base = {
        "dialect": o["style"],
        "model": o["model"],
        "system": lambda tk: system_for(system_prompt, tk),
        "params": o["request_params"],
        "hooks": MappingProxyType(dict(o["hooks"])),
        "max_turns": o["max_turns"],
        "retries": o["retries"],
        "retry_base_ms": o["retry_base_ms"],
        "max_wait_s": o["max_retry_wait_ms"] / 1000,
        "rng": rng,
        "on_error": o["on_error"],
        "wait_for": o["wait_for"],
        "transform": o["body_transform"],
        "on_unsupported_part": o["on_unsupported_part"],
        "max_part_bytes": o["max_part_bytes"],
        "prompt_cache": bool(o["prompt_cache"]),
        "server_state": bool(o["server_state"]),
        "encode": o["endpoint"] is not None,
        "lock": conversation_lock(o["lock"], store, runtime),
        "get": store["get"],
        "save": store["save"],
        "log": _log_fn(o["message_log"], bool(o["strict_log"]), emit),
        "save_logged": save_logged,
        "lock_load": lock_load,
        "save_logged_release": save_logged_release,
        "save_release": save_release,
    }
    # A stream's consumer may pause or drop it at any event: it never holds the
    # conversation, and its save is rebased on what is stored then (see flow.rebase).
    run = MappingProxyType({**base, "events": False, "hold_lock": True})
    streaming = MappingProxyType({**base, "events": True, "hold_lock": False})
    return MappingProxyType({False: run, True: streaming, "emit": emit})
