"""Prompt caching (issue 24, item 7): Anthropic cache breakpoints and OpenAI's
prompt_cache_key with `prompt_cache=True`, over the fake provider; `capped_store(n,
keep=m)`, whose kept front holds for n - m messages between cuts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from published import available, spec_problems

from toolnexus import ask, conversation_store, create_client, define_tool, run, toolkit
from toolnexus.core import transcript as tx
from toolnexus.core.frozen import freeze
from toolnexus.store import capped_store, in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.strategies import transcripts

EPHEMERAL = {"type": "ephemeral"}


@define_tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: cold"


@define_tool
def other(x: int) -> str:
    """Another tool."""
    return str(x)


def _client(fp, style, **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", **options)


def _marks(value) -> list:
    """Every cache_control value anywhere in a JSON value."""
    if isinstance(value, dict):
        own = [value["cache_control"]] if "cache_control" in value else []
        return own + [m for v in value.values() for m in _marks(v)]
    if isinstance(value, list):
        return [m for v in value for m in _marks(v)]
    return []


def _check_specs(fp, style):
    if available():
        for r in fp.requests:
            assert spec_problems(r["body"], style) == []


def test_anthropic_breakpoints_on_system_last_tool_and_last_message():
    script = [tool_calls_reply(("lookup", {"city": "Oslo"})), text_reply("Cold."),
              text_reply("Still cold.")]  # fmt: skip
    with fake_provider(script) as fp:
        c = _client(fp, "anthropic", prompt_cache=True, system_prompt="Be brief.")
        ask(c, "Weather in Oslo?", toolkit=toolkit(lookup, other), id="trip")
        ask(c, "And tomorrow?", toolkit=toolkit(lookup, other), id="trip")
    assert len(fp.requests) == 3
    for r in fp.requests:
        body = r["body"]
        assert body["system"] == [{"type": "text", "text": "Be brief.",
                                   "cache_control": EPHEMERAL}]  # fmt: skip
        assert "cache_control" not in body["tools"][0]
        assert body["tools"][-1]["cache_control"] == EPHEMERAL
        assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
        assert len(_marks(body)) == 3  # system, last tool, last message
        assert all(_marks(m) == [] for m in body["messages"][:-1])
    # the tool loop's second request marks the tool_result message
    assert fp.requests[1]["body"]["messages"][-1]["content"][-1]["type"] == "tool_result"
    saved = json.dumps(conversation_store(c)["get"]("trip"), default=list)
    assert "cache_control" not in saved  # marks belong to requests, never to the transcript
    _check_specs(fp, "anthropic")


def test_anthropic_never_more_than_four_breakpoints():
    marked = {"type": "text", "text": "old", "cache_control": EPHEMERAL}
    history = [{"role": "user", "content": [marked, {**marked, "text": "older"}]},
               {"role": "assistant", "content": [{**marked, "text": "a"}]}]  # fmt: skip
    with fake_provider([text_reply("ok")]) as fp:
        c = _client(fp, "anthropic", prompt_cache=True, system_prompt="S")
        run(c, "next", toolkit=toolkit(lookup), history=history)
    body = fp.requests[0]["body"]
    assert len(_marks(body)) == 4  # three in history + the last tool: no room for more
    assert body["system"] == "S"
    _check_specs(fp, "anthropic")


def test_without_prompt_cache_nothing_is_marked():
    with fake_provider([text_reply("ok"), text_reply("ok")]) as fp:
        run(_client(fp, "anthropic", system_prompt="S"), "q", toolkit=toolkit(lookup))
        ask(_client(fp, "openai"), "q", id="c1")
    assert _marks(fp.requests[0]["body"]) == []
    assert "prompt_cache_key" not in fp.requests[1]["body"]


def test_openai_sends_the_conversation_id_as_prompt_cache_key():
    long_id = "u" * 100
    with fake_provider([text_reply("ok")] * 4) as fp:
        c = _client(fp, "openai", prompt_cache=True)
        ask(c, "q", id="user-42")
        run(c, "q")  # no id: no key
        ask(c, "q", id=long_id)
        c2 = _client(fp, "openai", prompt_cache=True, request_params={"prompt_cache_key": "mine"})
        ask(c2, "q", id="user-42")
    bodies = [r["body"] for r in fp.requests]
    assert bodies[0]["prompt_cache_key"] == "user-42"
    assert "prompt_cache_key" not in bodies[1]
    key = bodies[2]["prompt_cache_key"]
    assert key.startswith("tn-") and len(key) <= 64 and long_id not in key
    assert bodies[3]["prompt_cache_key"] == "mine"
    assert _marks(bodies) == []
    _check_specs(fp, "openai")


# ---- capped_store(n, keep=m) --------------------------------------------------------


def _user(i):
    return {"role": "user", "content": f"q{i}"}


def _assistant(i):
    return {"role": "assistant", "content": f"a{i}"}


def test_keep_cuts_to_m_only_once_past_n():
    s = capped_store(6, in_memory_store(), keep=2)
    fronts = []
    t: list = []
    for i in range(12):
        t = [*(s["get"]("c") or []), _user(i), _assistant(i)]
        s["save"]("c", t)
        fronts.append(s["get"]("c")[0]["content"])
    # 2, 4, 6 messages kept whole; the 8th cuts to 2; then it grows to 6 again, and so on
    assert fronts == [
        "q0", "q0", "q0", "q3", "q3", "q3", "q6", "q6", "q6", "q9", "q9", "q9"
    ]  # fmt: skip
    plain = capped_store(6, in_memory_store())
    for i in range(6):
        plain["save"]("c", [m for j in range(i + 4) for m in (_user(j), _assistant(j))])
        assert len(plain["get"]("c")) == 6  # the front moves on every save


@pytest.mark.parametrize("keep", [0, 7, 2.5, True, "3"])
def test_keep_must_be_from_1_to_n(keep):
    with pytest.raises(ValueError, match="keep must be an integer from 1 to n=6"):
        capped_store(6, in_memory_store(), keep=keep)


def test_keep_composes_as_a_curried_decorator():
    deco = capped_store(40, keep=30)
    s = deco(in_memory_store())
    assert s["desc"] == "capped(40, keep=30, in_memory())"


@given(data=st.data())
def test_property_trim_past_cuts_safely_and_only_past_n(data):
    t = freeze(data.draw(transcripts(max_turns=6)))
    n = data.draw(st.integers(1, 12))
    m = data.draw(st.integers(1, n))
    out = tx.trim_past(t, n, m)
    start = 1 if t and tx.is_system(t[0]) else 0
    if len(t) - start <= n:
        assert out is t or out == t  # within n: never cut
    else:
        assert out == tx.trim(t, m)  # past n: cut to m, at a safe cut as trim does
        body = out[start:]
        assert not body or tx.is_turn_start(body[0])
        assert list(body) == list(t[len(t) - len(body) :])


@given(st.integers(2, 20), st.data())
def test_property_the_kept_front_holds_for_n_minus_m_messages(n, data):
    m = data.draw(st.integers(1, n))
    s = capped_store(n, in_memory_store(), keep=m)
    cuts, previous = 0, None
    for i in range(3 * n):
        s["save"]("c", [*(s["get"]("c") or []), _user(i), _assistant(i)])
        now = s["get"]("c")
        if previous is not None and now[0] != previous[0]:
            cuts += 1
            assert len(now) <= max(m, 2)  # a turn of two is never split
        else:
            assert len(now) <= n + 1  # at most one turn past n before the next cut
        previous = now
    grown = max(2, n - m)  # messages added between two cuts, at least a turn
    assert cuts <= (3 * 2 * n) // grown + 1
