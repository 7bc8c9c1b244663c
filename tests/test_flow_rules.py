"""The exchange flow (core/flow.py), rule by rule: its generators stepped by hand with
literal answers, no driver and no HTTP. The effects each step yields (in order, with
their payloads), what it returns, and what it raises: a model turn and its retries,
server state, body transforms, tool hooks and suspensions, refused request parts, the
loop's turns, and the exchange's lock, load, save, log and run metric."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyrsistent import pset, pvector

from toolnexus import tool, toolkit
from toolnexus.core import flow, loading, steps
from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap, freeze, thaw
from toolnexus.core.tool import tool_result
from toolnexus.core.wire import DEFAULT_STYLE, DIALECTS
from toolnexus.core.wire.common import message_json, turn, usage

U = usage(1, 2)
ECHO = tool("echo", "Echo.", None, lambda a: "e")
TK = toolkit(ECHO)
CODEC = DIALECTS[DEFAULT_STYLE]


class Script:
    """Answers to a generator's effects, by kind: a list is answered in order (an
    exception in it is thrown in), a function is called with the effect; a kind not
    scripted is answered None (a clock 0). Every effect is kept in `effects`."""

    def __init__(self, **kinds):
        self.kinds = {k: list(v) if isinstance(v, list) else v for k, v in kinds.items()}
        self.effects: list = []

    def answer(self, effect):
        got = self.kinds.get(effect[0])
        if got is None:
            return 0.0 if effect[0] == "clock" else None
        return got(effect) if callable(got) else got.pop(0)

    def run(self, gen):
        """Step `gen` to its end; return its value (or raise what it raises)."""
        value, error = None, None
        while True:
            try:
                effect = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
            self.effects.append(effect)
            value, error = self.answer(effect), None
            if isinstance(value, BaseException):
                value, error = None, value

    def of(self, kind):
        return [e for e in self.effects if e[0] == kind]


def clocks(*times):
    return list(times)


def answer(text="a", calls=(), end=None, refusal=None, model="m1"):
    message = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
            for i, n in calls
        ]
    wire = [{"id": i, "name": n, "arguments": "{}"} for i, n in calls]
    return turn(message, text, wire, U, "stop", model, end=end, refusal=refusal)


def state(prompt="q", history=()):
    return steps.start(DEFAULT_STYLE, list(history), prompt)


def cfg(**over):
    base = {"model": "m", "encode": False, "on_error": None, "retries": 2, "retry_base_ms": 100,
            "rng": lambda: 0.5, "max_wait_s": None, "events": False, "transform": None,
            "hooks": {}, "wait_for": None, "system": lambda tk: "", "params": FrozenMap(),
            "max_turns": 5}  # fmt: skip
    return {**base, **over}


# ---- small values ------------------------------------------------------------------


def test_an_op_runs_only_before_an_error_unless_always_and_names_no_kind():
    op = flow.Op(len, ("ab",))
    assert op.always is False and op.kind == ""
    assert flow.Op(len, (), True, "log") == (len, (), True, "log")


def test_an_outcome_s_value_is_its_value_nothing_when_skipped_or_its_error_raised():
    assert flow.value_of(("ok", 3)) == 3
    assert flow.value_of(("skipped",)) is None
    with pytest.raises(KeyError):
        flow.value_of(("error", KeyError("k")))


def test_a_hook_s_result_may_leave_is_error_out():
    assert flow._as_result({"output": "o"}) == {"output": "o", "is_error": False, "metadata": {}}
    assert flow._as_result({"output": "o", "is_error": True})["is_error"] is True
    assert flow._as_result("t") == {"output": "t", "is_error": False, "metadata": {}}
    assert flow._as_result({"a": 1})["output"] == '{"a": 1}'


# ---- one model turn ----------------------------------------------------------------


def test_a_model_turn_is_asked_timed_and_measured():
    s, a = state(), answer("hi")
    script = Script(clock=clocks(1.0, 3.5), llm=[a])
    got = script.run(flow._llm_turn(cfg(leg=2, served_by="C"), Codec(), s, {"model": "m"}, 3, {}))
    assert got is a
    request = {"body": {"model": "m"}, "content": None, "turn": 3, "leg": 2, "client": "C",
               "messages": s["messages"]}  # fmt: skip
    assert script.effects == [
        ("clock",),
        ("llm", request),
        ("clock",),
        ("metric", {"event": "llm", "model": "m", "status": "ok", "duration_s": 2.5,
                    "usage": U}),
    ]  # fmt: skip


def test_a_request_names_the_first_leg_and_no_client_by_default():
    script = Script(clock=clocks(0, 0), llm=[answer()])
    script.run(flow._llm_turn(cfg(), Codec(), state(), {}, 1, {}))
    (_, request) = script.of("llm")[0]
    assert request["leg"] == 0 and request["client"] is None


def test_an_encoding_run_sends_the_bytes_reusing_the_known_texts():
    tools = pvector([1])
    body = {"model": "m", "tools": tools}
    script = Script(clock=clocks(0, 0), llm=[answer()])
    script.run(
        flow._llm_turn(cfg(encode=True), Codec(), state(), body, 1, {"tools": (tools, "[K]")})
    )
    assert script.of("llm")[0][1]["content"] == b'{"model":"m","tools":[K]}'


def test_a_turn_s_split_characters_are_joined():
    split = answer("\ud83d\ude00")
    got = Script(clock=clocks(0, 0), llm=[split]).run(
        flow._llm_turn(cfg(), Codec(), state(), {}, 1, {})
    )
    assert got["text"] == "\U0001f600"


def test_a_failed_turn_is_measured_then_retried_after_its_backoff():
    busy = ProviderError("busy", status=503)
    script = Script(clock=clocks(1, 2, 10, 11, 20, 24), llm=[busy, busy, answer("ok")],
                    wallclock=[0.0, 0.0])  # fmt: skip
    got = script.run(flow._llm_turn(cfg(), Codec(), state(), {}, 1, {}))
    assert got["text"] == "ok"
    metric = {"event": "llm", "model": "m", "status": "503", "duration_s": 1}
    assert script.effects[2:7] == [
        ("clock",),
        ("metric", metric),
        ("remaining",),
        ("wallclock",),
        ("sleep", 0.075),  # base 100 ms, rng 0.5: 50 + 25 ms
    ]
    assert script.of("sleep") == [("sleep", 0.075), ("sleep", 0.15)]  # the second attempt
    assert script.of("metric")[-1][1]["duration_s"] == 4


def test_a_failure_without_a_status_is_an_error_metric():
    script = Script(clock=clocks(0, 1, 2, 3), llm=[ProviderError("net", network=True), answer()])
    script.run(flow._llm_turn(cfg(), Codec(), state(), {}, 1, {}))
    assert script.of("metric")[0][1]["status"] == "error"


def test_a_failure_after_streamed_text_is_never_retried_nor_asked_about():
    err = ProviderError("cut", status=503)
    err.streamed = True
    script = Script(clock=clocks(0, 1), llm=[err])
    with pytest.raises(ProviderError) as e:
        script.run(flow._llm_turn(cfg(on_error="H"), Codec(), state(), {}, 1, {}))
    assert e.value is err
    assert [x[0] for x in script.effects] == ["clock", "llm", "clock", "metric"]


def test_on_error_is_asked_with_the_failure_and_its_choice_decides():
    err = ProviderError("busy", status=503)
    script = Script(clock=clocks(0, 1), llm=[err], hook=["fail"])
    with pytest.raises(ProviderError):
        script.run(flow._llm_turn(cfg(on_error="H"), Codec(), state(), {}, 1, {}))
    ((_, fn, info),) = script.of("hook")
    assert fn == "H" and info["error"] is err and info["attempt"] == 1
    assert info["status"] == 503 and info["retryable"] is True
    bad = ProviderError("bad", status=400)
    script = Script(clock=clocks(0, 1, 2, 3), llm=[bad, answer()], hook=["retry"])
    assert script.run(flow._llm_turn(cfg(on_error="H"), Codec(), state(), {}, 1, {}))["text"] == "a"
    assert len(script.of("sleep")) == 1


def test_a_failure_past_the_retries_is_raised():
    err = ProviderError("busy", status=503)
    script = Script(clock=clocks(0, 1, 2, 3), llm=[err, err])
    with pytest.raises(ProviderError):
        script.run(flow._llm_turn(cfg(retries=1), Codec(), state(), {}, 1, {}))
    assert len(script.of("sleep")) == 1 and len(script.of("llm")) == 2


def test_a_wait_longer_than_allowed_or_than_the_time_left_is_raised_not_slept():
    slow = ProviderError("slow", status=503, headers={"Retry-After": "3"})
    script = Script(clock=clocks(0, 1), llm=[slow])
    with pytest.raises(ProviderError) as e:
        script.run(flow._llm_turn(cfg(max_wait_s=2), Codec(), state(), {}, 1, {}))
    assert e.value.retry_after == 3.0 and script.of("sleep") == []
    script = Script(clock=clocks(0, 1), llm=[slow], remaining=[2.0])
    with pytest.raises(ProviderError):
        script.run(flow._llm_turn(cfg(), Codec(), state(), {}, 1, {}))
    script = Script(clock=clocks(0, 1, 2, 3), llm=[slow, answer()], remaining=[5.0])
    script.run(flow._llm_turn(cfg(max_wait_s=4), Codec(), state(), {}, 1, {}))
    assert script.of("sleep") == [("sleep", 3.0)]


def test_a_retry_after_date_counts_from_the_wallclock():
    dated = ProviderError("slow", status=503,
                          headers={"Retry-After": "Thu, 01 Jan 1970 00:00:10 GMT"})  # fmt: skip
    script = Script(clock=clocks(0, 1, 2, 3), llm=[dated, answer()], wallclock=[4.0])
    script.run(flow._llm_turn(cfg(), Codec(), state(), {}, 1, {}))
    assert script.of("sleep") == [("sleep", 6.0)]


# ---- the body sent: stream, transform, server state ---------------------------------------


class Codec(SimpleNamespace):
    """A codec of literal answers: each method records its call and returns what it is told."""

    def stream_body(self, body):
        return {**body, "stream": True}

    def server_state_body(self, full, messages):
        return self.stated if self.stated is not None else full

    def forgotten(self, e):
        return e.status == 404

    def stored(self, full):
        return {**full, "store": True}


def _sent(c, body):
    script = Script(clock=clocks(0, 0), llm=[answer()], hook=["T"])
    script.run(flow._llm_turn(c, Codec(), state(), body, 1, {}))
    return script.of("llm")[0][1]["body"], script.of("hook")


def test_the_body_sent_is_streamed_then_transformed_last():
    assert _sent(cfg(), {"a": 1}) == ({"a": 1}, [])
    assert _sent(cfg(events=True), {"a": 1}) == ({"a": 1, "stream": True}, [])
    got = _sent(cfg(events=True, transform="F"), {"a": 1})
    assert got == ("T", [("hook", "F", {"a": 1, "stream": True})])


def test_without_server_state_the_whole_body_is_sent():
    script = Script(clock=clocks(0, 0), llm=[answer()])
    script.run(flow._stated_turn(cfg(), Codec(stated={"x": 1}), state(), {"full": 1}, 1, {}))
    assert script.of("llm")[0][1]["body"] == {"full": 1}


def test_with_server_state_the_stated_body_is_sent():
    script = Script(clock=clocks(0, 0), llm=[answer()])
    c = cfg(server_state=True)
    script.run(flow._stated_turn(c, Codec(stated={"prev": 1}), state(), {"full": 1}, 1, {}))
    assert script.of("llm")[0][1]["body"] == {"prev": 1}


def test_a_forgotten_response_sends_the_whole_transcript_stored_once_more():
    gone = ProviderError("no previous response", status=404)
    c = cfg(server_state=True, retries=0)
    script = Script(clock=clocks(0, 1, 2, 3), llm=[gone, answer("ok")])
    got = script.run(flow._stated_turn(c, Codec(stated={"prev": 1}), state(), {"full": 1}, 1, {}))
    assert got["text"] == "ok"
    assert ("metric", {"event": "server_state_fallback", "model": "m"}) in script.effects
    assert [e[1]["body"] for e in script.of("llm")] == [{"prev": 1}, {"full": 1, "store": True}]


def test_a_failure_that_is_no_forgetting_or_of_a_whole_body_is_raised():
    c = cfg(server_state=True, retries=0)
    other = ProviderError("bad", status=400)
    script = Script(clock=clocks(0, 1), llm=[other])
    with pytest.raises(ProviderError):
        script.run(flow._stated_turn(c, Codec(stated={"prev": 1}), state(), {"full": 1}, 1, {}))
    gone = ProviderError("gone", status=404)
    script = Script(clock=clocks(0, 1), llm=[gone])
    with pytest.raises(ProviderError):  # no previous response named: nothing to fall back on
        script.run(flow._stated_turn(c, Codec(stated=None), state(), {"full": 1}, 1, {}))
    assert len(script.of("llm")) == 1


# ---- a turn's tools: hooks, suspension ------------------------------------------------


def call(id="c1", name="echo", args=None, error=None):
    return {"id": id, "name": name, "args": freeze(args or {}), "error": error}


def test_before_tool_is_asked_of_a_usable_call_only():
    c = call(args={"a": 1})
    script = Script(hook=[None])
    assert script.run(flow._before_tool("B", call(error="bad"), 1))[1] is None
    assert script.effects == []
    assert script.run(flow._before_tool("B", c, 4)) == (c, None)
    assert script.effects == [("hook", "B", {"name": "echo", "args": {"a": 1}, "id": "c1",
                                             "turn": 4})]  # fmt: skip


def test_before_tool_may_answer_for_the_tool_or_rewrite_its_arguments():
    c = call()
    got = Script(hook=[{"result": {"output": "short"}}]).run(flow._before_tool(1, c, 1))
    assert got == (c, {"output": "short", "is_error": False, "metadata": {}})
    got = Script(hook=[{"args": {"b": [2]}}]).run(flow._before_tool(1, c, 1))
    assert got[1] is None and thaw(got[0]["args"]) == {"b": [2]} and got[0]["id"] == "c1"
    assert isinstance(got[0]["args"], FrozenMap)
    got = Script(hook=[{"other": 1}]).run(flow._before_tool(1, c, 1))
    assert got == (c, None)


def test_after_tool_sees_the_result_and_may_replace_it():
    c, r = call(args={"a": 1}), tool_result("r")
    script = Script(hook=[None, {"other": 1}, {"result": "new"}])
    assert script.run(flow._after_tool("A", c, r, 2)) is r
    assert script.run(flow._after_tool("A", c, r, 2)) is r
    assert script.run(flow._after_tool("A", c, r, 2)) == {"output": "new", "is_error": False,
                                                             "metadata": {}}  # fmt: skip
    assert script.effects[0] == ("hook", "A", {"name": "echo", "args": {"a": 1}, "result": r,
                                               "id": "c1", "turn": 2})  # fmt: skip


def test_a_tool_s_source_is_its_toolkit_s_or_unknown():
    assert flow._source(TK, call()) == "function"
    assert flow._source(TK, call(name="nope")) == "unknown"
    assert flow._source(None, call()) == "unknown"


def ran(*results):
    """A "tools" answer: each result with its seconds."""
    return [(r, 0.5) for r in results]


def test_a_turn_s_calls_run_together_in_order_each_measured():
    script = Script(tools=[ran(tool_result("1"), tool_result("2", True))])
    results, pending = script.run(flow._run_calls(cfg(), TK, [call("a"), call("b", "x")], 1))
    assert [r["output"] for r in results] == ["1", "2"] and pending is None
    assert script.effects == [
        ("tools", TK, [call("a"), call("b", "x")]),
        ("metric", {"event": "tool", "tool": "echo", "source": "function", "is_error": False,
                    "duration_s": 0.5}),
        ("metric", {"event": "tool", "tool": "x", "source": "unknown", "is_error": True,
                    "duration_s": 0.5}),
    ]  # fmt: skip


def test_a_call_answered_by_before_tool_is_not_run_nor_measured():
    script = Script(hook=[{"result": "short"}, None], tools=[ran(tool_result("2"))])
    c = cfg(hooks={"before_tool": "B"})
    results, _ = script.run(flow._run_calls(c, TK, [call("a"), call("b")], 1))
    assert [r["output"] for r in results] == ["short", "2"]
    assert script.of("tools") == [("tools", TK, [call("b")])]
    assert len(script.of("metric")) == 1
    script = Script(hook=[{"result": "short"}])
    results, _ = script.run(flow._run_calls(c, TK, [call("a")], 1))
    assert script.of("tools") == [] and results[0]["output"] == "short"


ASK = tool_result("asked", metadata={"pending": {"id": "q1"}})
ASK2 = tool_result("asked", metadata={"pending": {"id": "q2"}})


def test_a_pending_request_ends_the_turn_and_a_second_is_not_run():
    script = Script(tools=[ran(ASK, ASK2)])
    results, pending = script.run(flow._run_calls(cfg(), TK, [call("a"), call("b")], 1))
    assert pending == {"id": "q1"} and results[0] is ASK
    assert results[1] == tool_result("Not run: another request of this turn is pending.", True)
    assert script.of("event") == []
    script = Script(tools=[ran(ASK)])
    script.run(flow._run_calls(cfg(events=True), TK, [call("a")], 1))
    assert script.of("event") == [("event", {"type": "pending", "request": {"id": "q1"}})]


def test_after_tool_sees_each_result_of_the_turn():
    script = Script(tools=[ran(tool_result("1"))], hook=[{"result": "after"}])
    results, _ = script.run(flow._run_calls(cfg(hooks={"after_tool": "A"}), TK, [call()], 3))
    assert results[0]["output"] == "after" and script.of("hook")[0][2]["turn"] == 3


def test_with_wait_for_the_host_is_asked_and_the_call_run_again_with_its_answer():
    outcome = (("ok", {"ok": True, "data": 7}),)
    script = Script(tools=[ran(ASK), ran(tool_result("done"))], io=[outcome])
    c = cfg(wait_for="W", events=True)
    results, pending = script.run(flow._run_calls(c, TK, [call(args={"a": 1})], 1))
    assert pending is None and results[0]["output"] == "done"
    pend, io, again = script.effects[2:5]
    assert pend == ("event", {"type": "pending", "request": {"id": "q1"}})
    assert io == ("io", (flow.Op("W", ({"id": "q1"},)),))
    assert again[2][0]["args"] == {"a": 1, "_resume": {"ok": True, "data": 7}}
    assert isinstance(again[2][0]["args"]["_resume"], FrozenMap)


@pytest.mark.parametrize("answered", [("ok", None), ("ok", {"ok": False}), ("ok", {"data": 1})])
def test_a_declined_or_unanswered_request_is_an_error_result(answered):
    script = Script(io=[(answered,)])
    got = script.run(flow._resume(cfg(wait_for="W"), TK, call(), {"id": "q1"}))
    assert got == tool_result("Request 'q1' was declined or not answered.", True)
    assert script.of("tools") == [] and script.of("event") == []


def test_a_failed_wait_raises_and_a_second_suspension_is_an_error_result():
    script = Script(io=[(("error", OSError("gone")),)])
    with pytest.raises(OSError):
        script.run(flow._resume(cfg(wait_for="W"), TK, call(), {"id": "q1"}))
    script = Script(io=[(("ok", {"ok": True}),)], tools=[ran(ASK2)])
    got = script.run(flow._resume(cfg(wait_for="W"), TK, call(), {"id": "q1"}))
    assert got == tool_result("Tool 'echo' suspended again after its answer.", True)


# ---- before a model turn, its body ---------------------------------------------------------


def test_before_llm_sees_the_turn_and_may_replace_messages_and_tools():
    s = state()
    c = cfg(hooks={"before_llm": "H"}, served_by="C")
    script = Script(hook=[None])
    assert script.run(flow._before_llm(c, "H", s, TK)) == (s, TK)
    assert script.effects == [("hook", "H", {"messages": s["messages"], "tools": TK,
                                             "model": "m", "turn": 1, "client": "C"})]  # fmt: skip
    new = [{"role": "user", "content": "other"}]
    got_state, got_tk = Script(hook=[{"messages": new}]).run(flow._before_llm(c, "H", s, TK))
    assert thaw(got_state["messages"]) == new and got_tk is TK
    got_state, got_tk = Script(hook=[{"tools": "T2"}]).run(flow._before_llm(c, "H", s, TK))
    assert got_state is s and got_tk == "T2"


def test_the_tools_text_is_the_toolkit_s_own_while_the_tools_are_its_own():
    tools = CODEC.encode_tools(TK)
    assert flow._tools_text(TK, tools, CODEC) == TK["wire_json"][DEFAULT_STYLE]
    other = pvector([FrozenMap({"x": 1})])
    assert flow._tools_text(TK, other, CODEC) == '[{"x":1}]'
    assert flow._tools_text(None, other, CODEC) == '[{"x":1}]'
    assert flow._tools_text(FrozenMap(), other, CODEC) == '[{"x":1}]'


class Bodies(Codec):
    def cache_body(self, body, cid):
        return {**body, "cached": cid}

    def omit(self, body, omitted):
        return {k: v for k, v in body.items() if k not in omitted}


def test_the_body_is_the_steps_request_cached_and_without_what_is_omitted():
    s = state()
    c = cfg(system=lambda tk: f"sys {tk}", conversation_id="cid")
    base = steps.request(s, "m", [], "sys T", {"temperature": 0})
    assert flow._body(c, Bodies(), s, [], "T", {"temperature": 0}, frozenset()) == base
    got = flow._body({**c, "prompt_cache": True}, Bodies(), s, [], "T", {}, frozenset())
    assert got["cached"] == "cid"
    got = flow._body(c, Bodies(), s, [], "T", {"temperature": 0}, frozenset({"temperature"}))
    assert "temperature" not in got and got["model"] == "m"


# ---- a refused part of the request ---------------------------------------------------------


class Refusing(Bodies):
    """A codec whose server refuses the body key an error's body names."""

    def refused_part(self, e):
        return e.body or None

    def omit(self, body, omitted):
        if not omitted & set(body):
            return body
        return {k: v for k, v in body.items() if k not in omitted}


