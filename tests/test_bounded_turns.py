"""Issue 39, item 4: one model turn cannot run unbounded tool calls, and the names a model
invents never become metric series or span names.

Over the loopback fake provider. Each test failed on the old code: one answer ran every
call it asked for (2,000 HTTP requests once), and each invented tool name became a
Prometheus series for the life of the process (28,000 from one turn).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from toolnexus import arun, create_client, define_tool, run, stream, toolkit
from toolnexus.client import MAX_TOOL_CALLS, metrics
from toolnexus.core.steps import capped
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

ALL = sorted(_REGISTRY)


def counting_tool():
    ran = []
    lock = threading.Lock()

    @define_tool
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        with lock:
            ran.append((a, b))
        return str(a + b)

    return add, ran


def many_calls(n: int) -> dict:
    return tool_calls_reply(*[("add", {"a": i, "b": 1}) for i in range(n)])


def client(fp, style="openai", **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", retries=0,
                         **options)  # fmt: skip


def test_a_turn_runs_at_most_64_calls_by_default_and_the_rest_are_answered():
    add, ran = counting_tool()
    with fake_provider([many_calls(70), text_reply("done")]) as fp:
        r = run(client(fp), "go", toolkit=toolkit(add))
        replayed = fp.requests[-1]["body"]["messages"]
    assert MAX_TOOL_CALLS == 64 and len(ran) == 64
    calls = r["tool_calls"]
    assert len(calls) == 70 and r["text"] == "done"
    assert [c["is_error"] for c in calls] == [False] * 64 + [True] * 6
    assert (
        calls[69]["output"] == "Tool call 'add' not run: a model turn may call at most 64 tool(s)"
    )
    # every call is answered in the transcript the model reads next (in call order)
    answered = [m for m in replayed if m["role"] == "tool"]
    assert len(answered) == 70 and "at most 64" in answered[-1]["content"]


@pytest.mark.parametrize("style", ALL)
def test_the_cap_is_a_client_option_in_every_dialect(style):
    add, ran = counting_tool()
    with fake_provider([many_calls(3), text_reply("done")]) as fp:
        r = run(client(fp, style, max_tool_calls=2), "go", toolkit=toolkit(add))
    assert len(ran) == 2 and [c["is_error"] for c in r["tool_calls"]] == [False, False, True]


def test_the_cap_holds_for_streams_and_async_runs():
    add, ran = counting_tool()
    with fake_provider([many_calls(5), text_reply("done")] * 2) as fp:
        c = client(fp, max_tool_calls=1)
        events = list(stream(c, "go", toolkit=toolkit(add)))
        results = [e for e in events if e["type"] == "tool_result"]
        assert [e["is_error"] for e in results] == [False] + [True] * 4
        r = asyncio.run(arun(c, "go", toolkit=toolkit(add)))
        assert [x["is_error"] for x in r["tool_calls"]] == [False] + [True] * 4
    assert len(ran) == 2


def test_the_cap_must_be_a_positive_integer():
    for bad in (0, -1, 1.5, "64"):
        with pytest.raises((ValueError, TypeError)):
            create_client(base_url="http://127.0.0.1:9", model="m", api_key="k",
                          max_tool_calls=bad)  # fmt: skip


def test_capped_marks_exactly_the_calls_past_the_cap():
    calls = tuple({"id": str(i), "name": "t", "error": None} for i in range(5))
    assert capped(calls, 5) is calls and capped(calls, None) is calls
    out = capped(calls, 3)
    assert [c["error"] is None for c in out] == [True, True, True, False, False]
    assert [c["id"] for c in out] == ["0", "1", "2", "3", "4"]


def test_invented_tool_names_share_one_metric_label():
    add, _ = counting_tool()
    invented = [(f"made_up_{i}", {}) for i in range(20)]
    with fake_provider([tool_calls_reply(*invented, ("add", {"a": 1, "b": 2})),
                        text_reply("ok")]) as fp:  # fmt: skip
        c = client(fp)
        r = run(c, "go", toolkit=toolkit(add))
    assert sum(x["is_error"] for x in r["tool_calls"]) == 20
    text = metrics(c)
    assert "made_up" not in text
    assert 'toolnexus_tool_calls_total{tool="_unknown",source="unknown",is_error="true"} 20' in text
    assert 'toolnexus_tool_calls_total{tool="add",source="function",is_error="false"} 1' in text
