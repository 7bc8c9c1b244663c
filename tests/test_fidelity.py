"""Provider fidelity over real HTTP (the loopback fake provider speaking real shapes):
what a provider sends on an assistant message survives the round trip, system messages
survive any dialect, endings are honest, usage keeps its details, and a stream without its
final event is a network failure (retried, or raised with nothing saved)."""

from __future__ import annotations

import json
from functools import reduce

import pytest
from dialect_kit import STYLES, covers, said
from hypothesis import given
from hypothesis import strategies as st
from raw_server import RawServer, sse_answer

from toolnexus import ProviderError, create_client, define_tool, run, stream
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import view
from toolnexus.core.wire.common import ZERO_USAGE, add_usage, usage
from toolnexus.prometheus import metrics_sink
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def client(fp, style="openai", **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", **options)


def outcome(c, prompt, streamed, **kw):
    """Return (the RunResult, the stream events) of run() or stream()."""
    if not streamed:
        return run(c, prompt, **kw), []
    events = list(stream(c, prompt, **kw))
    return events[-1]["result"], events


def assistant_messages(body):
    return [m for m in body["messages"] if m["role"] == "assistant"]


# ---- 1. lossless assistant messages -------------------------------------------------------

DEEPSEEK = "Let me add 2 and 3 with the tool."
GEMINI = {"google": {"thought_signature": "CsUBAdHtim9+sig=="}}
OPENROUTER = [
    {
        "type": "reasoning.text",
        "text": "Adding.",
        "signature": "abc",
        "format": "anthropic-v1",
        "index": 0,
    }  # fmt: skip
]


@pytest.mark.parametrize("streamed", [False, True])
def test_deepseek_reasoning_content_is_kept_and_replayed(streamed):
    call = {"name": "add", "arguments": {"a": 2, "b": 3}}
    script = [tool_calls_reply(call, reasoning_content=DEEPSEEK), text_reply("5")]
    store = in_memory_store()
    with fake_provider(script) as fp:
        r, events = outcome(client(fp, store=store), "2+3?", streamed, toolkit=[add],
                            conversation_id="c")  # fmt: skip
        second = fp.requests[1]["body"]
    (replayed,) = assistant_messages(second)
    assert replayed["reasoning_content"] == DEEPSEEK and replayed["tool_calls"][0]["id"]
    assert r["text"] == "5" and r["messages"][1]["reasoning_content"] == DEEPSEEK
    assert store["get"]("c")[1]["reasoning_content"] == DEEPSEEK
    if streamed:
        thinking = "".join(e["delta"] for e in events if e["type"] == "thinking")
        assert thinking == DEEPSEEK
        assert "".join(e["delta"] for e in events if e["type"] == "text") == "5"


@pytest.mark.parametrize("streamed", [False, True])
def test_gemini_extra_content_on_a_tool_call_is_replayed(streamed):
    call = {"name": "add", "arguments": {"a": 1, "b": 1}, "extra": {"extra_content": GEMINI}}
    with fake_provider([tool_calls_reply(call), text_reply("2")]) as fp:
        r, _ = outcome(client(fp), "1+1?", streamed, toolkit=[add])
        (replayed,) = assistant_messages(fp.requests[1]["body"])
    assert replayed["tool_calls"][0]["extra_content"] == GEMINI
    assert replayed["tool_calls"][0]["function"]["name"] == "add" and r["text"] == "2"


@pytest.mark.parametrize("streamed", [False, True])
def test_openrouter_reasoning_details_are_replayed_verbatim(streamed):
    call = {"name": "add", "arguments": {"a": 1, "b": 2}}
    first = tool_calls_reply(call, message_extra={"reasoning_details": OPENROUTER})
    with fake_provider([first, text_reply("3")]) as fp:
        outcome(client(fp), "1+2?", streamed, toolkit=[add])
        (replayed,) = assistant_messages(fp.requests[1]["body"])
    assert replayed["reasoning_details"] == OPENROUTER


@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_thinking_is_replayed_and_streamed_as_thinking(streamed):
    thinking = [{"thinking": "I should call add.", "signature": "EqQBsig"}, {"redacted": "EmwK"}]
    call = {"name": "add", "arguments": {"a": 4, "b": 4}}
    with fake_provider([tool_calls_reply(call, thinking=thinking), text_reply("8")]) as fp:
        r, events = outcome(client(fp, "anthropic"), "4+4?", streamed, toolkit=[add])
        (replayed,) = assistant_messages(fp.requests[1]["body"])
    kinds = [b["type"] for b in replayed["content"]]
    assert kinds == ["thinking", "redacted_thinking", "tool_use"]
    assert replayed["content"][0] == {"type": "thinking", "thinking": "I should call add.",
                                      "signature": "EqQBsig"}  # fmt: skip
    assert replayed["content"][1]["data"] == "EmwK" and r["text"] == "8"
    if streamed:
        assert "".join(e["delta"] for e in events if e["type"] == "thinking") == thinking[0][
            "thinking"]  # fmt: skip
        assert "".join(e["delta"] for e in events if e["type"] == "text") == "8"


def test_reasoning_never_leaks_into_the_other_dialect():
    call = {"name": "add", "arguments": {"a": 2, "b": 3}, "extra": {"extra_content": GEMINI}}
    store = in_memory_store()
    script = [tool_calls_reply(call, reasoning_content=DEEPSEEK), text_reply("5"), text_reply("ok")]
    with fake_provider(script) as fp:
        run(client(fp, store=store), "2+3?", toolkit=[add], conversation_id="c")
        run(client(fp, "anthropic", store=store), "sure?", toolkit=[add], conversation_id="c")
        sent = json.dumps(fp.requests[2]["body"])
    assert DEEPSEEK not in sent and "thought_signature" not in sent and "extra_content" not in sent


# ---- 2. system messages survive ---------------------------------------------------------


def test_a_seeded_system_message_survives_asks_on_anthropic_then_openai():
    store = in_memory_store()
    store["save"]("c", [{"role": "system", "content": "Answer in French."},
                        {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "bonjour"}])  # fmt: skip
    with fake_provider([text_reply("un"), text_reply("deux"), text_reply("trois")]) as fp:
        anthropic = client(fp, "anthropic", store=store, system_prompt="Be brief.")
        run(anthropic, "one?", conversation_id="c")
        run(anthropic, "two?", conversation_id="c")
        run(client(fp, store=store), "three?", conversation_id="c")
        bodies = [q["body"] for q in fp.requests]
    assert [b.get("system") for b in bodies[:2]] == ["Answer in French.\n\nBe brief."] * 2
    assert all(m["role"] != "system" for b in bodies[:2] for m in b["messages"])
    assert bodies[2]["messages"][0] == {"role": "system", "content": "Answer in French."}
    saved = store["get"]("c")
    assert saved[0]["role"] == "system" and saved[0]["content"] == "Answer in French."
    assert [m["role"] for m in saved].count("system") == 1


# ---- 3. honest endings ------------------------------------------------------------------


# How each API says "cut by the token limit" (the fake provider's reply field and the
# API's own reason): facts of the APIs, a table checked to cover the registry.
CUT_BY_LIMIT = covers({
    "openai": ({"finish": "length"}, "length"),
    "anthropic": ({"finish": "max_tokens"}, "max_tokens"),
    "responses": ({"incomplete": "max_output_tokens"}, "max_output_tokens"),
    "gemini": ({"finish": "MAX_TOKENS"}, "MAX_TOKENS"),
}, "CUT_BY_LIMIT")  # fmt: skip


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("streamed", [False, True])
def test_an_answer_cut_by_max_tokens_is_incomplete_and_saved(style, streamed):
    store = in_memory_store()
    given, finish = CUT_BY_LIMIT[style]
    with fake_provider([text_reply("The answer is", **given)]) as fp:
        r, events = outcome(client(fp, style, store=store), "q", streamed, conversation_id="c")
    assert (r["status"], r["limit"], r["stop_reason"]) == ("incomplete", "max_tokens", finish)
    assert said(view.items(store["get"]("c")[-1:])) == ["The answer is"]
    if streamed:
        assert events[-1]["result"] == r


@pytest.mark.parametrize("streamed", [False, True])
def test_stop_reason_is_the_providers_own(streamed):
    with fake_provider([text_reply("hi", finish="stop_sequence")]) as fp:
        r, _ = outcome(client(fp, "anthropic"), "q", streamed)
    assert (r["status"], r["stop_reason"], r["refusal"]) == ("done", "stop_sequence", None)


@pytest.mark.parametrize("streamed", [False, True])
def test_an_openai_refusal_is_kept_given_and_replayed(streamed):
    store = in_memory_store()
    with fake_provider([{"refusal": "I can't help with that."}, text_reply("ok")]) as fp:
        c = client(fp, store=store, keep_refused=True)  # (by default a refusal is not saved)
        r, _ = outcome(c, "bad?", streamed, conversation_id="c")
        stored = thaw(store["get"]("c")[1])
        run(c, "fine?", conversation_id="c")  # the fake refuses a request the API would
        replayed = fp.requests[1]["body"]["messages"][1]
    assert r["refusal"] == "I can't help with that." and r["status"] == "done"
    assert stored == {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    assert replayed["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]


@pytest.mark.parametrize("streamed", [False, True])
def test_an_anthropic_refusal_is_given(streamed):
    with fake_provider([text_reply("I won't.", finish="refusal")]) as fp:
        r, _ = outcome(client(fp, "anthropic"), "bad?", streamed)
    assert (r["refusal"], r["stop_reason"], r["text"]) == ("I won't.", "refusal", "I won't.")


@pytest.mark.parametrize("streamed", [False, True])
def test_pause_turn_is_continued_and_counts_as_a_turn(streamed):
    script = [text_reply("Searching...", finish="pause_turn"), text_reply("Found it.")]
    with fake_provider(script) as fp:
        r, events = outcome(client(fp, "anthropic"), "find", streamed)
        second = fp.requests[1]["body"]["messages"]
    assert (r["text"], r["turns"], r["status"], r["stop_reason"]) == (
        "Searching...Found it.", 2, "done", "end_turn")  # fmt: skip
    assert second[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching..."}],
    }
    if streamed:
        assert events[-1]["result"] == r


def test_pause_turn_stops_at_max_turns():
    script = [text_reply("Searching...", finish="pause_turn")] * 2
    with fake_provider(script) as fp:
        r = run(client(fp, "anthropic", max_turns=2), "find")
    assert (r["status"], r["limit"], r["turns"]) == ("incomplete", "max_turns", 2)


# ---- 5. usage details -------------------------------------------------------------------

OPENAI_USAGE = {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140,
                "prompt_tokens_details": {"cached_tokens": 64},
                "completion_tokens_details": {"reasoning_tokens": 30}}  # fmt: skip
ANTHROPIC_USAGE = {"input_tokens": 5, "output_tokens": 7, "cache_read_input_tokens": 4000,
                   "cache_creation_input_tokens": 600}  # fmt: skip
RESPONSES_USAGE = {"input_tokens": 100, "output_tokens": 40, "total_tokens": 140,
                   "input_tokens_details": {"cached_tokens": 64},
                   "output_tokens_details": {"reasoning_tokens": 30}}  # fmt: skip
GEMINI_USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 10, "thoughtsTokenCount": 30,
                "cachedContentTokenCount": 64, "totalTokenCount": 140}  # fmt: skip
_SUMMED = {"prompt_tokens": 200, "completion_tokens": 80, "total_tokens": 280,
           "cache_read_tokens": 128, "reasoning_tokens": 60}  # fmt: skip
# Each API's own usage object, and the two turns' usage summed: a table over the registry.
USAGES = covers({
    "openai": (OPENAI_USAGE, _SUMMED),
    "anthropic": (ANTHROPIC_USAGE, {"prompt_tokens": 9210, "completion_tokens": 14,
                                    "total_tokens": 9224, "cache_read_tokens": 8000,
                                    "cache_write_tokens": 1200}),
    "responses": (RESPONSES_USAGE, _SUMMED),
    "gemini": (GEMINI_USAGE, _SUMMED),  # thoughts are billed output
}, "USAGES")  # fmt: skip


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("streamed", [False, True])
def test_usage_details_are_kept_summed_and_in_the_metrics(style, streamed):
    raw, want = USAGES[style]
    sink = metrics_sink()
    call = {"name": "add", "arguments": {"a": 1, "b": 1}}
    script = [tool_calls_reply(call, raw_usage=raw), text_reply("2", raw_usage=raw)]
    with fake_provider(script) as fp:
        r, _ = outcome(client(fp, style, on_metric=sink["on_metric"]), "q", streamed,
                       toolkit=[add])  # fmt: skip
    assert thaw(r["usage"]) == want
    text = sink["render"]()
    for kind in ("cache_read", "cache_write", "reasoning"):
        if f"{kind}_tokens" in want:
            line = f'toolnexus_llm_tokens_total{{type="{kind}"}} {want[f"{kind}_tokens"]}'
            assert line in text


# ---- 23.3 honest stream ends --------------------------------------------------------------


def sse(*events) -> bytes:
    out = b""
    for e in events:
        name = e.get("type") if isinstance(e, dict) else None
        head = f"event: {name}\n" if name and "choices" not in e else ""
        data = e if isinstance(e, str) else json.dumps(e)
        out += f"{head}data: {data}\n\n".encode()
    return out


def openai_chunk(delta, finish=None):
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


OPENAI_WHOLE = [
    openai_chunk({"role": "assistant", "content": ""}),
    openai_chunk({"content": "Hel"}),
    openai_chunk({"content": "lo"}),
    openai_chunk({}, "stop"),
    "[DONE]",
]
START = {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 3}}}
ANTHROPIC_WHOLE = [
    START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]
