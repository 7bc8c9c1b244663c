"""The pure loop: step functions and the effect flow, driven with plain values (no I/O)."""

import copy
import json

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector

from toolnexus import execute, tool, tool_result, toolkit
from toolnexus.core import flow
from toolnexus.core import steps as loop
from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.testing.fake_replies import RESPONSES as RESPONSE  # one row per dialect

dialects = st.sampled_from(sorted(DIALECTS))  # every row of the registry
names = st.sampled_from(["echo", "add", "missing"])
call_lists = st.lists(
    st.tuples(names, st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2)),
    max_size=4,
)
replies = st.one_of(
    st.text(min_size=1, max_size=20).map(lambda t: {"content": t}),
    call_lists.filter(bool).map(
        lambda cs: {"tool_calls": [{"name": n, "arguments": a} for n, a in cs]}
    ),
)


def decoded(dialect, reply, seq):
    return DIALECTS[dialect].parse_response(RESPONSE[dialect](reply, seq=seq))


@given(dialects, st.lists(replies, min_size=1, max_size=5), st.integers(1, 6))
def test_steps_never_mutate_and_account_for_every_turn(dialect, script, max_turns):
    state = loop.start(dialect, [], "hi")
    for seq, reply in enumerate(script):
        before = copy.deepcopy(dict(state))
        turn = decoded(dialect, reply, seq)
        nxt, calls = loop.on_turn(state, turn)
        assert dict(state) == before  # the input state is untouched
        assert len(nxt["messages"]) == len(state["messages"]) + 1
        assert nxt["turns"] == state["turns"] + 1
        assert nxt["usage"]["total_tokens"] == state["usage"]["total_tokens"] + 15
        assert (nxt["status"] == "done") == (not calls)
        state = nxt
        if not calls:
            break
        results = [tool_result(f"r{i}") for i in range(len(calls))]
        nxt = loop.on_results(state, calls, results, max_turns)
        first = nxt["messages"][len(state["messages"])]
        # One message of all the turn's results where the dialect gathers them, else one each.
        added = 1 if DIALECTS[dialect].gathers(first) else len(calls)
        assert len(nxt["messages"]) == len(state["messages"]) + added
        assert [r["id"] for r in nxt["tool_calls"][-len(calls) :]] == [c["id"] for c in calls]
        assert (nxt["status"] == "incomplete") == (nxt["turns"] >= max_turns)
        state = nxt
        if loop.is_finished(state):
            break
    r = loop.result(state, "m")
    assert r["tool_call_count"] == len(r["tool_calls"]) and r["messages"] == state["messages"]


@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1"))))
def test_parse_arguments_is_total(raw):
    args, error = loop.parse_arguments(raw)
    assert (args is None) != (error is None)
    if args is not None:
        assert dict(args) == ({} if not raw.strip() else json.loads(raw))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


def deeply_frozen(value):
    if isinstance(value, FrozenMap):  # a dict that refuses changes: check it first
        return all(deeply_frozen(v) for v in value.values())
    if isinstance(value, dict | list):
        return False
    if isinstance(value, PVector):
        return all(deeply_frozen(v) for v in value)
    return True


@given(st.dictionaries(st.text(), json_values, max_size=4))
def test_parsed_arguments_are_the_object_deeply_frozen(obj):
    """Flat arguments take a shortcut; nested ones are frozen all the way down: both equal."""
    for raw in (json.dumps(obj), obj):  # a JSON string (openai) or an object (anthropic)
        args, error = loop.parse_arguments(raw)
        assert error is None and isinstance(args, FrozenMap) and deeply_frozen(args)
        assert thaw(args) == obj


ECHO = tool("echo", "Echo.", None, lambda a: json.dumps(dict(a), sort_keys=True))
ADD = tool("add", "Add.", None, lambda a: str(sum(a.values())))


def perform(flow, turns):
    """A pure performer: scripted turns for 'llm', tools run inline, no clock, no I/O."""
    value, effects = None, []
    while True:
        try:
            effect = flow.send(value)
        except StopIteration as stop:
            return stop.value, effects
        effects.append(effect[0])
        value = None
        if effect[0] == "clock":
            value = 0.0
        elif effect[0] == "llm":
            value = next(turns)
        elif effect[0] == "tools":
            _, tk, calls = effect
            value = [(execute(tk, c["name"], c["args"]), 0.0) for c in calls]


@given(dialects, st.lists(replies, min_size=1, max_size=4))
def test_the_flow_runs_without_io_and_matches_the_steps(dialect, script):
    script = [*script, {"content": "the end"}]
    turns = iter([decoded(dialect, r, i) for i, r in enumerate(script)])
    cfg = {
        "model": "m", "system": lambda tk: "", "params": {}, "hooks": {}, "max_turns": 10,
        "retries": 0, "retry_base_ms": 1, "max_wait_s": 60,
        "on_error": None, "wait_for": None, "rng": None,
        "transform": None, "events": True, "encode": False,
    }  # fmt: skip
    state = loop.start(dialect, [], "go")
    final, effects = perform(flow.run_flow(cfg, state, toolkit(ECHO, ADD)), turns)
    assert effects.count("llm") == final["turns"]
    # The run ends at the first text answer, after every earlier turn's calls ran.
    first_text = next(i for i, r in enumerate(script) if "content" in r)
    assert final["status"] == "done" and final["turns"] == first_text + 1
    assert final["text"] == script[first_text]["content"]
    unknown = [c for c in final["tool_calls"] if c["name"] == "missing"]
    assert all(c["is_error"] and "Unknown tool" in c["output"] for c in unknown)
