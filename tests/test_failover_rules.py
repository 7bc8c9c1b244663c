"""The rules of core/failover.py, driven as the flow drives it (its generators stepped by
hand, no client): which keys a leg brings, when a failure moves on (its hook asked only
then), the state translated for the next leg (texts, fresh, the made record), the
failover event and hook payload, a leg that cannot carry a part skipped, the lifted
system text, and the state a run ends with before and after a failover."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core import steps
from toolnexus.core.errors import ProviderError
from toolnexus.core.failover import LEG_KEYS, as_leg, can_fail_over, finished, switch
from toolnexus.core.frozen import FrozenMap
from toolnexus.core.tool import tool_result
from toolnexus.core.wire.common import turn, usage

AUDIO = {"type": "audio", "mimeType": "audio/wav", "data": "aGk="}


def _run(gen, answers=()):
    """Step a generator of effects; return (the effects it yielded, its return value)."""
    effects, answers = [], list(answers)
    try:
        effect = next(gen)
        while True:
            effects.append(effect)
            effect = gen.send(answers.pop(0) if answers else None)
    except StopIteration as stop:
        return effects, stop.value


def _leg(dialect, model, **more):
    return {"dialect": dialect, "model": model, "on_unsupported_part": "error", "encode": True,
            "system": lambda tk: f"sys {tk}", "served_by": f"{dialect}-client", **more}  # fmt: skip


def _state(prompt="q"):
    s = steps.start("openai", [FrozenMap({"role": "user", "content": "old"})], prompt, texts=[b"X"])
    s, _ = steps.on_turn(
        s, turn({"role": "assistant", "content": "a"}, "a", [], usage(1, 1), "stop", "m")
    )
    return s


def test_what_a_leg_brings():
    assert LEG_KEYS == (
        "dialect", "model", "system", "params", "retries", "retry_base_ms", "max_wait_s", "rng",
        "on_error", "transform", "on_unsupported_part", "max_part_bytes", "prompt_cache",
        "server_state", "encode", "omitted", "omission_key", "remember_omission", "served_by",
        "leg",
    )  # fmt: skip
    cfg = {"model": "a", "store": "S", "dialect": "openai", "hooks": 1}
    out = as_leg(cfg, {"model": "b", "store": "T", "leg": 2, "hooks": None})
    assert out == {"model": "b", "store": "S", "dialect": "openai", "hooks": 1, "leg": 2}
    assert cfg["model"] == "a"


def test_no_next_client_or_no_predicate_never_moves_on():
    err = ProviderError("x", status=500)
    for cfg in (
        {},
        {"legs": (), "fails_over": bool},
        {"legs": (1,)},
        {"legs": (1,), "fails_over": None},
    ):
        assert _run(can_fail_over(cfg, err)) == ([], False)


def test_a_failure_after_text_was_streamed_never_moves_on():
    err = ProviderError("x", status=500)
    err.streamed = True
    assert _run(can_fail_over({"legs": (1,), "fails_over": bool}, err)) == ([], False)


def test_the_predicate_decides_through_its_hook():
    err = ProviderError("x", status=500)
    err.streamed = False
    cfg = {"legs": (1,), "fails_over": "PRED"}
    assert _run(can_fail_over(cfg, err), ["yes"]) == ([("hook", "PRED", err)], True)
    assert _run(can_fail_over(cfg, err), [0]) == ([("hook", "PRED", err)], False)


def test_switch_moves_the_state_to_the_next_leg_s_dialect():
    state = _state()
    cfg = {
        "model": "m1",
        "served_by": "openai-client",
        "legs": (_leg("anthropic", "m2"), _leg("gemini", "m3")),
    }
    err = ProviderError("down", status=503)
    effects, (nxt, moved) = _run(switch(cfg, state, err, 2))
    assert nxt["model"] == "m2" and nxt["dialect"] == "anthropic"
    assert nxt["legs"] == (cfg["legs"][1],) and "lifted" not in nxt
    assert nxt["system"]("tk") == "sys tk"
    assert moved["dialect"] == "anthropic" and moved["model"] is None and moved["facts"] is None
    assert [m["role"] for m in moved["messages"]] == ["user", "user", "assistant"]
    assert moved["texts"] == steps.texts_of(moved["messages"])
    assert moved["fresh"] == 2 and "lifted" not in moved
    assert moved["made"] == (state["messages"], 2, 3)
    assert moved["turns"] == state["turns"] and state["dialect"] == "openai"
    event = {"event": "failover", "model": "m1", "to_model": "m2", "from": "openai-client",
             "to": "anthropic-client", "kind": "server", "status": "503",
             "error": "ProviderError", "turn": 2}  # fmt: skip
    assert effects == [("metric", event)]


def test_a_leg_that_does_not_encode_keeps_no_texts():
    cfg = {"model": "m1", "legs": (_leg("anthropic", "m2", encode=False),)}
    _, (_, moved) = _run(switch(cfg, _state(), ProviderError("x", status=500), 1))
    assert moved["texts"] is None


def test_the_hook_sees_the_event_the_error_and_both_legs():
    cfg = {"model": "m1", "leg": 0, "on_failover": "HOOK",
           "legs": (_leg("anthropic", "m2", leg=1),)}  # fmt: skip
    err = OSError("net")
    effects, _ = _run(switch(cfg, _state(), err, 1))
    (hook, fn, payload), metric = effects
    assert (hook, fn) == ("hook", "HOOK") and metric[0] == "metric"
    assert payload == {**metric[1], "error": err, "leg": 0, "to_leg": 1}
    assert metric[1]["status"] == "error" and metric[1]["error"] == "OSError"
    assert metric[1]["from"] is None


def test_a_leg_that_cannot_carry_a_part_is_skipped():
    state = steps.start("openai", [], [AUDIO])
    cfg = {"model": "m1", "legs": (_leg("anthropic", "m2"), _leg("openai", "m3"))}
    _, (nxt, moved) = _run(switch(cfg, state, ProviderError("x", status=500), 1))
    assert nxt["model"] == "m3" and nxt["legs"] == () and moved["dialect"] == "openai"


def test_no_leg_left_raises_the_error():
    err = ProviderError("x", status=500)
    state = steps.start("openai", [], [AUDIO])
    for legs in ((), (_leg("anthropic", "m2"),)):
        with pytest.raises(ProviderError) as e:
            _run(switch({"model": "m", "legs": legs}, state, err, 1))
        assert e.value is err


def test_system_text_lifted_before_leads_the_next_leg_s_system():
    cfg = {"model": "m1", "lifted": "L", "legs": (_leg("anthropic", "m2"),)}
    _, (nxt, _) = _run(switch(cfg, _state(), ProviderError("x", status=500), 1))
    assert nxt["lifted"] == "L" and nxt["system"]("tk") == "L\n\nsys tk"
    cfg = {**cfg, "legs": (_leg("anthropic", "m2", system=lambda tk: ""),)}
    _, (nxt, _) = _run(switch(cfg, _state(), ProviderError("x", status=500), 1))
    assert nxt["system"]("tk") == "L"


def test_a_second_failover_keeps_each_message_as_its_maker_shaped_it():
    state = _state()
    legs = (_leg("anthropic", "m2"), _leg("gemini", "m3"))
    cfg = {"model": "m1", "legs": legs}
    _, (cfg2, moved) = _run(switch(cfg, state, ProviderError("x", status=500), 1))
    reply = {"role": "assistant", "content": [{"type": "text", "text": "b"}]}
    moved, _ = steps.on_turn(moved, turn(reply, "b", [], usage(1, 1), "end_turn", "m2"))
    _, (cfg3, moved3) = _run(switch(cfg2, moved, ProviderError("x", status=500), 2))
    made, fresh, cut = moved3["made"]
    assert list(made) == [*state["messages"], FrozenMap(reply)] and fresh == 3
    assert cut == len(moved3["messages"]) and cfg3["dialect"] == "gemini"


def test_a_run_ends_naming_who_served_it():
    state = {**_state(), "model": None}
    out = finished({"served_by": "c", "model": "cfg-model"}, state)
    assert out["served_by"] == "c" and out["model"] == "cfg-model"
    assert out["messages"] is state["messages"] and out["texts"] is state["texts"]
    assert "failed_over" not in out
    assert finished({"model": "x"}, {**state, "model": "own"})["model"] == "own"
    assert finished({"model": "x"}, state)["served_by"] is None


def test_a_run_that_failed_over_saves_each_message_as_made():
    state = _state()
    cfg = {"model": "m1", "legs": (_leg("anthropic", "m2"),)}
    _, (nxt, moved) = _run(switch(cfg, state, ProviderError("x", status=500), 1))
    reply = FrozenMap(
        {"role": "assistant", "content": pvector([FrozenMap({"type": "text", "text": "b"})])}
    )
    moved, _ = steps.on_turn(moved, turn(reply, "b", [], usage(1, 1), "end_turn", None))
    out = finished(nxt, moved)
    assert list(out["messages"]) == [*state["messages"], reply]
    assert out["fresh"] == 3 and out["texts"] is None and out["facts"] is None
    assert out["made"] is None and out["failed_over"] is True
    assert out["model"] == "m2" and out["served_by"] == "anthropic-client"


def test_an_error_that_says_nothing_of_streaming_may_move_on():
    err = OSError("reset")
    assert _run(can_fail_over({"legs": (1,), "fails_over": "P"}, err), [True]) == (
        [("hook", "P", err)],
        True,
    )


def _calls_state():
    """An openai run that called two tools: its results are two messages in openai, one
    in anthropic (the shapes differ between the dialects)."""
    s = steps.start("openai", [FrozenMap({"role": "user", "content": "old"})], "q")
    calls = [
        {"id": "call_1", "name": "f", "arguments": "{}"},
        {"id": "call_2", "name": "g", "arguments": "{}"},
    ]
    wire = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "{}"}}
            for c in calls]  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": wire}
    s, parsed = steps.on_turn(s, turn(message, "", calls, usage(1, 1), "tool_calls", "m1"))
    return steps.on_results(s, parsed, [tool_result("r1"), tool_result("r2")], max_turns=5)


def test_the_moved_state_is_the_next_dialect_s_view_and_made_keeps_the_makers():
    state = _calls_state()
    assert state["fresh"] == 4  # the prompt, the calls, two results
    cfg = {"model": "m1", "legs": (_leg("anthropic", "m2"),)}
    _, (nxt, moved) = _run(switch(cfg, state, ProviderError("x", status=500), 1))
    roles = [m["role"] for m in moved["messages"]]
    assert roles == ["user", "user", "assistant", "user"] and moved["fresh"] == 3
    assert moved["messages"][2]["content"][0]["type"] == "tool_use"
    assert moved["made"] == (state["messages"], 4, 4)
    reply = FrozenMap(
        {"role": "assistant", "content": pvector([FrozenMap({"type": "text", "text": "done"})])}
    )
    moved, _ = steps.on_turn(moved, turn(reply, "done", [], usage(1, 1), "end_turn", "m2"))
    out = finished(nxt, moved)
    assert list(out["messages"]) == [*state["messages"], reply]  # openai's, then anthropic's
    assert out["fresh"] == 5 and out["facts"] is None and out["texts"] is None
    assert finished(nxt, {**moved, "facts": ("anthropic", ())})["facts"] is None


def test_the_history_before_the_run_is_read_with_the_leg_s_policy():
    old = steps.start("openai", [], [AUDIO])["messages"]
    state = steps.start("openai", old, "q")
    cfg = {"model": "m1", "legs": (_leg("anthropic", "m2", on_unsupported_part="text"),)}
    _, (nxt, moved) = _run(switch(cfg, state, ProviderError("x", status=500), 1))
    assert nxt["model"] == "m2" and moved["fresh"] == 1
    assert "omitted: not supported by anthropic" in moved["messages"][0]["content"][0]["text"]
