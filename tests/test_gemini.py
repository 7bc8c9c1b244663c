"""Native Gemini (style="gemini"): the recorded exchanges decode, the follow-up request the
codec builds replays what the provider needs, and the fake provider speaks Gemini whole
and streamed and refuses what the published schema refuses."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from toolnexus import ProviderError, create_client, define_tool, run, stream, toolkit
from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.wire import DIALECTS, gemini, sse
from toolnexus.core.wire.gemini_schema import UnsupportedSchemaError
from toolnexus.core.wire.translate import translate
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.validators import validate_request

EXCHANGES = Path(__file__).resolve().parent / "data" / "fixtures" / "exchanges" / "gemini"
RECORDED = sorted(p.name for p in EXCHANGES.glob("*.json"))


def _load(name: str) -> dict:
    return json.loads((EXCHANGES / name).read_text(encoding="utf-8"))


def decoded(exchange: dict):
    """Return the turn of a recorded answer, whole or streamed."""
    answer = exchange["response"]
    if "sse" not in answer:
        return gemini.parse_response(json.dumps(answer["body"]).encode())
    state, events = sse.feed(sse.start(), answer["sse"].encode())
    acc = gemini.stream_start()
    for event in [*events, *sse.end(state)]:
        acc, _ = gemini.stream_event(acc, event)
    return gemini.stream_turn(acc)


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_answer_decodes_or_is_the_providers_error(name):
    exchange = _load(name)
    assert validate_request(exchange["request"]["body"], "gemini") == []  # recorded: accepted
    if exchange["response"]["status"] >= 400:
        with pytest.raises(ProviderError) as info:
            decoded(exchange)
        error = exchange["response"]["body"]["error"]
        assert str(info.value) == error["message"] and info.value.status == error["code"]
        assert info.value.error_type == error["status"]  # Google's status: NOT_FOUND, ...
        return
    turn = decoded(exchange)
    assert turn["usage"]["total_tokens"] > 0


def test_finish_reasons_end_honestly():
    assert decoded(_load("finish_max_tokens_no_parts.json"))["end"] == "max_tokens"
    assert decoded(_load("stream_finish_max_tokens.json"))["end"] == "max_tokens"
    blocked = decoded(_load("finish_safety_blocked.json"))
    assert blocked["refusal"] and blocked["end"] is None  # a refusal, not an answer
    for reason in ("MALFORMED_FUNCTION_CALL", "OTHER", "UNEXPECTED_TOOL_CALL"):
        turn = gemini.parse_response({"candidates": [{"finishReason": reason}]})
        assert turn["end"] == "incomplete"  # never silently done
    prompt = gemini.parse_response({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})
    assert "PROHIBITED_CONTENT" in prompt["refusal"]


def test_usage_counts_thoughts_and_cached_tokens():
    u = decoded(_load("cached_content_usage.json"))["usage"]
    assert u["cache_read_tokens"] == 3512 and u["reasoning_tokens"] == 42
    assert u["completion_tokens"] == 2 + 42 and u["prompt_tokens"] == 3520


def test_a_signature_on_an_empty_last_part_is_replayed_where_it_came():
    turn = decoded(_load("stream_thinking_signature_on_empty_part.json"))
    parts = thaw(turn["message"]["parts"])
    assert parts[-1]["text"] == "" and parts[-1]["thoughtSignature"]
    assert parts[0]["thought"] is True and '"answer": 4' in turn["text"]
    body = gemini.body("m", freeze([{"role": "user", "content": "q"}, turn["message"]]), [], "", {})
    model = body["contents"][1]["parts"]
    assert model[-1] == {"text": "", "thoughtSignature": parts[-1]["thoughtSignature"]}
    assert all(p.get("thought") is not True or p.get("thoughtSignature") for p in model)


def test_the_follow_up_request_replays_the_calls_ids_and_signature():
    """The recorded follow-up sent the three calls back with ids and the first call's
    signature, then one content of functionResponses: the codec builds the same shape."""
    first, recorded = _load("function_calls_parallel.json"), _load(
        "function_responses_parallel_followup.json")  # fmt: skip
    turn = decoded(first)
    calls = turn["tool_calls"]
    assert len(calls) == 3 and len({c["id"] for c in calls}) == 3
    results = [{"output": v, "is_error": False} for v in ("cars", "penguins", "cars")]
    history = freeze([{"role": "user", "content": "go"}, turn["message"],
                      *gemini.tool_result_messages(calls, results)])  # fmt: skip
    body = thaw(gemini.body("m", history, [], "Tell three jokes.", {}))
    sent = recorded["request"]["body"]["contents"]
    assert [c["role"] for c in body["contents"]] == [c["role"] for c in sent]
    model, answers = body["contents"][1]["parts"], body["contents"][2]["parts"]
    signature = first["response"]["body"]["candidates"][0]["content"]["parts"][0]
    assert model[0]["thoughtSignature"] == signature["thoughtSignature"]
    assert [p["functionCall"]["id"] for p in model] == [a["functionResponse"]["id"]
                                                        for a in answers]  # fmt: skip
    assert [a["functionResponse"]["name"] for a in answers] == ["generate_topic"] * 3
    assert validate_request(body, "gemini") == []


@define_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("streamed", [False, True])
def test_a_run_speaks_gemini_over_http_with_the_key_in_its_header_only(streamed):
    script = [tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("three")]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, model="gemini-x", style="gemini", api_key="SECRET-K")
        r = list(stream(c, "1+2?", toolkit=toolkit(add)))[-1]["result"] if streamed else run(
            c, "1+2?", toolkit=toolkit(add))  # fmt: skip
    assert r["text"] == "three" and r["status"] == "done"
    method = "streamGenerateContent?alt=sse" if streamed else "generateContent"
    assert [q["path"] for q in fp.requests] == [f"/v1/models/gemini-x:{method}"] * 2
    for q in fp.requests:
        assert q["headers"]["x-goog-api-key"] == "SECRET-K"
        assert "SECRET-K" not in q["path"] and b"SECRET-K" not in q["raw"]
    second = fp.requests[1]["body"]["contents"]
    call = second[1]["parts"][0]
    assert call["thoughtSignature"] and second[2]["parts"][0]["functionResponse"]["id"] == (
        call["functionCall"]["id"])  # fmt: skip


def test_the_url_adds_the_version_only_when_missing():
    assert gemini.model_url("https://generativelanguage.googleapis.com", "gemini-2.5-flash") == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert gemini.model_url("http://h/v1alpha", "m").startswith("http://h/v1alpha/models/m:")


def test_the_fake_provider_refuses_what_the_schema_refuses():
    with fake_provider([text_reply("ok")]) as fp:
        url = fp.url + "/models/m:generateContent"
        ok = {"contents": [{"role": "user", "parts": [{"text": "q"}]}]}
        assert httpx.post(url, json=ok, timeout=10).status_code == 200
        for bad in ({**ok, "model": "m"}, {**ok, "temperature": 1},
                    {"contents": [{"role": "user", "parts": [{"txt": "q"}]}]}):  # fmt: skip
            resp = httpx.post(url, json=bad, timeout=10)
            assert resp.status_code == 400 and resp.json()["error"]["status"] == (
                "INVALID_ARGUMENT")  # fmt: skip


def test_a_schema_outside_geminis_subset_is_a_clear_error():
    bad = define_tool(lambda x: x, name="f", input_schema={
        "type": "object", "properties": {"x": {"type": "string"}},
        "patternProperties": {"^y": {"type": "string"}}})  # fmt: skip
    with fake_provider([text_reply("ok")]) as fp:
        c = create_client(base_url=fp.url, model="m", style="gemini", api_key="k")
        with pytest.raises(UnsupportedSchemaError, match="patternProperties"):
            run(c, "q", toolkit=toolkit(bad))
    assert fp.requests == []  # refused before anything was sent


def test_thoughts_and_signatures_never_reach_another_dialect():
    turn = decoded(_load("thinking_thought_parts.json"))
    history = freeze([{"role": "user", "content": "q"}, turn["message"]])
    thought = next(p["text"] for p in turn["message"]["parts"] if p.get("thought"))
    for target in (d for d in DIALECTS if d != "gemini"):  # every other row
        out = json.dumps(thaw(translate(history, target).messages))
        assert thought[:40] not in out and "thoughtSignature" not in out
    assert translate(history, "gemini").messages == history  # home: as it came