def refused(part=""):
    return ProviderError("refused", status=400, body=part)


ASKED = ([], TK, FrozenMap({"temperature": 0}))


def test_a_refused_part_is_left_out_once_more_then_remembered_and_measured():
    c = cfg(retries=0, remember_omission="R")
    script = Script(clock=clocks(0, 1, 2, 3), llm=[refused("temperature"), answer("ok")])
    got, later = script.run(flow._answer(c, Refusing(), state(), ASKED, 1, {}))
    assert got["text"] == "ok" and later["omitted"] == {"temperature"}
    first, second = (e[1]["body"] for e in script.of("llm"))
    assert first["temperature"] == 0 and "temperature" not in second
    assert script.effects[-2:] == [
        ("hook", "R", "temperature"),
        ("metric", {"event": "omitted", "model": "m", "part": "temperature"}),
    ]
    script = Script(clock=clocks(0, 1, 2, 3), llm=[refused("temperature"), answer("ok")])
    script.run(flow._answer(cfg(retries=0), Refusing(), state(), ASKED, 1, {}))
    assert script.of("hook") == []


def test_an_answer_without_refusal_keeps_the_cfg_and_what_it_omits():
    c = cfg(omitted=frozenset({"temperature"}))
    script = Script(clock=clocks(0, 1), llm=[answer()])
    got, same = script.run(flow._answer(c, Refusing(), state(), ASKED, 1, {}))
    assert same is c and "temperature" not in script.of("llm")[0][1]["body"]