_MSG = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}  # fmt: skip
RESPONSES_WHOLE = [
    {"type": "response.created", "response": {"id": "resp_1", "model": "m", "output": []}},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hel"},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "lo"},
    {"type": "response.output_item.done", "output_index": 0, "item": _MSG},
    {"type": "response.completed", "response": {"id": "resp_1", "model": "m",
     "status": "completed", "output": [_MSG], "usage": {"input_tokens": 3,
                                                         "output_tokens": 2}}},
]  # fmt: skip


def _gemini_chunk(text, **more):
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0,
                            **more}], "modelVersion": "m"}  # fmt: skip


GEMINI_WHOLE = [_gemini_chunk(""), _gemini_chunk("Hel"),
                {**_gemini_chunk("lo", finishReason="STOP"),
                 "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2}}]  # fmt: skip
WHOLE = {"openai": OPENAI_WHOLE, "anthropic": ANTHROPIC_WHOLE, "responses": RESPONSES_WHOLE,
         "gemini": GEMINI_WHOLE}  # fmt: skip
BEFORE_TEXT = {"openai": 1, "anthropic": 2, "responses": 1, "gemini": 1}  # nothing shown yet
AFTER_TEXT = {"openai": 2, "anthropic": 3, "responses": 2, "gemini": 2}  # "Hel" went, no end
CUT_STYLES = STYLES  # every row of the registry: one without its stream here fails


@pytest.mark.parametrize("style", CUT_STYLES)
@pytest.mark.parametrize("cut", ["empty", "before_text"])
def test_a_cut_stream_before_any_text_is_retried(style, cut):
    n = 0 if cut == "empty" else BEFORE_TEXT[style]
    store = in_memory_store()
    with RawServer() as srv:
        srv.script([sse_answer(sse(*WHOLE[style][:n])), sse_answer(sse(*WHOLE[style]))])
        c = create_client(base_url=srv.url, style=style, model="m", api_key="k", store=store,
                          retry_base_ms=1)  # fmt: skip
        events = list(stream(c, "q", conversation_id="c"))
        assert len(srv.requests) == 2
    assert events[-1]["result"]["text"] == "Hello" and events[-1]["result"]["status"] == "done"
    assert "".join(e["delta"] for e in events if e["type"] == "text") == "Hello"
    assert len(store["get"]("c")) == 2


@pytest.mark.parametrize("style", CUT_STYLES)
def test_a_cut_stream_after_text_raises_streamed_and_saves_nothing(style):
    store = in_memory_store()
    with RawServer() as srv:
        # The connection closes (a close-delimited body) before the final event.
        srv.script([sse_answer(sse(*WHOLE[style][: AFTER_TEXT[style]]))])
        c = create_client(base_url=srv.url, style=style, model="m", api_key="k", store=store,
                          retry_base_ms=1)  # fmt: skip
        seen = []
        with pytest.raises(ProviderError) as info:
            for e in stream(c, "q", conversation_id="c"):
                seen.append(e)
        assert len(srv.requests) == 1
    assert info.value.network and info.value.streamed and "final event" in str(info.value)
    assert "".join(e["delta"] for e in seen if e["type"] == "text") == "Hel"
    assert store["get"]("c") is None


@pytest.mark.parametrize("style", CUT_STYLES)
def test_a_stream_whose_chunked_connection_drops_saves_nothing(style):
    store = in_memory_store()
    with fake_provider([text_reply("a long enough answer to cut", stream_drop=True)] * 3) as fp:
        c = client(fp, style, store=store, retry_base_ms=1)
        with pytest.raises(ProviderError) as info:
            list(stream(c, "q", conversation_id="c"))
    assert info.value.network and store["get"]("c") is None


def test_openai_compatible_stream_with_finish_reason_but_no_done_is_complete():
    with RawServer() as srv:
        srv.script([sse_answer(sse(*OPENAI_WHOLE[:-1]))])
        c = create_client(base_url=srv.url, model="m", api_key="k")
        events = list(stream(c, "q"))
    assert events[-1]["result"]["text"] == "Hello" and len(srv.requests) == 1


def test_show_names_a_refusal_and_keeps_thinking_out_of_the_answer():
    from toolnexus.display import event_rows, result_rows

    with fake_provider([{"refusal": "No."}]) as fp:
        r = run(client(fp), "q")
    assert any(row.text == "[refusal] No." for row in result_rows(r))
    assert result_rows(r)[-1].text.endswith("refused")
    events = [{"type": "thinking", "delta": "hmm"}, {"type": "text", "delta": "hi"}]
    assert [row.text for row in event_rows(events)] == ["hi"]


@pytest.mark.parametrize("style", CUT_STYLES)
def test_astream_retries_a_cut_stream_and_raises_one_cut_after_text(style):
    import asyncio

    from toolnexus import astream

    async def events(c):
        return [e async for e in astream(c, "q", conversation_id="c")]

    store = in_memory_store()
    with RawServer() as srv:
        c = create_client(base_url=srv.url, style=style, model="m", api_key="k", store=store,
                          retry_base_ms=1)  # fmt: skip
        srv.script([sse_answer(b""), sse_answer(sse(*WHOLE[style]))])
        assert asyncio.run(events(c))[-1]["result"]["text"] == "Hello"
        assert len(srv.requests) == 2
        srv.script([sse_answer(sse(*WHOLE[style][: AFTER_TEXT[style]]))])
        with pytest.raises(ProviderError) as info:
            asyncio.run(events(c))
    assert info.value.streamed and info.value.network and len(store["get"]("c")) == 2


# ---- pure: usage sums -------------------------------------------------------------------


_COUNT = st.one_of(st.none(), st.integers(0, 10_000))


@given(st.lists(st.tuples(_COUNT, _COUNT, _COUNT, _COUNT, _COUNT), max_size=5))
def test_usage_sums_every_count_and_keeps_a_detail_once_reported(turns):
    each = [usage(p, c, cache_read=r, cache_write=w, reasoning=z) for p, c, r, w, z in turns]
    total = reduce(add_usage, each, ZERO_USAGE)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert total[key] == sum(u[key] for u in each)
    for i, key in enumerate(("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")):
        reported = [t[2 + i] for t in turns if t[2 + i] is not None]
        assert (key in total) == bool(reported) and total.get(key, 0) == sum(reported)


def test_every_row_of_the_registry_has_its_whole_stream_for_the_cut_tests():
    for table in (WHOLE, BEFORE_TEXT, AFTER_TEXT):
        covers(table)
