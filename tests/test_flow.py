"""The exchange flow, driven without any I/O by a tiny test driver (a dict of handlers)."""

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import execute, tool, tool_result, toolkit
from toolnexus.core import flow
from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap
from toolnexus.core.wire.generated import parse_generated
from toolnexus.exchange import choose, performed
from toolnexus.store.fused import derive, fuse

ECHO = tool("echo", "Echo.", None, lambda a: str(a.get("s", "")))
WAIT = tool("wait", "Needs an answer.", None, lambda a: (
    tool_result(f"got {a['_resume']['data']}") if "_resume" in a
    else tool_result("asked", metadata={"pending": {"id": "q1"}})))  # fmt: skip
TK = toolkit(ECHO, WAIT)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def text(content):
    return parse_generated({"content": content}, 1)


def calls(*names):
    return parse_generated(
        {"tool_calls": [{"id": f"c{i}", "name": n, "arguments": {}} for i, n in enumerate(names)]},
        1,
    )


class Lock:
    """A lock that counts what the flow takes and releases (through "io" ops)."""

    def __init__(self, fail_release=False):
        self.taken = self.released = 0
        self.fail_release = fail_release

    def __call__(self, cid):
        return self

    def __enter__(self):
        self.taken += 1

    def __exit__(self, *exc):
        self.released += 1
        if self.fail_release:
            raise OSError("lock server gone")


def config(store, lock, save=None, fused=None, **over):
    """The flow's configuration over a dict `store` and `lock`: its exchange is chosen from
    the store map {get, save, lock} and its fused calls, as a client's plan does."""
    m = {"get": store.get, "save": save or store.__setitem__, "lock": lock}
    cfg = {
        "dialect": "openai", "model": "m", "system": lambda tk: "", "params": FrozenMap(),
        "hooks": {}, "max_turns": 10, "retries": 2, "retry_base_ms": 100, "rng": lambda: 0.5,
        "max_wait_s": 60,
        "on_error": None, "wait_for": None, "transform": None, "events": False,
        "encode": False, "hold_lock": True,
        "on_unsupported_part": "error", "max_part_bytes": None,
        "log": lambda *a: logged.append(a),
        "exchange": choose(derive(m, fused=fused), None, None, None),
    }  # fmt: skip
    return {**cfg, **over}


def run_exchange(cfg, *args):
    """The exchange flow with its intents performed by the configuration's exchange."""
    return performed(flow.exchange_flow(cfg, *args), cfg["exchange"])


logged: list = []


def drive(gen, turns, hook=None, effects=None):
    """Perform effects: scripted turns for "llm", tools inline, io ops in order."""
    effects = [] if effects is None else effects
    value, error = None, None
    memo: dict = {}
    turns = iter(turns)
    while True:
        try:
            effect = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as stop:
            return stop.value, effects
        effects.append(effect)
        value, error = None, None
        kind = effect[0]
        try:
            if kind == "clock":
                value = 0.0
            elif kind == "now":
                value = NOW
            elif kind == "wallclock":
                value = 0.0
            elif kind == "remaining":
                value = None
            elif kind == "io":
                value, failed = [], False
                for op in effect[1]:
                    if failed and not op.always:
                        value.append(("skipped",))
                        continue
                    try:
                        value.append(("ok", op.fn(*op.args)))
                    except Exception as e:
                        failed = True
                        value.append(("error", e))
                value = tuple(value)
            elif kind == "hook":
                value = (hook or (lambda fn, arg: fn(arg)))(effect[1], effect[2])
            elif kind == "llm":
                value = next(turns)
                if isinstance(value, Exception):
                    raise value
            elif kind == "tools":
                value = [(execute(effect[1], c["name"], c["args"]), 0.0) for c in effect[2]]
            elif kind == "recall":
                value = memo.get(effect[1])
            elif kind == "remember":
                memo[effect[1]] = effect[2]
        except Exception as e:
            error = e


def kinds(effects):
    return [e[0] for e in effects]


def run_metrics(effects):
    return [e[1] for e in effects if e[0] == "metric" and e[1]["event"] == "run"]


def test_an_exchange_takes_loads_saves_releases_and_logs_as_effects():
    store, lock = {}, Lock()
    logged.clear()
    gen = run_exchange(config(store, lock), "hi", TK, None, "u1")
    result, effects = drive(gen, [calls("echo"), text("done")])
    assert result["text"] == "done" and result["status"] == "done"
    assert [m["role"] for m in store["u1"]] == ["user", "assistant", "tool", "assistant"]
    assert (lock.taken, lock.released) == (1, 1)
    ios = [tuple(op.fn.__name__ for op in e[1]) for e in effects if e[0] == "io"]
    assert ios == [("_enter", "get"), ("__setitem__", "_exit", "<lambda>")]
    assert logged == [("u1", "hi", ("done",), NOW)]
    assert kinds(effects)[-2:] == ["clock", "metric"] and len(run_metrics(effects)) == 1


