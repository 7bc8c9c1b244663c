"""The loop against the field: each provider profile of the fake provider (its errors,
retry headers and stream quirks, testing.profiles), as the loop runs over the registry."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from toolnexus import (
    ProviderError,
    arun,
    astream,
    conversation_store,
    create_client,
    define_tool,
    run,
    stream,
    toolkit,
)
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.profiles import PROFILES, profile_names

NAMES = sorted(PROFILES)
CHAT = profile_names("openai")  # the OpenAI-compatible servers


@define_tool
def weather(city: str) -> str:
    """Say the weather of a city."""
    return f"sunny in {city}"


TK = toolkit(weather)


def client(fp, name, **kw):
    options = {"retries": 2, "retry_base_ms": 1, **kw}
    return create_client(base_url=fp.url, style=PROFILES[name]["style"], model="m", **options)


def streamed(c, prompt="hi", **kw):
    return list(stream(c, prompt, toolkit=TK, **kw))[-1]["result"]


# ---- item 1: retries as the SDKs do them ---------------------------------------------


@pytest.mark.parametrize("kind", ["overloaded", "rate_limited", "server", "bad_gateway"])
@pytest.mark.parametrize("name", NAMES)
def test_each_profiles_retryable_failure_is_retried(name, kind):
    script = [{"fail": kind}, text_reply("after the failure")]
    with fake_provider(script, profile=name) as fp:
        r = run(client(fp, name), "hi")
    assert r["text"] == "after the failure" and len(fp.requests) == 2


def test_anthropic_529_overloaded_is_retried_and_named():
    seen = []
    with fake_provider([{"fail": "overloaded"}] * 3, profile="anthropic") as fp:
        c = client(fp, "anthropic", on_error=lambda info: seen.append(dict(info)))
        with pytest.raises(ProviderError) as e:
            run(c, "hi")
    assert e.value.status == 529 and len(fp.requests) == 3  # the default 2 retries applied
    assert [(i["status"], i["kind"], i["retryable"]) for i in seen] == [
        (529, "overloaded", True)
    ] * 3


@pytest.mark.parametrize("name", NAMES)
def test_a_bad_request_is_not_retried(name):
    with fake_provider([{"fail": "bad_request"}, text_reply("never")], profile=name) as fp:
        with pytest.raises(ProviderError) as e:
            run(client(fp, name), "hi")
    assert e.value.status == 400 and len(fp.requests) == 1


@pytest.mark.parametrize("status", [408, 409])
def test_408_and_409_are_retried_as_the_sdks_do(status):
    with fake_provider([{"status": status, "body": "{}"}, text_reply("ok")]) as fp:
        assert run(client(fp, "openai"), "hi")["text"] == "ok"
    assert len(fp.requests) == 2


def test_x_should_retry_overrides_the_status_both_ways():
    no = {"status": 503, "body": "{}", "headers": {"x-should-retry": "false"}}
    yes = {"status": 400, "body": "{}", "headers": {"x-should-retry": "true"}}
    with fake_provider([no, text_reply("never")]) as fp:
        with pytest.raises(ProviderError):
            run(client(fp, "openai"), "hi")
    assert len(fp.requests) == 1
    with fake_provider([yes, text_reply("retried")]) as fp:
        assert run(client(fp, "openai"), "hi")["text"] == "retried"


@pytest.mark.parametrize("streaming", [False, True])
def test_a_read_timeout_is_retried_as_the_sdks_do(streaming):
    # APITimeoutError is retried by both SDKs; the run's own deadline never is.
    script = [text_reply("too late", stall=2.0), text_reply("in time")]
    with fake_provider(script) as fp:
        c = client(fp, "openai", read_timeout_ms=300)
        r = streamed(c) if streaming else run(c, "hi")
    assert r["text"] == "in time" and len(fp.requests) == 2


def test_retry_after_ms_alone_is_honoured():
    ask_for = {"status": 429, "body": "{}", "headers": {"retry-after-ms": "400"}}
    with fake_provider([ask_for, text_reply("waited")]) as fp:
        t0 = time.monotonic()
        assert run(client(fp, "openai"), "hi")["text"] == "waited"
        assert time.monotonic() - t0 >= 0.4  # not the 1 ms backoff


def test_retry_after_ms_wins_over_retry_after():
    # Azure sends both: 300 ms, and "1" (rounded up to whole seconds).
    with fake_provider([{"fail": "rate_limited", "retry_after": 0.3}, text_reply("ok")],
                       profile="azure") as fp:  # fmt: skip
        t0 = time.monotonic()
        assert run(client(fp, "azure"), "hi")["text"] == "ok"
        waited = time.monotonic() - t0
    assert fp.requests and 0.3 <= waited < 0.9


# ---- items 1 and 2: errors inside a stream -------------------------------------------


@pytest.mark.parametrize("kind", ["overloaded", "server"])
@pytest.mark.parametrize("name", NAMES)
def test_a_stream_error_before_any_content_is_retried(name, kind):
    script = [text_reply("never shown", stream_fail=kind), text_reply("the real answer")]
    with fake_provider(script, profile=name) as fp:
        c = client(fp, name)
        r = streamed(c, conversation_id="s")
    assert r["text"] == "the real answer" and len(fp.requests) == 2
    assert "never" not in repr(conversation_store(c)["get"]("s"))


@pytest.mark.parametrize("name", NAMES)
def test_a_stream_error_after_content_is_raised_and_nothing_is_saved(name):
    script = [text_reply("a half answer that breaks", stream_fail="server", fail_after=2)]
    with fake_provider(script, profile=name) as fp:
        c = client(fp, name)
        shown = []
        with pytest.raises(ProviderError) as e:
            for event in stream(c, "hi", conversation_id="s"):
                shown.append(event)
    assert e.value.streamed and str(e.value) == "Internal server error"
    assert e.value.status == 500 and len(fp.requests) == 1 and shown
    assert conversation_store(c)["get"]("s") is None


@pytest.mark.parametrize("name", NAMES)
def test_a_stream_error_that_is_not_retryable_carries_the_providers_words(name):
    script = [text_reply("x", stream_fail="bad_request"), text_reply("never")]
    with fake_provider(script, profile=name) as fp:
        with pytest.raises(ProviderError) as e:
            streamed(client(fp, name))
    assert str(e.value) == "Bad request" and e.value.status == 400 and len(fp.requests) == 1


# ---- item 2: an error envelope in a 200 ----------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_200_holding_an_error_envelope_is_a_provider_error_and_saves_nothing(name):
    with fake_provider([{"fail_inband": "bad_gateway"}], profile=name) as fp:
        c = client(fp, name, retries=0)
        with pytest.raises(ProviderError) as e:
            run(c, "hi", conversation_id="x")
    # A code that is an HTTP status gives the status, else the error's type does.
    coded = name in ("vllm", "llama.cpp", "openrouter", "litellm")
    assert str(e.value) == "Provider returned error"
    assert e.value.status == (502 if coded else 500) and e.value.error_type != "error"
    assert conversation_store(c)["get"]("x") is None


@pytest.mark.parametrize("name", NAMES)
def test_a_200_holding_a_retryable_error_is_retried(name):
    script = [{"fail_inband": "bad_gateway"}, text_reply("second try")]
    with fake_provider(script, profile=name) as fp:
        assert run(client(fp, name), "hi")["text"] == "second try"
    assert len(fp.requests) == 2


def test_openrouters_200_error_keeps_its_code_and_message():
    body = {"error": {"code": 502, "message": "Upstream down", "metadata": {"raw": "x"}}}
    with fake_provider([{"response": body}]) as fp:
        with pytest.raises(ProviderError) as e:
            run(client(fp, "openrouter", retries=0), "hi")
    assert (str(e.value), e.value.status, e.value.code) == ("Upstream down", 502, 502)


def test_in_band_errors_under_asyncio_too():
    script = [{"fail_inband": "overloaded"}, text_reply("async answer")]
    with fake_provider(script, profile="anthropic") as fp:
        r = asyncio.run(arun(client(fp, "anthropic"), "hi"))
    assert r["text"] == "async answer" and len(fp.requests) == 2


# ---- item 3: compatible servers' streams ---------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_parallel_calls_stream_apart_on_every_profile(name):
    calls = tool_calls_reply(("weather", {"city": "Paris"}), ("weather", {"city": "Tokyo"}))
    with fake_provider([calls, text_reply("both")], profile=name) as fp:
        c = client(fp, name)
        r = streamed(c, conversation_id="w")
    assert [(t["args"], t["output"]) for t in r["tool_calls"]] == [
        ({"city": "Paris"}, "sunny in Paris"),
        ({"city": "Tokyo"}, "sunny in Tokyo"),
    ]
    assert len(fp.requests) == 2


@pytest.mark.parametrize("name", NAMES)
def test_keep_alives_and_prefixes_are_skipped_whole_and_streamed(name):
    with fake_provider([text_reply("whole"), text_reply("streamed")], profile=name) as fp:
        c = client(fp, name)
        assert run(c, "hi")["text"] == "whole"
        assert streamed(c)["text"] == "streamed"


def test_an_event_with_no_data_is_skipped():
    chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    raw = f"data:\n\ndata: {json.dumps(chunk)}\n\ndata: \n\ndata: [DONE]\n\n"
    with fake_provider([{"sse": raw}]) as fp:
        assert streamed(client(fp, "openai", retries=0))["text"] == "ok"


def test_an_anthropic_event_with_no_data_or_unknown_is_skipped():
    from toolnexus.testing.fake_provider import anthropic_stream

    events = anthropic_stream(text_reply("fine"))
    extra = [b"event: ping\ndata:\n\n", b"event: future_event\ndata: not json at all\n\n"]
    raw = b"".join([events[0], *extra, *events[1:]])
    with fake_provider([{"sse": raw}]) as fp:
        assert streamed(client(fp, "anthropic", retries=0))["text"] == "fine"


def test_a_stream_request_answered_by_a_json_error_envelope_is_an_error():
    # A gateway that answers a stream request with one JSON body (LiteLLM, BerriAI/litellm#6629).
    body = {"error": {"message": "context too long", "type": "None", "code": "400"}}
    with fake_provider([{"response": body}, text_reply("never")]) as fp:
        with pytest.raises(ProviderError) as e:
            streamed(client(fp, "litellm"))
    assert (str(e.value), e.value.status, e.value.code) == ("context too long", 400, "400")
    assert len(fp.requests) == 1


@pytest.mark.parametrize("name", ["anthropic", "vllm", "ollama"])
def test_the_async_driver_retries_stream_errors_and_splits_calls_too(name):
    calls = tool_calls_reply(("weather", {"city": "Oslo"}), ("weather", {"city": "Rome"}))
    script = [text_reply("x", stream_fail="overloaded"), calls, text_reply("done")]

    async def go(url):
        c = create_client(base_url=url, style=PROFILES[name]["style"], model="m", retry_base_ms=1)
        return [e async for e in astream(c, "hi", toolkit=TK)][-1]["result"]

    with fake_provider(script, profile=name) as fp:
        r = asyncio.run(go(fp.url))
    assert r["text"] == "done" and len(fp.requests) == 3
    assert [t["output"] for t in r["tool_calls"]] == ["sunny in Oslo", "sunny in Rome"]
