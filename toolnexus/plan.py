"""What a client's options imply for its runs: the flow's configuration, built once.

A client value is immutable, so what its fields imply is derived once, when the client
is made (and again by `c.set(...)`, which makes a new client): `plan(fields, runtime)`
returns read-only maps, one flow configuration per kind of run (plain or streaming),
plus what the driver needs. Reading a dozen fields of a record on every run cost more
than the rest of the setup together.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from .core.frozen import FrozenMap
from .core.wire import DIALECTS

__all__ = ["plan"]


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


def _served_by(o: Mapping) -> Any:
    """Return {style, model, base_url} of a client (its base URL as its repr shows it: no
    credentials); base_url is None for an in-process model."""
    endpoint = o["endpoint"]
    base = str(endpoint.base) if endpoint is not None else None
    return FrozenMap({"style": o["style"], "model": o["model"], "base_url": base})


def _context(o: Mapping, runtime: Any, emit: Callable) -> Any:
    """Return what a run's handlers need from the client (drivers.sync.Context)."""
    from .core.scope import scope_of
    from .drivers.sync import Context

    return Context(endpoint=o["endpoint"], given=o["given"], proxy=o["proxy"],
                   generate=o.get("generate"), runtime=runtime, emit=emit,
                   read_timeout=o["read_timeout_ms"] / 1000,
                   inline_tools=o["tool_executor"] == "inline",
                   key=scope_of(o["store"]).key)  # fmt: skip


def plan(o: Mapping, runtime: Any) -> MappingProxyType:
    """Return {False: the flow configuration of a plain run, True: of a streaming one,
    "emit": the metric emitter, "context": what its runs' handlers need, "provider": its
    gen_ai.provider.name} for a client's fields `o` (read-only maps)."""
    from .drivers.sync import rng
    from .exchange import choose
    from .otel import provider_name
    from .skills import system_for

    system_prompt, store = o["system_prompt"], o["store"]
    learned = (o["style"], o.get("base_url"), o["model"])  # the runtime's key of refusals
    emit = _emitter(runtime, o["on_metric"])
    base = {
        "dialect": o["style"],
        "model": o["model"],
        # Who answers: named in each RunResult (a fallback chain's last client: core.failover).
        "served_by": _served_by(o),
        "system": lambda tk: system_for(system_prompt, tk),
        "params": o["request_params"],
        "hooks": MappingProxyType(dict(o["hooks"])),
        "max_turns": o["max_turns"],
        "max_tool_calls": o["max_tool_calls"],
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
        "keep_refused": bool(o["keep_refused"]),
        "encode": o["endpoint"] is not None,
        # The store calls of the exchange's intents (take, commit, release), fused where
        # the store declares them and nothing replaced what they need.
        "exchange": choose(store, o["lock"], o["message_log"], runtime),
        "log": _log_fn(o["message_log"], bool(o["strict_log"]), emit),
        # What requests leave out from the start (the model's rule), and where a refusal
        # that adds to it is remembered: the runtime, per endpoint and model.
        "omitted": DIALECTS[o["style"]].omissions(o["model"]),
        "omission_key": learned,
        "remember_omission": functools.partial(runtime.omit, learned),
    }
    # A stream's consumer may pause or drop it at any event: it never holds the
    # conversation, and its save is rebased on what is stored then (see flow.rebase).
    run = MappingProxyType({**base, "events": False, "hold_lock": True})
    streaming = MappingProxyType({**base, "events": True, "hold_lock": False})
    # gen_ai.provider.name of every exchange's span: named once (the style and the host).
    host = o["endpoint"].target.host if o["endpoint"] is not None else None
    return MappingProxyType({False: run, True: streaming, "emit": emit,
                             "context": _context(o, runtime, emit),
                             "provider": provider_name(o["style"], host)})  # fmt: skip