def test_a_failed_run_saves_nothing_releases_and_logs_the_prompt():
    store, lock = {"u1": ()}, Lock()
    logged.clear()
    gen = run_exchange(config(store, lock, retries=0), "hi", TK, None, "u1")
    with pytest.raises(ProviderError):
        drive(gen, [ProviderError("bad", status=400)])
    assert store == {"u1": ()} and (lock.taken, lock.released) == (1, 1)
    assert logged == [("u1", "hi", (), NOW)]


def test_a_release_that_fails_after_the_save_returns_the_result_and_reports_it():
    store, lock = {}, Lock(fail_release=True)
    gen = run_exchange(config(store, lock), "hi", TK, None, "u1")
    result, effects = drive(gen, [text("ok")])
    assert result["text"] == "ok" and len(store["u1"]) == 2  # saved, so returned
    warns = [e[1] for e in effects if e[0] == "warn"]
    assert len(warns) == 1 and "lock server gone" in warns[0]
    assert any(e[0] == "metric" and e[1]["event"] == "lock_error" for e in effects)


def test_hooks_are_effects_the_flow_never_calls_itself():
    def never(arg):
        raise AssertionError("the flow called a hook itself")

    hooks = {k: never for k in ("before_llm", "after_llm", "before_tool", "after_tool")}
    store, lock = {}, Lock()
    gen = run_exchange(config(store, lock, hooks=hooks), "hi", TK, None, None)
    result, effects = drive(gen, [calls("echo"), text("done")], hook=lambda fn, arg: None)
    order = [e[2].get("turn") for e in effects if e[0] == "hook"]
    assert len(order) == 6 and order == [1, 1, 1, 1, 2, 2]
    assert result["text"] == "done" and store == {}  # no id: the store is never touched


def test_retries_sleep_with_the_given_random_source_and_on_error_is_an_effect():
    store, lock = {}, Lock()
    fail = ProviderError("busy", status=503)
    gen = run_exchange(config(store, lock), "hi", TK, None, None)
    result, effects = drive(gen, [fail, fail, text("ok")])
    assert result["text"] == "ok"
    assert [e[1] for e in effects if e[0] == "sleep"] == [0.075, 0.15]  # rng 0.5: 3/4 ceiling
    seen = []

    def on_error(info):
        seen.append(info["attempt"])
        return "fail"

    gen = run_exchange(config(store, lock, on_error=on_error), "hi", TK, None, None)
    with pytest.raises(ProviderError):
        drive(gen, [fail, text("never")])
    assert seen == [1]


def test_pending_and_max_turns_end_the_run_and_are_saved():
    store, lock = {}, Lock()
    gen = run_exchange(config(store, lock), "hi", TK, None, "p")
    result, _ = drive(gen, [calls("wait")])
    assert result["status"] == "pending" and result["pending"]["id"] == "q1" and store["p"]
    gen = run_exchange(config(store, lock, max_turns=2), "go", TK, None, "m")
    result, _ = drive(gen, [calls("echo"), calls("echo"), text("never")])
    assert (result["status"], result["limit"], result["turns"]) == ("incomplete", "max_turns", 2)
    assert len(store["m"]) == 5


def test_an_optimistic_exchange_holds_no_lock_while_it_runs_and_keeps_both_turns():
    store, lock = {}, Lock()
    first = text("first")
    gen = run_exchange(config(store, lock, hold_lock=False), "one", TK, None, "u")
    # Another exchange saves while this one runs (between its load and its save).
    effect = next(gen)
    while effect[0] != "llm":
        effect = gen.send(drive_one(effect, store))
    assert lock.taken == lock.released == 1  # nothing held while the model answers
    two = FrozenMap({"role": "user", "content": "two"})
    store["u"] = (two, FrozenMap({"role": "assistant", "content": "second"}))
    result, _ = drive_rest(gen, first, store)
    assert [m["content"] for m in store["u"]] == ["two", "second", "one", "first"]
    assert result["text"] == "first" and lock.taken == lock.released == 2


def drive_one(effect, store):
    kind = effect[0]
    if kind == "io":
        return tuple(("ok", op.fn(*op.args)) for op in effect[1])
    return {"clock": 0.0, "now": NOW}.get(kind)


def drive_rest(gen, turn, store):
    value, effects = turn, []
    while True:
        try:
            effect = gen.send(value)
        except StopIteration as stop:
            return stop.value, effects
        effects.append(effect)
        value = drive_one(effect, store)


