"""The loopback fake provider's SSE answers, read over real HTTP by the pure decoders."""

from __future__ import annotations

import threading

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.core.errors import ProviderError
from toolnexus.core.wire import DIALECTS, sse
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.testing.fake_provider import PATHS as FAKE_PATHS
from toolnexus.testing.fake_provider import (
    RESPONSES,
    fake_provider,
    text_reply,
    tool_calls_reply,
)

ALL = sorted(_REGISTRY)  # every row of the dialect registry

PATHS = {dialect: path for path, dialect in FAKE_PATHS.items()}
# The least a request needs: the fake provider answers 400 to one its API would refuse.
HI = [{"role": "user", "content": "hi"}]
STREAM_PATHS = {"gemini": "/models/m:streamGenerateContent?alt=sse"}
BODY = {"model": "m", "max_tokens": 64, "messages": HI}


def post_stream(http: httpx.Client, url: str, dialect: str, body: dict | None = None):
    """POST a streaming request; return (turn, deltas, raw chunk count)."""
    codec = DIALECTS[dialect]
    body = codec.stream_body(body or codec.body("m", HI, [], "", {}))
    state, acc, deltas, chunks = sse.start(), codec.stream_start(), [], 0
    path = STREAM_PATHS.get(dialect, PATHS[dialect])  # Gemini asks by its URL
    with http.stream("POST", url + path, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"] == "text/event-stream"
        for chunk in resp.iter_raw():
            chunks += 1
            state, events = sse.feed(state, chunk)
            for event in events:
                acc, d = codec.stream_event(acc, event)
                deltas.extend(d)
    for event in sse.end(state):
        acc, d = codec.stream_event(acc, event)
        deltas.extend(d)
    assert getattr(acc, "done", True)  # chat completions: [DONE] came (the others: see
    return codec.stream_turn(acc), deltas, chunks  # stream_turn, which raises without an end)


@pytest.fixture(scope="module")
def served():
    """One provider for the module; `cell[0]` is the reply its next request gets."""
    cell: list = [None]
    with fake_provider(lambda body, dialect: cell[0]) as fp, httpx.Client(timeout=10) as http:
        yield fp, http, cell


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.uuids().map(lambda u: f"call_{u.hex[:8]}"),
            "name": st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
            "arguments": st.dictionaries(st.text(max_size=6), json_values, max_size=4),
        }
    ),
    max_size=3,
)
replies = st.fixed_dictionaries(
    {"content": st.text(max_size=40), "tool_calls": calls},
    optional={
        "usage": st.fixed_dictionaries(
            {"prompt_tokens": st.integers(0, 10**6), "completion_tokens": st.integers(0, 10**6)}
        ),
        "chunk": st.integers(1, 40),
        "finish": st.sampled_from(["length", "max_tokens"]),
    },
)


@settings(max_examples=40)
@given(replies, st.sampled_from(ALL))
def test_streamed_turn_equals_the_non_streamed_turn(served, reply, dialect):
    fp, http, cell = served
    cell[0] = reply
    turn, deltas, _ = post_stream(http, fp.url, dialect)
    codec = DIALECTS[dialect]
    seq = len(fp.requests)  # the request number: Responses item ids hold it
    assert turn == codec.parse_response(RESPONSES[dialect](reply, fp.model, seq))
    assert "".join(d["delta"] for d in deltas if d["type"] == "text") == reply["content"]
    starts = [d["id"] for d in deltas if d["type"] == "tool_call_start"]
    assert starts == [c["id"] for c in reply["tool_calls"]]


@pytest.mark.parametrize("dialect", ALL)
def test_small_chunks_with_pauses_arrive_as_many_reads(served, dialect):
    fp, http, cell = served
    cell[0] = tool_calls_reply(
        ("add", {"a": 1, "b": "✓😄"}), content="héllo", chunk=3, chunk_delay=0.001
    )
    turn, _, chunks = post_stream(http, fp.url, dialect)
    assert turn["text"] == "héllo" and chunks > 20


def test_openai_without_include_usage_sends_no_usage_chunk(served):
    fp, http, cell = served
    cell[0] = text_reply("hi", usage={"prompt_tokens": 3, "completion_tokens": 4})
    body = {**BODY, "stream": True}
    with http.stream("POST", fp.url + "/chat/completions", json=body) as resp:
        raw = resp.read()
    assert b'"usage"' not in raw and raw.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("dialect", ALL)
def test_stream_error_on_cue_is_a_provider_error(served, dialect):
    fp, http, cell = served
    cell[0] = text_reply(
        "a long answer " * 5, stream_error={"type": "overloaded_error", "message": "Overloaded"}
    )
    with pytest.raises(ProviderError, match="^Overloaded$"):
        post_stream(http, fp.url, dialect)


@pytest.mark.parametrize("dialect", ALL)
def test_stream_drop_cuts_the_body(served, dialect):
    fp, http, cell = served
    cell[0] = text_reply("a long answer " * 5, stream_drop=True)
    with pytest.raises(httpx.RemoteProtocolError):
        post_stream(http, fp.url, dialect)


def test_drop_closes_without_a_response(served):
    fp, http, cell = served
    cell[0] = {"drop": True}
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(fp.url + "/chat/completions", json={**BODY, "stream": True})


def test_failure_on_cue_keeps_headers_for_streams_too(served):
    fp, http, cell = served
    cell[0] = {"status": 429, "body": {"error": "slow down"}, "headers": {"Retry-After": "1"}}
    resp = http.post(fp.url + "/messages", json={**BODY, "stream": True})
    assert resp.status_code == 429 and resp.headers["retry-after"] == "1"


def test_stall_then_answer_and_client_timeout(served):
    fp, http, cell = served
    cell[0] = text_reply("late", stall=0.3)
    with pytest.raises(httpx.ReadTimeout):
        http.post(fp.url + "/chat/completions", json=BODY, timeout=0.05)
    cell[0] = text_reply("late", stall=0.05)
    assert http.post(fp.url + "/chat/completions", json=BODY).json()["choices"]


def test_stream_stall_times_out_mid_stream(served):
    fp, http, cell = served
    cell[0] = text_reply("late", stream_stall=0.5)
    body = {**BODY, "stream": True}
    with http.stream("POST", fp.url + "/messages", json=body, timeout=0.1) as resp:
        assert resp.status_code == 200
        with pytest.raises(httpx.ReadTimeout):
            resp.read()


def test_stopping_wakes_a_stalled_handler():
    before = set(threading.enumerate())
    with fake_provider([text_reply("never", stall=30)]) as fp:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(fp.url + "/chat/completions", json=BODY, timeout=0.1)
        new = set(threading.enumerate()) - before
        handlers = [t for t in new if "process_request" in t.name]
        assert handlers and all(t.is_alive() for t in handlers)  # asleep in the stall
    for t in handlers:
        t.join(timeout=3)
    assert not any(t.is_alive() for t in handlers)
