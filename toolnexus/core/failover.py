"""Failover inside an exchange, pure: the model turns go on on the next client of a chain.

A fallback chain (toolnexus.fallback) gives the flow's configuration `legs`: the flow
configurations of the clients still to try, in order, each with what that client brings
to a model turn (`LEG_KEYS`: its dialect, model, system text, request params, retry
policy, body transform...), and `fails_over`, the predicate that says which failures
move on (default `core.retry.provider_fault`). Everything else of the exchange (the
store, lock and log, hooks, max_turns, wait_for, streaming) stays the primary's.

When a model request fails after its client's own retries, `switch` continues the
exchange on the next leg: the transcript so far (the tool results already produced
included: no tool runs twice) is translated to that leg's dialect through the neutral
view (`loading.whole`: repaired, replayable, re-encoded), so its requests are valid in
its dialect and carry no reasoning state of another provider. What the run saves is
each message in the shape of the provider that made it (`folded`): the messages as
they were up to the failover, then the new leg's own; a later load translates the
whole, whichever client continues it. A stream fails over only while the failing turn
had shown nothing to the consumer (`streamed`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyrsistent import PVector

from . import loading
from .retry import error_info
from .steps import State

__all__ = ["LEG_KEYS", "as_leg", "can_fail_over", "switch", "finished"]

# What a client of a chain brings to the model turns it answers.
LEG_KEYS = (
    "dialect", "model", "system", "params", "retries", "retry_base_ms", "max_wait_s", "rng",
    "on_error", "transform", "on_unsupported_part", "max_part_bytes", "prompt_cache",
    "server_state", "encode", "omitted", "omission_key", "remember_omission", "served_by",
    "leg",
)  # fmt: skip


def as_leg(cfg: Mapping, leg: Mapping) -> dict:
    """Return the exchange's configuration `cfg` with the model-turn keys of `leg`."""
    return {**cfg, **{k: leg[k] for k in LEG_KEYS if k in leg}}


def can_fail_over(cfg: Mapping, error: BaseException):
    """Yield the predicate's hook; return whether `error` moves the exchange to the next
    client: there is one, the failing turn showed nothing, and `fails_over(error)`."""
    if not cfg.get("legs") or cfg.get("fails_over") is None:
        return False
    if getattr(error, "streamed", False):  # text reached the consumer: never another answer
        return False
    return bool((yield ("hook", cfg["fails_over"], error)))


def _made(state: State) -> tuple[PVector, int]:
    """Return (the run's transcript, each message in the shape its maker gave it, and how
    many messages at its end this run added)."""
    made = state.get("made")
    if made is None:  # no failover yet (or a hook rewrote the transcript since)
        return state["messages"], state["fresh"]
    prefix, prefix_fresh, cut = made
    messages = state["messages"]
    return prefix.extend(messages[cut:]), prefix_fresh + len(messages) - cut


def _moved(state: State, leg: Mapping) -> State:
    """Return the state with its transcript translated for `leg` (raises ValueError when
    the leg's dialect cannot carry a part of it, see on_unsupported_part)."""
    made, fresh = _made(state)
    dialect, policy, encode = leg["dialect"], leg["on_unsupported_part"], leg["encode"]
    ready = loading.whole(made, dialect, policy, encode)
    before = loading.whole(made[: len(made) - fresh], dialect, policy, False).history
    history = ready.history
    return {
        **state,
        "dialect": dialect,
        "messages": history,
        "texts": ready.texts,
        # The run's own messages in the new view (what a hook's rewrite keeps, see
        # steps.with_messages); what is saved comes from "made" (see `finished`).
        "fresh": max(0, min(len(history), len(history) - len(before))),
        "facts": None,
        "made": (made, fresh, len(history)),
        "model": None,  # the next turn's own (else the leg's model: see `finished`)
        "lifted": ready.lifted,
    }


def _with_lifted(leg: dict, cfg: Mapping, lifted: str) -> dict:
    """Return the leg whose system text leads with the system text lifted out of the
    loaded history and out of the transcript translated for it (anthropic's own)."""
    first = "\n\n".join(x for x in (cfg.get("lifted") or "", lifted) if x)
    if not first:
        return leg
    system = leg["system"]
    return {**leg, "lifted": first,
            "system": lambda tk: "\n\n".join(x for x in (first, system(tk)) if x)}  # fmt: skip


def _failover_event(cfg: Mapping, leg: Mapping, error: BaseException, turn_no: int) -> dict:
    info = error_info(error, 1)
    status = str(info["status"]) if "status" in info else "error"
    return {"event": "failover", "model": cfg["model"], "to_model": leg["model"],
            "from": cfg.get("served_by"), "to": leg.get("served_by"),
            "kind": info["kind"], "status": status,
            "error": type(error).__name__, "turn": turn_no}  # fmt: skip


def switch(cfg: Mapping, state: State, error: BaseException, turn_no: int):
    """Yield the failover's effects (the on_failover hook, the metric); return the
    (cfg, state) of the exchange continued on the next leg that can carry the
    transcript, or raise `error` when none is left."""
    legs = tuple(cfg.get("legs") or ())
    for i, leg in enumerate(legs):
        nxt = {**as_leg(cfg, leg), "legs": legs[i + 1 :]}
        try:
            moved = _moved(state, nxt)
        except ValueError:  # this leg cannot carry a part of it: the next one may
            continue
        nxt = _with_lifted(nxt, cfg, moved.pop("lifted"))
        event = _failover_event(cfg, nxt, error, turn_no)
        if cfg.get("on_failover") is not None:
            yield ("hook", cfg["on_failover"], {**event, "error": error, "leg": cfg.get("leg"),
                                                "to_leg": nxt.get("leg")})  # fmt: skip
        yield ("metric", event)
        return nxt, moved
    raise error


def finished(cfg: Mapping, state: State) -> State:
    """Return the final state of a run whose last turns `cfg` answered: the client that
    served it and its model named, and, after a failover, the transcript to save with
    each message as its maker shaped it."""
    out = {**state, "served_by": cfg.get("served_by"), "model": state["model"] or cfg["model"]}
    if state.get("made") is None:
        return out
    messages, fresh = _made(state)
    # The saved transcript holds several dialects: no text of it is kept (it is not the
    # view the requests were encoded from); a later load translates it whole.
    return {**out, "messages": messages, "fresh": fresh, "texts": None, "facts": None,
            "made": None, "failed_over": True}  # fmt: skip