def fused(store, lock, fail_save=False, release_error=None):
    """Return config overrides: a store's fused "lock_load" and "save_release" over `store`."""

    def lock_load(cid):
        held = lock(cid)
        held.__enter__()
        return held, store.get(cid)

    def save_release(held, cid, messages):
        try:
            if fail_save:
                raise OSError("disk full")
            store[cid] = messages
        finally:
            held.__exit__(None, None, None)
        return release_error

    return {"fused": {"lock_load": fuse(lock_load, "get", "lock"),
                      "save_release": fuse(save_release, "save", "lock")}}  # fmt: skip


def io_names(effects):
    return [tuple(op.fn.__name__ for op in e[1]) for e in effects if e[0] == "io"]


def test_the_fused_calls_take_and_load_then_save_and_release_in_one_op_each():
    store, lock = {}, Lock()
    logged.clear()
    gen = run_exchange(config(store, lock, **fused(store, lock)), "hi", TK, None, "u1")
    result, effects = drive(gen, [calls("echo"), text("done")])
    assert result["text"] == "done" and len(store["u1"]) == 4
    assert io_names(effects) == [("lock_load",), ("save_release", "<lambda>")]
    assert (lock.taken, lock.released) == (1, 1) and logged == [("u1", "hi", ("done",), NOW)]
    assert not [e for e in effects if e[0] == "warn"]


def test_a_stream_uses_the_fused_calls_for_its_load_and_its_rebased_save():
    store, lock = {"u": (FrozenMap({"role": "user", "content": "zero"}),)}, Lock()
    cfg = config(store, lock, hold_lock=False, **fused(store, lock))
    gen = run_exchange(cfg, "one", TK, None, "u")
    result, effects = drive(gen, [text("first")])
    assert io_names(effects) == [("lock_load",), ("_exit",), ("lock_load",),
                                 ("save_release", "<lambda>")]  # fmt: skip
    assert [m["content"] for m in store["u"]] == ["zero", "one", "first"]
    assert lock.taken == lock.released == 2


def test_a_fused_save_that_fails_still_releases_and_raises_having_saved_nothing():
    store, lock = {}, Lock()
    cfg = config(store, lock, **fused(store, lock, fail_save=True))
    effects: list = []
    with pytest.raises(OSError, match="disk full"):
        drive(run_exchange(cfg, "hi", TK, None, "u1"), [text("ok")], effects=effects)
    assert store == {} and (lock.taken, lock.released) == (1, 1)
    assert [m["error"] for m in run_metrics(effects)] == [True]


def test_a_fused_release_that_fails_after_the_save_returns_the_result_and_reports_it():
    store, lock = {}, Lock()
    cfg = config(store, lock, **fused(store, lock, release_error=OSError("lock server gone")))
    result, effects = drive(run_exchange(cfg, "hi", TK, None, "u1"), [text("ok")])
    assert result["text"] == "ok" and len(store["u1"]) == 2
    warns = [e[1] for e in effects if e[0] == "warn"]
    assert len(warns) == 1 and "lock server gone" in warns[0]
    assert [e[1]["error"] for e in effects if e[0] == "metric"
            and e[1]["event"] == "lock_error"] == ["OSError"]  # fmt: skip
    assert [m["error"] for m in run_metrics(effects)] == [False]


@given(
    st.lists(st.sampled_from(["text", "calls", "fail", "busy"]), min_size=1, max_size=5),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_every_exit_releases_what_it_took_and_emits_one_run_metric(
    script, with_id, hold, fuse, save_fails
):
    """The single exit: whatever happens, the lock is released, one run metric is
    emitted, and the store holds the whole exchange or nothing new (with the store's
    fused lock_load/save_release or without)."""
    turns = [{"text": text("a"), "calls": calls("echo"), "fail": ProviderError("x", status=400),
              "busy": ProviderError("y", status=503)}[s] for s in script]  # fmt: skip
    turns.append(text("end"))
    store, lock = {}, Lock()
    over = fused(store, lock, fail_save=save_fails) if fuse else {}
    if save_fails and not fuse:
        over = {"save": lambda cid, messages: (_ for _ in ()).throw(OSError("disk full"))}
    cfg = config(store, lock, retries=1, hold_lock=hold, max_turns=3, **over)
    gen = run_exchange(cfg, "q", TK, None, "u" if with_id else None)
    effects: list = []
    try:
        result = drive(gen, turns, effects=effects)[0]
    except (ProviderError, OSError):
        assert store == {}
        assert [m["error"] for m in run_metrics(effects)] == [True]
    else:
        assert store.get("u", result["messages"]) == result["messages"]
        assert [m["error"] for m in run_metrics(effects)] == [False]
    assert lock.taken == lock.released
