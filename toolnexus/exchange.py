"""The store calls of an exchange: the fused ones where the store declares them and nothing
replaced what they need, else the separate ones. Decided here, and only here.

The flow (core/flow.py) knows no store call: it asks for intents, and `performed` turns
each into "io" effects for the driver (the driver never sees an intent):

  ("take", id, load)                 -> (held, transcript | None): the conversation's lock
                                        taken, and its transcript read when `load`;
                                        raises (having released) when either fails
  ("commit", id, messages, held, log, loaded)
                                     -> the outcomes (save, release, log...): the save,
                                        the release of `held` and the log op `log`
                                        (None: no log), in as few calls as the store
                                        allows; `loaded`: `held` came from a take with load
  ("release", held, *ops)            -> the outcomes of releasing `held`, then `ops`

`choose` reads the store's (and the message log's) declared fused calls once, when the
client is made: "lock_load" for a take with load, and for the commit after it
"save_logged_release", "save_logged" or "save_release" (see store/fused.py for what each
needs). A client's own `lock=` replaces the store's lock, so every fused call that needs
the lock is dropped as a decorator's replacement drops it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .core.flow import Op, value_of
from .store.fused import declared, derive, fused_call

__all__ = ["Commit", "Exchange", "choose", "conversation_lock", "performed"]


class Commit(NamedTuple):
    """How an exchange's save goes: one store call, and whether it also releases the lock
    and records the log (its value says whether the log went with it)."""

    call: Callable
    args: Callable[[Any, str, Any, tuple], tuple]  # (held, id, messages, log's args) -> args
    read: Callable[[Any], tuple]  # its value -> (logged, a failed release's error or None)
    releases: bool
    logs: bool


class Exchange(NamedTuple):
    """The calls a client's exchanges make, chosen once by `choose`."""

    lock: Callable  # fn(id) -> the context manager a take enters
    get: Callable
    lock_load: Callable | None  # the take with load, in one call
    commit: Commit  # after a take of `lock` (or with `history` given)
    after_lock_load: Commit  # after a take by `lock_load`


def conversation_lock(lock: Callable | None, store: Mapping, runtime: Any) -> Callable:
    """Return the lock an exchange takes: `lock=`, else the store's own, else in-process.

    The in-process default belongs to the client's runtime, so every run of the client
    (and of clients evolved from it) shares it.
    """
    paired = store.get("lock")
    return lock or (paired if callable(paired) else None) or runtime.local_lock()


def _plain(save: Callable) -> Commit:
    return Commit(save, lambda held, cid, messages, _: (cid, messages),
                  lambda _: (False, None), False, False)  # fmt: skip


def _save_release(call: Callable) -> Commit:
    return Commit(call, lambda held, cid, messages, _: (held, cid, messages),
                  lambda error: (False, error), True, False)  # fmt: skip


def _logged(store: Mapping, log: Mapping | None) -> tuple[Commit | None, Commit | None]:
    """Return the commits that record the log in the save's own statement (without and
    with the release), when the store declares them and the log's rows are in the same
    database; else None for each."""
    save, rows = declared(store, "save_logged"), declared(log, "rows") if log else None
    if save is None or rows is None or save.where is None or save.where != rows.where:
        return None, None
    from .history.wiring import exchange_entries  # only with a log (its rows' shape)

    def save_logged(cid: str, messages: Any, prompt: str, answers: Any, asked_at: Any) -> Any:
        return save.call(cid, messages, rows.call, exchange_entries(cid, prompt, answers,
                                                                    asked_at))  # fmt: skip

    alone = Commit(save_logged, lambda held, cid, messages, said: (cid, messages, *said),
                   lambda logged: (bool(logged), None), False, True)  # fmt: skip
    both = declared(store, "save_logged_release")
    if both is None or both.where != rows.where:
        return alone, None

    def save_logged_release(held: Any, cid: str, messages: Any, prompt: str, answers: Any,
                            asked_at: Any) -> Any:  # fmt: skip
        entries = exchange_entries(cid, prompt, answers, asked_at)
        return both.call(held, cid, messages, rows.call, entries)

    fused = Commit(save_logged_release,
                   lambda held, cid, messages, said: (held, cid, messages, *said),
                   lambda value: (bool(value[0]), value[1]), True, True)  # fmt: skip
    return alone, fused