@pytest.mark.parametrize(
    "error, omitted",
    [
        (refused(""), frozenset()),  # no part named
        (refused("temperature"), frozenset({"temperature"})),  # left out already
        (refused("top_p"), frozenset()),  # the body has no such part: the same request
    ],
)
def test_a_refusal_that_would_send_the_same_request_is_raised(error, omitted):
    c = cfg(retries=0, omitted=omitted)
    script = Script(clock=clocks(0, 1), llm=[error])
    with pytest.raises(ProviderError) as e:
        script.run(flow._answer(c, Refusing(), state(), ASKED, 1, {}))
    assert e.value is error and len(script.of("llm")) == 1


# ---- the loop ---------------------------------------------------------------------------


def echo_all(effect):
    return [(tool_result(f"ran {c['id']}"), 0.25) for c in effect[2]]


def loop(c, turns, tk=TK, s=None, **kinds):
    script = Script(llm=list(turns), tools=echo_all, **kinds)
    return script, script.run(flow.run_flow(cfg(**c), s or state(), tk))


def test_an_answer_ends_the_run_done_named_by_its_client():
    script, s = loop({"served_by": "C"}, [answer("hi", model=None)])
    assert s["status"] == "done" and s["text"] == "hi" and s["turns"] == 1
    assert s["served_by"] == "C" and s["model"] == "m"
    assert [e[0] for e in script.effects] == ["clock", "llm", "clock", "metric"]
    body = script.of("llm")[0][1]["body"]
    assert body["tools"] == CODEC.encode_tools(TK) and body["model"] == "m"


