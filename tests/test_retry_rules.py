"""The SDKs' retry rules, in-band error envelopes and repeated tool-call indexes, as pure
functions (hypothesis); the loop over real servers is in test_provider_profiles.py."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core import retry as r
from toolnexus.core.errors import ProviderError, scrub_error
from toolnexus.core.wire import DIALECTS, openai, sse
from toolnexus.core.wire.inband import ERROR_TYPE_STATUS, envelope, inband_error, status_of
from toolnexus.testing.profiles import FAILURES, PROFILES, expand

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)

# ---- which statuses (openai-python 3.3.1 / anthropic-sdk-python 0.121.0 _should_retry) --


@given(st.integers(100, 999))
def test_the_sdks_statuses_are_retried_and_are_the_providers_fault(status):
    expected = status in (408, 409, 429) or status >= 500
    assert r.retryable_status(status) == r.retryable(status) == expected
    assert r.provider_fault(ProviderError("x", status=status)) == expected


@given(st.integers(100, 599), st.sampled_from(["true", "false", "True", "1", "", "yes"]))
def test_x_should_retry_decides_first_and_only_its_exact_values_count(status, said):
    e = ProviderError("x", status=status, headers={"X-Should-Retry": said})
    expected = {"true": True, "false": False}.get(said, r.retryable_status(status))
    assert r.retryable(error=e) == expected
    assert r.error_info(e, 1)["retryable"] == expected


def test_kinds_name_each_class_of_failure():
    statuses = (400, 401, 403, 404, 408, 409, 429, 500, 503, 529)
    kinds = [r.failure_kind(ProviderError("x", status=s)) for s in statuses]
    assert kinds == ["request", "auth", "auth", "request", "timeout", "conflict",
                     "rate_limited", "server", "server", "overloaded"]  # fmt: skip
    assert r.failure_kind(ProviderError("x", network=True)) == "network"
    assert r.failure_kind(ProviderError("x")) == "unknown"


# ---- retry-after-ms before retry-after ------------------------------------------------


@given(st.integers(0, 10**9))
def test_retry_after_ms_is_milliseconds(ms):
    assert r.parse_retry_after_ms(str(ms)) == ms / 1000
    assert r.retry_after({"Retry-After-Ms": str(ms), "retry-after": "7"}) == ms / 1000


@given(st.text(max_size=40))
def test_an_unreadable_retry_after_ms_falls_back_to_retry_after(text):
    ms = r.parse_retry_after_ms(text)
    assert ms is None or ms >= 0
    if ms is None:
        assert r.retry_after({"retry-after-ms": text, "retry-after": "7"}) == 7


def test_plan_waits_what_retry_after_ms_asks():
    e = ProviderError("x", status=429, headers={"retry-after-ms": "1500"})
    assert r.plan(e, 1, retries=2, base_ms=1, rng=lambda: 0.0) == 1.5


# ---- in-band errors -------------------------------------------------------------------


@given(json_values)
def test_envelopes_never_raise_and_only_errors_are_errors(value):
    err = inband_error(value)
    assert (err is None) == (envelope(value) is None)
    if err is not None:
        assert isinstance(err, ProviderError) and isinstance(err, ValueError)
        assert err.status is None or 100 <= err.status <= 599


@given(st.integers(100, 599), st.booleans())
def test_an_http_code_is_the_status_as_number_or_text(code, as_text):
    given_code = str(code) if as_text else code
    e = inband_error({"error": {"code": given_code, "message": "m"}})
    assert (e.status, e.code, str(e)) == (code, given_code, "m")


@pytest.mark.parametrize("kind", sorted(ERROR_TYPE_STATUS))
def test_a_documented_type_gives_its_status(kind):
    e = inband_error({"type": "error", "error": {"type": kind, "message": "m"}})
    assert (e.status, e.error_type) == (ERROR_TYPE_STATUS[kind], kind)
    assert status_of(None, kind) == ERROR_TYPE_STATUS[kind]


def test_answers_are_not_envelopes():
    assert envelope({"object": "response", "error": None, "output": []}) is None
    assert envelope({"object": "chat.completion.chunk", "choices": []}) is None
    assert envelope({"type": "message", "content": []}) is None


def test_the_provider_fields_survive_scrubbing():
    e = inband_error({"error": {"code": "sk-secret", "type": "t sk-secret", "message": "m"}})
    out = scrub_error(e, ["sk-secret"])
    assert (out.code, out.error_type) == ("***", "t ***")


def test_llamacpps_error_field_is_an_error_event():
    events = sse.decode(b'error: {"code":500,"message":"boom"}\n\ndata: [DONE]\n\n')
    assert [e["event"] for e in events] == ["error", "message"]
    with pytest.raises(ProviderError, match="boom") as e:
        openai.stream_event(openai.stream_start(), events[0])
    assert e.value.status == 500


# ---- tool calls told apart by id when an index repeats --------------------------------

calls_st = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=3), st.integers(1, 6)
    ),  # fmt: skip
    min_size=1,
    max_size=4,
)


def _chunks(calls, repeat: bool) -> list[dict]:
    out = []
    for i, (args, size) in enumerate(calls):
        text = json.dumps(args)
        index = 0 if repeat else i
        first = {"index": index, "id": f"call_{i}", "type": "function",
                 "function": {"name": "f", "arguments": ""}}  # fmt: skip
        out.append(first)
        out += [{"index": index, "function": {"arguments": text[k : k + size]}}
                for k in range(0, len(text), size)]  # fmt: skip
    return out


@given(calls_st, st.booleans())
def test_calls_come_apart_whether_their_index_counts_or_repeats(calls, repeat):
    acc = openai.stream_start()
    for fragment in _chunks(calls, repeat):
        chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}
        acc, _ = openai.stream_event(acc, {"event": "message", "data": json.dumps(chunk)})
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    acc, _ = openai.stream_event(acc, {"event": "message", "data": json.dumps(done)})
    turn = openai.stream_turn(acc)
    assert [(c["id"], json.loads(c["arguments"])) for c in turn["tool_calls"]] == [
        (f"call_{i}", args) for i, (args, _) in enumerate(calls)
    ]


def test_an_error_status_keeps_the_providers_type_and_code_scrubbed():
    from toolnexus.drivers.transport import Endpoint

    ep = Endpoint("http://h/v1/messages", {}, None, "sk-secret-key-123")
    body = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    e = ep.status_error(529, httpx.Headers({"x-should-retry": "true"}), body)
    assert (e.status, e.error_type, e.code) == (529, "overloaded_error", None)
    e = ep.status_error(429, httpx.Headers(), b'{"error": {"code": "sk-secret-key-123"}}')
    assert e.code == "***"
    assert ep.status_error(502, httpx.Headers(), b"<html>").error_type is None


@given(json_values, json_values)
def test_status_of_never_raises_and_names_only_http_statuses(code, kind):
    status = status_of(code, kind)
    assert status is None or 100 <= status <= 599


def test_a_text_error_keeps_its_type():
    e = inband_error({"error": "Input validation error", "error_type": "validation"})
    assert (str(e), e.error_type, e.status) == ("Input validation error", "validation", None)


# ---- every profile's shapes read back (testing.profiles) ----------------------------


@pytest.mark.parametrize("kind", sorted(FAILURES))
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profiles_errors_read_back_as_their_status(name, kind):
    profile = PROFILES[name]
    codec = DIALECTS[profile["style"]]
    failed = expand({"fail": kind}, name, profile["style"], lambda r: None)
    status, message = failed["status"], FAILURES[kind][3]
    inband = expand({"fail_inband": kind}, name, profile["style"], lambda r: None)
    with pytest.raises(ProviderError) as e:
        codec.parse_response(json.dumps(inband["response"]).encode())
    expected = r.retryable_status(status)
    assert str(e.value) == message and r.retryable_status(e.value.status) == expected
    plain = [b"data: {}\n\n"] if profile["style"] == "openai" else [b"event: ping\ndata: {}\n\n"]
    frames = expand({"stream_fail": kind}, name, profile["style"], lambda r: plain)["sse_events"]
    acc = codec.stream_start()
    with pytest.raises(ProviderError) as e:
        for event in sse.decode(b"".join(frames)):
            acc, _ = codec.stream_event(acc, event)
    assert str(e.value) == message and r.retryable(error=e.value) == expected