def choose(store: Mapping, lock: Callable | None, log: Mapping | None, runtime: Any) -> Exchange:
    """Return the calls of a client's exchanges over `store` (with the client's `lock=`
    and message log): fused where they apply, else the store's get, save and lock."""
    if lock is not None or not callable(store.get("lock")):
        store = derive(store, lock=conversation_lock(lock, store, runtime))
    plain = _plain(store["save"])
    logged, logged_release = _logged(store, log)
    commit = logged or plain
    lock_load = fused_call(store, "lock_load")
    after = commit
    if lock_load is not None and logged_release is not None:
        after = logged_release
    elif lock_load is not None and logged is None and fused_call(store, "save_release"):
        after = _save_release(fused_call(store, "save_release"))
    return Exchange(store["lock"], store["get"], lock_load, commit, after)


# ---- the intents, as io effects -------------------------------------------------------


def _enter(lock: Callable, conversation_id: str) -> Any:
    cm = lock(conversation_id)
    cm.__enter__()
    return cm


def _exit(cm: Any) -> None:
    cm.__exit__(None, None, None)


def _release_op(held: Any) -> Op:
    return Op(_exit, (held,), always=True, kind="release")


def take(x: Exchange, cid: str, load: bool):
    """Take the conversation's lock (and load, in the same hand-off); return (held, loaded)."""
    if load and x.lock_load is not None:
        # The store takes its own lock and reads in one round trip; on a failure it has
        # released what it took, so there is nothing to exit here.
        (outcome,) = yield ("io", (Op(x.lock_load, (cid,), kind="lock+load"),))
        return value_of(outcome)
    ops = (Op(_enter, (x.lock, cid), kind="lock"),
           *((Op(x.get, (cid,), kind="load"),) if load else ()))  # fmt: skip
    outcomes = yield ("io", ops)
    held = value_of(outcomes[0])
    try:
        return held, value_of(outcomes[1]) if load else None
    except BaseException:
        yield ("io", (_release_op(held),))
        raise


def commit(x: Exchange, cid: str, messages: Any, held: Any, log: Op | None, loaded: bool):
    """Save, release and log; return the outcomes (save, release, log...).

    A save that releases the lock itself releases it even when it fails (and raises the
    save's error); a release that failed after the save comes back as its outcome, to
    report, not raise. A save that may record the log says whether it did: if not (or it
    failed), the log is recorded the usual way.
    """
    c = x.after_lock_load if loaded and x.lock_load is not None else x.commit
    said = log.args[1:] if log is not None else ()
    ops = [Op(c.call, c.args(held, cid, messages, said), kind="save")]
    if not c.releases:
        ops.append(_release_op(held))
    if log is not None and not c.logs:
        ops.append(log)
    outcomes = yield ("io", tuple(ops))
    saved = outcomes[0]
    logged, release_error = c.read(saved[1]) if saved[0] == "ok" else (False, None)
    if not c.releases:
        release = outcomes[1]
    else:
        release = ("ok", None) if release_error is None else ("error", release_error)
    out = (saved if saved[0] != "ok" else ("ok", None), release)
    if log is None:
        return out
    if not c.logs:
        return (*out, outcomes[-1])
    if saved[0] == "ok" and logged:
        return (*out, ("ok", None))
    return (*out, *(yield ("io", (log,))))  # the log did not go with the save


def release(x: Exchange, held: Any, *ops: Op):
    """Release `held` (whatever happens before), then run `ops`; return the outcomes."""
    return (yield ("io", (_release_op(held), *ops)))


_INTENTS = {"take": take, "commit": commit, "release": release}


def performed(flow: Any, x: Exchange):
    """Return `flow` (a generator of effects) with its intents performed by `x`'s calls:
    what it yields otherwise passes through, and what a driver throws in reaches it."""
    value, error = None, None
    while True:
        try:
            effect = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        intent = _INTENTS.get(effect[0])
        try:
            if intent is None:
                value = yield effect
            else:
                value = yield from intent(x, *effect[1:])
        except BaseException as e:  # thrown into the flow, which decides
            error = e
