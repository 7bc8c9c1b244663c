"""Tool-id remapping is stable: an id already valid is kept, and remapping never compounds
across saves. 30 exchanges of an in-process client whose ids repeat every run
(`call_<turn>_<i>`), read fresh from each durable store every time, all go through."""

from __future__ import annotations

import pytest
from durable_store_cases import store_maker
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import ask, create_in_process_client, define_tool, toolkit
from toolnexus.core.frozen import thaw
from toolnexus.core.wire.translate import _id_plan


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def _generate(request):
    last = request["messages"][-1]
    if last["role"] == "user":  # no "id": the in-process client names it call_<turn>_<i>
        return {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}
    return {"content": "3"}


@pytest.fixture(params=["file", "sqlite", "redis", "postgres"])
def make_store(request, tmp_path, unique):
    yield from store_maker(request.param, request, tmp_path, unique, "ids")


def test_30_exchanges_read_fresh_each_time_keep_working(make_store):
    for i in range(30):  # a new store object each time: a restart, another worker
        store = make_store()
        client = create_in_process_client(model="m", generate=_generate, store=store)
        try:
            assert ask(client, f"1+2? ({i})", toolkit=toolkit(add), id="calc")["text"] == "3"
        finally:
            store.get("close", lambda: None)()  # the pools a store made of its own
    store = make_store()
    stored = thaw(store["get"]("calc"))
    store.get("close", lambda: None)()
    ids = [c["id"] for m in stored for c in m.get("tool_calls") or ()]
    # Each earlier run's id was remapped once, for good (the latest is as the model sent
    # it, remapped when next read): no id was renamed twice, none grew.
    assert len(ids) == 30 and len(set(ids[:-1])) == 29
    assert max(map(len, ids)) <= 31  # never grows run after run


_ID = st.sampled_from(["call_1_0", "call_1_1", "toolu_x", "a b", ""])


@given(st.lists(_ID, min_size=1, max_size=12))
def test_a_plan_applied_once_is_applied_for_good(ids):
    """Remapping the remapped transcript changes nothing (stable: ids kept once valid)."""
    messages = []
    for i in ids:
        call = {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": i, "content": "ok"}]  # fmt: skip
    first = _id_plan(messages, "openai")
    renamed = []
    for m, plan in zip(messages, first, strict=True):
        if m["role"] == "assistant":
            call = {**m["tool_calls"][0], "id": plan.get(m["tool_calls"][0]["id"])}
            renamed.append({**m, "tool_calls": [call]})
        else:
            renamed.append({**m, "tool_call_id": plan.get(m["tool_call_id"])})
    again = _id_plan(renamed, "openai")
    assert all(all(k == v for k, v in p.items()) for p in again)