def test_calls_run_then_their_results_go_back_in_call_order():
    turns = [answer("", calls=[("c1", "echo"), ("c2", "echo")]), answer("done")]
    script, s = loop({}, turns)
    assert s["status"] == "done" and s["turns"] == 2
    assert [r["output"] for r in s["tool_calls"]] == ["ran c1", "ran c2"]
    assert [m["role"] for m in s["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in script.of("tools")[0][2]] == ["c1", "c2"]


def test_a_stream_sees_usage_each_call_and_each_result():
    turns = [answer("", calls=[("c1", "echo")]), answer("done")]
    script, _ = loop({"events": True}, turns)
    assert [e[1] for e in script.of("event")] == [
        {"type": "usage", "usage": U},
        {"type": "tool_call", "id": "c1", "name": "echo", "args": {}},
        {"type": "tool_result", "id": "c1", "name": "echo", "output": "ran c1",
         "is_error": False},
        {"type": "usage", "usage": U},
    ]  # fmt: skip
    _, s = loop({}, turns)
    assert s["status"] == "done"


def test_a_call_with_bad_arguments_is_not_run_and_answered_in_its_place():
    bad = turn({"role": "assistant", "content": None}, "",
               [{"id": "c1", "name": "echo", "arguments": "{x"},
                {"id": "c2", "name": "echo", "arguments": "{}"}], U, "stop", "m")  # fmt: skip
    script, s = loop({}, [bad, answer("done")])
    assert [c["id"] for c in script.of("tools")[0][2]] == ["c2"]
    first, second = s["tool_calls"]
    assert first["is_error"] and first["output"].startswith("Invalid arguments for tool 'echo'")
    assert second["output"] == "ran c2"


def test_a_pending_request_ends_the_run_pending():
    script = Script(llm=[answer("", calls=[("c1", "echo")])], tools=[ran(ASK)])
    s = script.run(flow.run_flow(cfg(), state(), TK))
    assert s["status"] == "pending" and s["pending"] == {"id": "q1"}
    assert len(s["tool_calls"]) == 1


def test_the_last_turn_allowed_ends_the_run_incomplete_after_its_results():
    turns = [answer("", calls=[("c1", "echo")])] * 2
    script, s = loop({"max_turns": 2}, turns)
    assert s["status"] == "incomplete" and s["limit"] == "max_turns" and s["turns"] == 2
    assert len(script.of("llm")) == 2


def test_a_paused_turn_is_sent_again_and_its_text_joined():
    script, s = loop({}, [answer("part ", end="pause"), answer("two")])
    assert s["status"] == "done" and s["text"] == "part two" and len(script.of("llm")) == 2


def test_max_tool_calls_caps_a_turn_s_calls():
    turns = [answer("", calls=[("c1", "echo"), ("c2", "echo")]), answer("done")]
    script, s = loop({"max_tool_calls": 1}, turns)
    assert [c["id"] for c in script.of("tools")[0][2]] == ["c1"]
    assert (
        s["tool_calls"][1]["output"]
        == "Tool call 'echo' not run: a model turn may call at most 1 tool(s)"
    )


def test_after_llm_sees_each_turn():
    script, _ = loop({"hooks": {"after_llm": "A"}, "served_by": "C"}, [answer("hi")])
    (hook,) = script.of("hook")
    assert hook[1] == "A" and hook[2]["model"] == "m" and hook[2]["turn"] == 1
    assert hook[2]["client"] == "C" and hook[2]["response"]["text"] == "hi"


def test_the_first_turn_s_params_and_the_later_ones():
    params = FrozenMap({"tool_choice": "required"})
    turns = [answer("", calls=[("c1", "echo")]), answer("done")]
    script, _ = loop({"params": params}, turns)
    first, later = (e[1]["body"] for e in script.of("llm"))
    assert first["tool_choice"] == "required" and later["tool_choice"] == "auto"


def test_structured_output_is_asked_of_the_first_turn():
    from toolnexus.core.output import output_spec

    spec = output_spec({"type": "object"})
    assert flow._params({"params": FrozenMap(), "output": None}, CODEC) == ({}, {})
    first, later = flow._params({"params": FrozenMap(), "output": spec}, CODEC)
    assert first == CODEC.with_output(FrozenMap(), spec)
    assert later == CODEC.later_params(first) and first != {}


def test_tools_are_encoded_once_per_run_and_again_when_a_hook_swaps_them():
    other = toolkit(tool("two", "Two.", None, lambda a: "2"))
    swaps = [None, {"tools": other}]
    turns = [answer("", calls=[("c1", "echo")]), answer("done")]
    script, _ = loop({"hooks": {"before_llm": lambda p: None}}, turns, hook=swaps)
    first, later = (e[1]["body"]["tools"] for e in script.of("llm"))
    assert first == CODEC.encode_tools(TK) and later == CODEC.encode_tools(other)


def test_an_encoding_run_reuses_the_toolkit_s_tools_text():
    script, _ = loop({"encode": True}, [answer("hi")])
    content = script.of("llm")[0][1]["content"]
    assert TK["wire_json"][DEFAULT_STYLE].encode() in content
    cached, _ = loop({"encode": True, "prompt_cache": True}, [answer("hi")])
    body = cached.of("llm")[0][1]["body"]
    assert body["tools"] == CODEC.cache_tools(CODEC.encode_tools(TK))
    assert message_json(body) == cached.of("llm")[0][1]["content"]


def test_a_failure_is_raised_when_no_client_takes_over():
    err = ProviderError("down", status=503)
    with pytest.raises(ProviderError):
        loop({"retries": 0}, [err])


def test_a_failure_moves_to_the_next_client_which_asks_the_same_turn():
    from dialect_kit import others

    there = others(DEFAULT_STYLE)[0]
    leg = {"dialect": there, "model": "m2", "served_by": "B", "params": FrozenMap({"n": 1}),
           "system": lambda tk: "", "on_unsupported_part": "error", "encode": False}  # fmt: skip
    c = {"retries": 0, "legs": (leg,), "fails_over": "P", "served_by": "A"}
    err = ProviderError("down", status=503)
    script, s = loop(c, [err, answer("hi")], hook=[True])
    assert s["served_by"] == "B" and s["status"] == "done"
    assert s["dialect"] == there and s["turns"] == 1
    assert script.of("hook")[0] == ("hook", "P", err)
    second = script.of("llm")[1][1]
    assert second["turn"] == 1 and second["client"] == "B"
    want = DIALECTS[there].encode_tools(TK)
    assert second["body"] == DIALECTS[there].body("m2", s["messages"][:-1], want, "", {"n": 1})
    with pytest.raises(ProviderError):
        loop(c, [err], hook=[False])


# ---- the exchange ----------------------------------------------------------------------


def test_rebase_keeps_the_run_s_messages_unless_the_store_moved_on():
    u = [{"role": "user", "content": t} for t in "0123"]
    base = [u[0]]
    assert flow.rebase(base, base, ["M"], ["F"]) == ["M"]
    assert flow.rebase(base, [dict(u[0])], ["M"], ["F"]) == ["M"]  # equal, not the same
    moved = flow.rebase(base, [u[0], u[1]], [u[0], u[2]], [u[2]])
    assert thaw(moved) == [u[0], u[1], u[2]]


def test_a_lock_that_fails_to_release_is_a_warning_and_a_metric_never_raised():
    script = Script(release=[(("ok", None),)])
    script.run(flow._release("H"))
    assert script.effects == [("release", "H")]
    script = Script(release=[(("error", OSError("gone")),)])
    script.run(flow._release("H"))
    assert script.effects[1:] == [
        ("warn", "releasing the conversation lock failed: OSError: gone"),
        ("metric", {"event": "lock_error", "error": "OSError"}),
    ]


def test_with_system_leads_with_the_lifted_text():
    c = {"system": lambda tk: f"own {tk}"}
    assert flow._with_system(c, "") is c
    got = flow._with_system(c, "lifted")
    assert got["lifted"] == "lifted" and got["system"]("T") == "lifted\n\nown T"
    assert flow._with_system({"system": lambda tk: ""}, "lifted")["system"]("T") == "lifted"


def test_the_output_is_read_from_a_done_answer_only():
    from toolnexus.core.output import OutputError, output_spec

    spec = output_spec({"type": "object", "properties": {"n": {"type": "integer"}}})
    done = {"status": "done", "text": '{"n": 3}'}
    assert flow._with_output({}, done) is done
    assert flow._with_output({"output": spec}, done)["output"] == {"n": 3}
    pending = {"status": "pending", "text": "x"}
    assert flow._with_output({"output": spec}, pending) is pending
    said_no = {"status": "done", "text": "no", "refusal": "no"}
    assert flow._with_output({"output": spec}, said_no) is said_no
    with pytest.raises(OutputError):
        flow._with_output({"output": spec}, {"status": "done", "text": '{"n": "x"}'})


def test_quiet_returns_the_call_s_value_or_nothing_when_it_fails():
    assert flow._quiet(lambda a, b: a + b, 1, 2) == 3
    assert flow._quiet(lambda: 1 / 0) is None


def test_the_run_metric_names_the_model_duration_error_and_the_state_s_end():
    assert flow._run_metric({"model": "m"}, None, 2.0) == {
        "event": "run", "model": "m", "duration_s": 2.0, "error": False}  # fmt: skip
    s = {"status": "done", "turns": 3}
    assert flow._run_metric({"model": "m"}, s, 1.0, OSError()) == {
        "event": "run", "model": "m", "duration_s": 1.0, "error": True, "status": "done",
        "turns": 3}  # fmt: skip


def test_the_log_op_records_the_prompt_and_what_was_said_always():
    assert flow._log_op({"log": None}, "c", "q", None, "T") is None
    op = flow._log_op({"log": "L"}, "c", "q", {"said": pvector(["a", "b"])}, "T")
    assert op == flow.Op("L", ("c", "q", ("a", "b"), "T"), always=True, kind="log")
    assert flow._log_op({"log": "L"}, None, "q", None, "T").args == (None, "q", (), "T")


def xcfg(**over):
    base = {"dialect": DEFAULT_STYLE, "hold_lock": True, "on_unsupported_part": "error",
            "max_part_bytes": None, "log": None}  # fmt: skip
    return cfg(**{**base, **over})


OK = ("ok", None)


def exchange(c, cid, history=None, prompt="q", **kinds):
    kinds.setdefault("llm", [answer("hi")])
    script = Script(now=["T"], **kinds)
    return script, script.run(flow.exchange_flow(xcfg(**c), prompt, TK, history, cid))


def test_an_exchange_without_a_conversation_takes_no_lock_and_saves_nothing():
    script, result = exchange({}, None, clock=clocks(1.0, 0, 0, 4.0))
    assert result["text"] == "hi" and result["status"] == "done" and result["model"] == "m1"
    # No message log: the time the prompt was asked (the log's stamp) is not asked for.
    assert [e[0] for e in script.effects] == ["clock", "clock", "llm", "clock", "metric",
                                             "clock", "metric"]  # fmt: skip
    assert script.effects[-1] == (
        "metric",
        {
            "event": "run",
            "model": "m",
            "duration_s": 3.0,
            "error": False,
            "status": "done",
            "turns": 1,
        },
    )
    script, _ = exchange({"log": "L"}, None, io=[(OK,)])
    assert [e[0] for e in script.effects][:2] == ["clock", "now"]  # a log stamps the prompt
    assert script.of("io") == [("io", (flow.Op("L", (None, "q", ("hi",), "T"), True, "log"),))]


def test_a_held_exchange_takes_loads_commits_releases_and_remembers():
    script, result = exchange({"log": "L"}, "c", take=[("H", None)], commit=[(OK, OK, OK)])
    (take,) = script.of("take")
    assert take == ("take", "c", True) and script.of("release") == []
    (commit,) = script.of("commit")
    _, cid, messages, held, log, loaded = commit
    assert (cid, held, loaded) == ("c", "H", True)
    assert messages is result["messages"] and log.args == ("c", "q", ("hi",), "T")
    (remember,) = script.of("remember")
    assert remember[1] == "c" and remember[2]["messages"] is messages
    assert remember[2]["dialect"] == DEFAULT_STYLE
    assert set(remember[2]) == {"messages", "history", "texts", "facts", "dialect"}
    assert script.of("warn") == [] and script.of("recall") == []


def test_a_loaded_transcript_is_recalled_and_the_run_goes_on_from_it():
    old = freeze([{"role": "user", "content": "before"}, {"role": "assistant", "content": "ok"}])
    script, result = exchange({}, "c", take=[("H", old)], commit=[(OK, OK)])
    assert script.of("recall") == [("recall", "c")]
    assert [m["content"] for m in result["messages"]] == ["before", "ok", "q", "hi"]


def test_an_unheld_exchange_releases_after_loading_and_takes_the_lock_again_to_save():
    old = freeze([{"role": "user", "content": "before"}])
    moved = freeze([*old, {"role": "user", "content": "other"}])
    script, result = exchange({"hold_lock": False}, "c", take=[("H1", old), ("H2", moved)],
                              release=[(OK,)], commit=[(OK, OK)])  # fmt: skip
    assert script.of("release") == [("release", "H1")]
    assert script.of("take")[1] == ("take", "c", True)
    _, _, messages, held, _, _ = script.of("commit")[0]
    assert held == "H2" and [m["content"] for m in messages] == ["before", "other", "q", "hi"]
    assert script.of("remember") == []  # a rebased save is not what the run holds


def test_given_history_is_not_loaded_nor_rebased():
    given = freeze([{"role": "user", "content": "given"}])
    script, result = exchange({"hold_lock": False}, "c", history=given,
                              take=[("H1", "IGNORED"), ("H2", "IGNORED")],
                              release=[(OK,)], commit=[(OK, OK)])  # fmt: skip
    assert script.of("take") == [("take", "c", False), ("take", "c", False)]
    _, _, messages, _, _, loaded = script.of("commit")[0]
    assert loaded is False and messages is result["messages"]
    assert [m["content"] for m in messages] == ["given", "q", "hi"]


def test_a_failed_save_is_measured_and_raised():
    boom = OSError("disk")
    script = Script(now=["T"], llm=[answer()], take=[("H", None)], commit=[(("error", boom), OK)])
    with pytest.raises(OSError) as e:
        script.run(flow.exchange_flow(xcfg(), "q", TK, None, "c"))
    assert e.value is boom and script.of("remember") == []
    assert script.effects[-1][1]["error"] is True and "status" not in script.effects[-1][1]


def test_a_failed_release_after_the_save_is_a_warning():
    gone = ("error", OSError("gone"))
    script, _ = exchange({}, "c", take=[("H", None)], commit=[(OK, gone)])
    assert script.of("warn") == [("warn", "releasing the conversation lock failed: OSError: gone")]


def test_a_strict_log_s_failure_is_raised_once_the_run_is_measured():
    bad = OSError("log down")
    script = Script(
        now=["T"], llm=[answer()], take=[("H", None)], commit=[(OK, OK, ("error", bad))]
    )
    with pytest.raises(OSError) as e:
        script.run(flow.exchange_flow(xcfg(log="L"), "q", TK, None, "c"))
    assert e.value is bad and script.effects[-1][1]["error"] is False
    script = Script(now=["T"], llm=[answer()], io=[(("error", bad),)])
    with pytest.raises(OSError):
        script.run(flow.exchange_flow(xcfg(log="L"), "q", TK, None, None))


def test_a_failed_run_releases_logs_quietly_and_is_measured():
    err = ProviderError("down", status=400)
    script = Script(now=["T"], llm=[err], take=[("H", None)], release=[(OK, OK)])
    with pytest.raises(ProviderError):
        script.run(flow.exchange_flow(xcfg(log="L", retries=0), "q", TK, None, "c"))
    ((_, held, said),) = script.of("release")
    assert held == "H" and said == flow.Op(flow._quiet, ("L", "c", "q", (), "T"), True, "log")
    assert script.effects[-1] == ("metric", {"event": "run", "model": "m", "duration_s": 0.0,
                                             "error": True})  # fmt: skip
    assert script.of("commit") == []
    script = Script(now=["T"], llm=[err], take=[("H", None)], release=[(("error", OSError()),)])
    with pytest.raises(ProviderError):
        script.run(flow.exchange_flow(xcfg(retries=0), "q", TK, None, "c"))
    assert script.of("release") == [("release", "H")] and len(script.of("warn")) == 1


def test_a_failed_run_without_a_lock_logs_in_an_io_effect():
    err = ProviderError("down", status=400)
    script = Script(now=["T"], llm=[err])
    with pytest.raises(ProviderError):
        script.run(flow.exchange_flow(xcfg(log="L", retries=0), "q", TK, None, None))
    assert script.of("io") == [
        ("io", (flow.Op(flow._quiet, ("L", None, "q", (), "T"), True, "log"),))
    ]
    script = Script(now=["T"], llm=[err])
    with pytest.raises(ProviderError):
        script.run(flow.exchange_flow(xcfg(retries=0), "q", TK, None, None))
    assert script.of("io") == [] and script.of("release") == []


def test_an_exchange_without_a_conversation_asks_for_no_intent_however_it_ends():
    """api runs such a flow without the exchange's intent layer (exchange.performed)."""
    err = ProviderError("down", status=400)
    scripts = [exchange({"log": "L"}, None, io=[(OK,)])[0], exchange({}, None)[0]]
    for c in ({"log": "L", "retries": 0}, {"retries": 0}):
        script = Script(now=["T"], llm=[err])
        with pytest.raises(ProviderError):
            script.run(flow.exchange_flow(xcfg(**c), "q", TK, None, None))
        scripts.append(script)
    for script in scripts:
        assert not {"take", "commit", "release"} & {e[0] for e in script.effects}


def test_a_failed_optimistic_take_saves_nothing_and_logs_nothing():
    gone = OSError("lock server gone")
    script = Script(now=["T"], llm=[answer()], take=[("H1", None), gone], release=[(OK,)])
    with pytest.raises(OSError):
        script.run(flow.exchange_flow(xcfg(hold_lock=False, log="L"), "q", TK, None, "c"))
    assert script.of("commit") == [] and script.of("io") == []
    assert script.of("release") == [("release", "H1")]
    assert script.effects[-1][1]["error"] is True


def test_a_prompt_no_store_could_read_is_refused_before_the_model_is_asked():
    from toolnexus.core.transcript import TranscriptFormatError

    script = Script(now=["T"], take=[("H", None)], release=[(OK,)])
    with pytest.raises(TranscriptFormatError, match="the prompt holds a lone surrogate"):
        script.run(flow.exchange_flow(xcfg(), "\ud83d", TK, None, "c"))
    assert script.of("llm") == []
    _, result = exchange({}, None, prompt="\ud83d")  # no store: nothing to refuse
    assert result["status"] == "done"


def test_a_refused_run_saves_the_transcript_it_started_from_unless_kept():
    refusal = answer("", refusal="no")
    script, result = exchange({}, "c", llm=[refusal], take=[("H", None)], commit=[(OK, OK)])
    assert script.of("commit")[0][2] == [] and result["refusal"] == "no"
    script, _ = exchange({"keep_refused": True}, "c", llm=[answer("", refusal="no")],
                         take=[("H", None)], commit=[(OK, OK)])  # fmt: skip
    assert len(script.of("commit")[0][2]) == 2


def test_a_run_that_fails_after_the_model_spoke_logs_what_it_said():
    """Fails on the old code: the log of a run that raised held the prompt alone, the
    texts of its earlier turns lost with the loop's state."""
    err = ProviderError("down", status=400)
    turns = [answer("Let me check", calls=[("c1", "echo")]), err]
    script = Script(now=["T"], llm=turns, tools=echo_all)
    with pytest.raises(ProviderError):
        script.run(flow.exchange_flow(xcfg(log="L", retries=0), "q", TK, None, None))
    ((_, (op,)),) = script.of("io")
    assert op.args == ("L", None, "q", ("Let me check",), "T")


def test_an_answer_that_does_not_fit_the_output_schema_is_logged():
    """Fails on the old code: the run's answer was read after the loop, and when it did
    not fit, the log got the prompt alone."""
    from toolnexus.core.output import OutputError, output_spec

    spec = output_spec({"type": "object"})
    script = Script(now=["T"], llm=[answer("not json")])
    with pytest.raises(OutputError):
        script.run(flow.exchange_flow(xcfg(log="L", output=spec), "q", TK, None, None))
    ((_, (op,)),) = script.of("io")
    assert op.args == ("L", None, "q", ("not json",), "T")


# ---- the survivors' rules ----------------------------------------------------------------


def test_on_error_s_retry_of_what_would_not_be_retried_waits_its_backoff():
    script = Script(llm=[ProviderError("bad", status=400), answer()], hook=["retry"])
    script.run(flow._llm_turn(cfg(on_error="H"), Codec(), state(), {}, 1, {}))
    assert script.of("sleep") == [("sleep", 0.075)]


class Stating(Codec):
    """A codec naming the previous response only for the state's own messages."""

    def server_state_body(self, full, messages):
        return {"prev": len(messages)}


def test_every_body_of_a_stated_turn_is_streamed_encoded_and_numbered():
    s, tools = state(), pvector([1])
    known = {"tools": (tools, "[K]")}
    gone = ProviderError("no previous response", status=404)
    c = cfg(server_state=True, retries=0, events=True, encode=True)
    script = Script(llm=[gone, answer()])
    script.run(flow._stated_turn(c, Stating(), s, {"tools": tools}, 7, known))
    first, second = (e[1] for e in script.of("llm"))
    assert first["body"] == {"prev": 1, "stream": True} and first["turn"] == 7
    assert second["body"] == {"tools": tools, "store": True, "stream": True}
    assert second["content"] == b'{"tools":[K],"store":true,"stream":true}'
    assert second["turn"] == 7 and second["messages"] is s["messages"]
    script = Script(llm=[answer()])
    script.run(flow._stated_turn({**c, "server_state": False}, Stating(), s, {"tools": tools}, 7,
                                 known))  # fmt: skip
    (request,) = (e[1] for e in script.of("llm"))
    assert request["content"] == b'{"tools":[K],"stream":true}' and request["turn"] == 7


def test_a_refused_part_s_second_request_is_streamed_encoded_and_numbered():
    c = cfg(retries=0, events=True, encode=True)
    script = Script(llm=[refused("temperature"), answer("ok")])
    script.run(flow._answer(c, Refusing(), state(), ASKED, 4, {}))
    first, second = (e[1] for e in script.of("llm"))
    assert first["turn"] == second["turn"] == 4
    assert second["body"]["stream"] is True and b'"stream":true' in second["content"]
    assert b"temperature" in first["content"] and b"temperature" not in second["content"]


def test_the_toolkit_s_own_text_is_reused_not_encoded_again():
    tools = CODEC.encode_tools(TK)
    assert flow._tools_text(TK, tools, CODEC) is TK["wire_json"][DEFAULT_STYLE]


def test_a_call_s_hooks_and_its_resumption_see_the_turn_and_the_toolkit():
    c = cfg(hooks={"before_tool": "B"}, wait_for="W")
    script = Script(hook=[None], tools=[ran(ASK), ran(tool_result("done"))],
                    io=[(("ok", {"ok": True}),)])  # fmt: skip
    script.run(flow._run_calls(c, TK, [call()], 6))
    assert script.of("hook")[0][2]["turn"] == 6
    assert [e[1] for e in script.of("tools")] == [TK, TK]


def test_a_paused_turn_at_the_last_turn_allowed_ends_the_run_incomplete():
    script, s = loop({"max_turns": 1}, [answer("part", end="pause")])
    assert s["status"] == "incomplete" and s["limit"] == "max_turns"
    assert len(script.of("llm")) == 1


def test_the_loop_s_tool_hooks_see_its_turn_and_toolkit():
    turns = [answer("", calls=[("c1", "echo")]), answer("", calls=[("c2", "echo")]), answer()]
    script, _ = loop({"hooks": {"before_tool": "B"}}, turns, hook=[None, None])
    assert [e[2]["turn"] for e in script.of("hook")] == [1, 2]
    assert all(e[1] is TK for e in script.of("tools"))


def test_a_dialect_that_marks_its_tools_for_the_cache_sends_them_marked():
    from dialect_kit import STYLES

    def marks(d):
        tools = DIALECTS[d].encode_tools(TK)
        return DIALECTS[d].cache_tools(tools) != tools

    marking = [d for d in STYLES if marks(d)]
    assert marking, "some dialect marks its tools for the prompt cache"
    d = marking[0]
    script, _ = loop({"prompt_cache": True}, [answer()], s=steps.start(d, [], "q"))
    body = script.of("llm")[0][1]["body"]
    assert body["tools"] == DIALECTS[d].cache_tools(DIALECTS[d].encode_tools(TK))
    script, _ = loop({}, [answer()], s=steps.start(d, [], "q"))
    assert script.of("llm")[0][1]["body"]["tools"] == DIALECTS[d].encode_tools(TK)


def failover_cfg():
    from dialect_kit import others

    leg = {"dialect": others(DEFAULT_STYLE)[0], "model": "m2", "served_by": "B",
           "system": lambda tk: "", "on_unsupported_part": "error", "encode": False}  # fmt: skip
    return {"retries": 0, "legs": (leg,), "fails_over": "P", "served_by": "A"}


def test_a_failover_is_measured_with_its_turn_and_error():
    err = ProviderError("down", status=503)
    script, _ = loop(failover_cfg(), [err, answer("hi")], hook=[True])
    (event,) = [e[1] for e in script.of("metric") if e[1]["event"] == "failover"]
    assert event["turn"] == 1 and event["error"] == "ProviderError" and event["status"] == "503"


# ---- starting from what was loaded ---------------------------------------------------------

HISTORY = freeze([{"role": "user", "content": "before"}, {"role": "assistant", "content": "ok"}])


def scfg(**over):
    return xcfg(**{"encode": True, **over})


def test_a_transcript_this_runtime_saved_is_used_as_it_was_made_ready():
    history = pvector(list(HISTORY))  # the ready copy: other objects, equal values
    texts = steps.texts_of(history)
    memo = {"messages": HISTORY, "history": history, "texts": texts,
            "facts": (DEFAULT_STYLE, pset()), "dialect": DEFAULT_STYLE}  # fmt: skip
    ready = flow._ready(scfg(), memo, HISTORY)
    assert ready.history is history and ready.texts is texts and ready.lifted == ""
    assert ready.facts is None  # its facts are of what was saved, not of the copy
    same = {**memo, "history": HISTORY}
    assert flow._ready(scfg(), same, HISTORY).facts == (DEFAULT_STYLE, pset())


def test_a_memo_of_another_dialect_or_of_other_messages_is_not_used():
    from dialect_kit import others

    history = pvector(list(HISTORY))
    memo = {"messages": HISTORY, "history": history, "texts": steps.texts_of(history),
            "facts": None, "dialect": others(DEFAULT_STYLE)[0]}  # fmt: skip
    assert flow._ready(scfg(), memo, HISTORY).history is not history
    other = {**memo, "dialect": DEFAULT_STYLE, "messages": freeze([])}
    assert flow._ready(scfg(), other, HISTORY).history is not history
    assert flow._ready(scfg(), {**memo, "dialect": DEFAULT_STYLE}, HISTORY).history is history
    no_dialect = {k: v for k, v in memo.items() if k != "dialect"}
    assert flow._ready(scfg(), no_dialect, HISTORY).history is history


def test_a_transcript_going_on_from_the_saved_one_has_its_new_messages_made_ready():
    texts = steps.texts_of(HISTORY)
    memo = {"messages": HISTORY, "history": HISTORY, "texts": texts,
            "facts": (DEFAULT_STYLE, pset()), "dialect": DEFAULT_STYLE}  # fmt: skip
    loaded = HISTORY.append(freeze({"role": "user", "content": "more"}))
    ready = flow._ready(scfg(), memo, loaded)
    assert ready == loading.extended(memo, loaded, DEFAULT_STYLE, True)
    assert ready.history[0] is HISTORY[0] and len(ready.texts) == 3
    assert flow._ready(scfg(encode=False), memo, loaded).texts is None


def test_anything_else_is_made_ready_whole_as_the_policy_says():
    doc = {"type": "document", "source": {"type": "url", "url": "https://x/d.pdf"}}
    loaded = freeze([{"role": "user", "content": [{"type": "text", "text": "read"}, doc]}])
    from toolnexus.core.wire.parts import UnsupportedPartError

    with pytest.raises(UnsupportedPartError):
        flow._ready(scfg(), None, loaded)
    ready = flow._ready(scfg(on_unsupported_part="text"), None, loaded)
    assert ready == loading.whole(loaded, DEFAULT_STYLE, "text", True)
    assert flow._ready(scfg(encode=False, on_unsupported_part="text"), None, loaded).texts is None


def test_the_first_state_is_the_ready_history_its_texts_facts_and_the_prompt():
    script = Script(recall=[None])
    s, lifted = script.run(flow._start(scfg(), "c", "q", HISTORY))
    assert script.effects == [("recall", "c")] and lifted == ""
    ready = loading.whole(HISTORY, DEFAULT_STYLE, "error", True)
    assert s["messages"][:2] == ready.history and s["texts"][:2] == ready.texts
    assert s["facts"] == ready.facts and s["messages"][2]["content"] == "q"
    script = Script()
    s, _ = script.run(flow._start(scfg(), None, "q", HISTORY))
    assert script.effects == []  # no conversation: nothing to recall
    s, _ = Script().run(flow._start(scfg(), "c", "q", None))
    assert [m["content"] for m in s["messages"]] == ["q"]


def test_the_prompt_s_parts_follow_the_exchange_s_policy_and_bound():
    audio = [{"type": "text", "text": "hear"},
             {"type": "audio", "mimeType": "audio/mp4", "data": "aGk="}]  # fmt: skip
    from toolnexus.core.wire.parts import UnsupportedPartError

    with pytest.raises(UnsupportedPartError):
        Script().run(flow._start(scfg(), None, audio, None))
    s, _ = Script().run(flow._start(scfg(on_unsupported_part="text"), None, audio, None))
    assert "omitted" in s["messages"][-1]["content"][1]["text"]
    big = [{"type": "image", "mimeType": "image/png", "data": "aGk=" * 10}]
    with pytest.raises(ValueError, match="bytes"):
        Script().run(flow._start(scfg(max_part_bytes=4), None, big, None))


def test_a_bad_prompt_is_found_by_its_own_text_after_a_history():
    from toolnexus.core.transcript import TranscriptFormatError

    with pytest.raises(TranscriptFormatError, match="the prompt"):
        Script(recall=[None]).run(flow._start(scfg(), "c", "\ud83d", HISTORY))
    with pytest.raises(TranscriptFormatError, match="the prompt"):
        Script(recall=[None]).run(flow._start(scfg(encode=False), "c", "\ud83d", HISTORY))


def test_the_memo_holds_the_saved_messages_their_replayable_history_texts_and_facts():
    s = steps.start(DEFAULT_STYLE, [], "q", texts=[])
    s, _ = steps.on_turn(s, answer("", calls=[("c1", "echo")]))
    memo = flow._memo({**s, "facts": (DEFAULT_STYLE, pset())}, "SAVED")
    assert memo["messages"] == "SAVED" and memo["dialect"] == DEFAULT_STYLE
    assert memo["history"] is s["messages"] and memo["texts"] is s["texts"]
    assert memo["facts"] == (DEFAULT_STYLE, {"c1"})
    assert flow._memo({**s, "facts": None}, "SAVED")["facts"] is None


# ---- the exchange's survivors -------------------------------------------------------------


def test_an_unheld_exchange_whose_store_did_not_move_saves_and_remembers_its_own():
    old = freeze([{"role": "user", "content": "before"}])
    script, result = exchange({"hold_lock": False}, "c", take=[("H1", old), ("H2", old)],
                              release=[(OK,)], commit=[(OK, OK)])  # fmt: skip
    _, _, messages, _, _, _ = script.of("commit")[0]
    assert messages is result["messages"]
    assert script.of("remember")[0][2]["messages"] is messages


def test_the_conversation_id_reaches_the_prompt_cache():
    def body(cid):
        script, _ = exchange({"prompt_cache": True}, cid, take=[("H", None)], commit=[(OK, OK)])
        return script.of("llm")[0][1]["body"]

    assert body("c") != body("d")
    assert body("c")["tools"] == CODEC.cache_tools(CODEC.encode_tools(TK))


def test_a_failed_save_s_run_metric_is_timed():
    boom = OSError("disk")
    script = Script(now=["T"], clock=clocks(1.0, 0, 0, 4.0), llm=[answer()],
                    take=[("H", None)], commit=[(("error", boom), OK)])  # fmt: skip
    with pytest.raises(OSError):
        script.run(flow.exchange_flow(xcfg(), "q", TK, None, "c"))
    assert script.effects[-1] == ("metric", {"event": "run", "model": "m", "duration_s": 3.0,
                                             "error": True})  # fmt: skip


def test_a_failed_run_s_metric_is_timed():
    script = Script(now=["T"], clock=clocks(1.0, 0, 0, 4.0), llm=[ProviderError("x", status=400)])
    with pytest.raises(ProviderError):
        script.run(flow.exchange_flow(xcfg(retries=0), "q", TK, None, None))
    assert script.effects[-1][1]["duration_s"] == 3.0


def test_a_failed_over_exchange_is_saved_but_not_remembered():
    err = ProviderError("down", status=503)
    script, result = exchange(failover_cfg(), "c", llm=[err, answer("hi")], hook=[True],
                              take=[("H", None)], commit=[(OK, OK)])  # fmt: skip
    assert result["served_by"] == "B" and len(script.of("commit")) == 1
    assert script.of("remember") == []


def test_the_first_state_of_a_recalled_transcript_is_the_memo_s_history():
    made = freeze([{"role": "user", "content": "made ready"}])
    memo = {"messages": HISTORY, "history": made, "texts": steps.texts_of(made),
            "facts": None, "dialect": DEFAULT_STYLE}  # fmt: skip
    s, _ = Script(recall=[memo]).run(flow._start(scfg(), "c", "q", HISTORY))
    assert [m["content"] for m in s["messages"]] == ["made ready", "q"]
    assert s["texts"][0] is memo["texts"][0]
