"""Secrets in every form and every exit (issue 39, item 5), over loopback HTTP.

A key is masked before any span records a tool's result; header secrets given with
`headers=` never follow a redirect to another origin and are masked like the key; a key
the model spells out reaches no result, transcript or log; base64 and hex copies of a
secret are masked too; a base URL's userinfo is sent as a header and never printed; and
without content capture, no model or provider text reaches a span.
"""

from __future__ import annotations

import base64
import json
import logging
import traceback

import pytest
from edge_servers import EdgeServer, model_answer
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import ProviderError, create_client, define_tool, run, stream, toolkit
from toolnexus.core.secrets import encodings, scrubber
from toolnexus.history import sqlite_log
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

KEY = "sk-proj-never-anywhere-0123456789abcdef"
B64 = base64.b64encode(f"Authorization: Bearer {KEY}".encode()).decode()
HEX = KEY.encode().hex()


def _client(url, **kw):
    return create_client(base_url=url, model="m", api_key=KEY, retries=0, **kw)


def _leaks(text: str) -> list[str]:
    """Which forms of the key `text` still holds (a 12-character run of any counts)."""
    forms = {"key": KEY, "base64": B64[12:40], "hex": HEX[:24]}
    return [name for name, form in forms.items() if form in text or KEY[8:20] in text]


@define_tool
def echo_env(what: str) -> str:
    """Return what an environment dump would: the key, plain and encoded."""
    return f"{what}: OPENAI_API_KEY={KEY} header={B64} hex={HEX}"


# ---- spans: the result masked before the span records it --------------------------------


@pytest.fixture
def spans(monkeypatch):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolnexus import otel

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel._api()
    monkeypatch.setitem(otel._state, "tracer", provider.get_tracer("toolnexus"))
    monkeypatch.delenv(otel.CONTENT_ENV, raising=False)
    yield exporter.get_finished_spans
    provider.shutdown()


def _span_text(found) -> str:
    parts = []
    for s in found:
        parts.append(json.dumps(dict(s.attributes or {}), default=str))
        parts.extend(json.dumps(dict(e.attributes or {}), default=str) for e in s.events)
        parts.append(str(s.status.description))
    return "\n".join(parts)


def test_a_tool_result_holding_the_key_is_masked_before_its_span(spans, monkeypatch):
    from toolnexus import otel

    monkeypatch.setenv(otel.CONTENT_ENV, "true")
    script = [tool_calls_reply(("echo_env", {"what": "env"})), text_reply("done")]
    with fake_provider(script) as fp, _client(fp.url) as c:
        r = run(c, "dump", toolkit=toolkit(echo_env))
    assert "***" in r["tool_calls"][0]["output"] and _leaks(r["tool_calls"][0]["output"]) == []
    text = _span_text(spans())
    assert "gen_ai.tool.call.result" in text and "***" in text
    assert _leaks(text) == []


def test_without_content_capture_no_provider_or_model_text_reaches_a_span(spans):
    private = "PRIVATE-PROMPT-TEXT-4711"

    def echo_back(req):  # a provider that quotes the request in its error
        return (
            400,
            {"content-type": "application/json"},
            json.dumps(
                {"error": {"message": f"bad request: {req['json']['messages'][-1]['content']}"}}
            ).encode(),
        )

    with EdgeServer(echo_back) as server, _client(server.url) as c:
        with pytest.raises(ProviderError) as info:
            run(c, f"my private words {private}")
    assert private in str(info.value)  # the error itself is the caller's to see
    text = _span_text(spans())
    assert "exception" in text and "ProviderError" in text
    assert private not in text


# ---- headers= secrets: never to another origin, masked like the key ------------------


def _redirected(headers: dict, **kw) -> dict:
    """Return the headers a 307 to another origin (another port) arrived with."""
    with EdgeServer(model_answer("moved")) as other:

        def moved(req):
            return 307, {"location": other.url + "/chat/completions"}, b""

        with EdgeServer(moved) as first, _client(first.url, headers=headers, **kw) as c:
            assert run(c, "hi")["text"] == "moved"
    assert {k.lower() for k, _ in first.requests[0]["headers"]} >= {k.lower() for k in headers}
    return {k.lower(): v for k, v in other.requests[0]["headers"]}


def test_header_secrets_do_not_follow_a_redirect_to_another_origin():
    headers = {"X-Gateway-Token": "gw-token-value-0123456789", "X-Portkey-Api-Key": "pk-01234567",
               "X-Trace": "t-1"}  # fmt: skip
    sent = _redirected(headers)
    assert "x-gateway-token" not in sent and "x-portkey-api-key" not in sent
    assert "authorization" not in sent and sent["x-trace"] == "t-1"


def test_secret_headers_names_more_headers_that_stay_home():
    sent = _redirected({"X-Tenant": "custom-credential-0123456789"}, secret_headers=["x-tenant"])
    assert "x-tenant" not in sent


def test_a_header_secret_echoed_in_an_error_is_masked():
    token = "gw-token-value-0123456789"

    def refuse(req):
        return (
            401,
            {"content-type": "application/json"},
            json.dumps(
                {"error": {"message": f"invalid gateway token {token} for key {KEY}"}}
            ).encode(),
        )

    with EdgeServer(refuse) as server, _client(server.url, headers={"X-Api-Token": token}) as c:
        with pytest.raises(ProviderError) as info:
            run(c, "hi")
    shown = str(info.value) + "".join(traceback.format_exception(info.value))
    assert "invalid gateway token ***" in str(info.value)
    assert token not in shown and KEY not in shown


@pytest.mark.parametrize("bad", ["x-key", [1], [""]])
def test_secret_headers_must_name_headers(bad):
    with pytest.raises(ValueError, match="secret_headers"):
        _client("http://127.0.0.1:9/v1", secret_headers=bad)


# ---- the model spells out the key -------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
def test_a_key_the_model_spells_out_reaches_no_result_transcript_or_log(tmp_path, streamed):
    store, log = in_memory_store(), sqlite_log(tmp_path / "log.db")
    answer = f"Sure, the key is {KEY} (base64 {B64})."
    with fake_provider([text_reply(answer)]) as fp:
        with _client(fp.url, store=store, message_log=log) as c:
            if streamed:
                # The deltas shown as they come are masked one by one: a key split over
                # two of them is masked in the result, the transcript and the log.
                r = list(stream(c, "what is the key?", id="u"))[-1]["result"]
            else:
                r = run(c, "what is the key?", id="u")
    assert r["text"].startswith("Sure, the key is ***") and _leaks(r["text"]) == []
    assert _leaks(json.dumps([dict(m) for m in store["get"]("u")], default=str)) == []
    assert _leaks(" ".join(e["text"] for e in log["query"]())) == []
    log["close"]()


@pytest.mark.parametrize("streamed", [False, True])
def test_a_key_the_model_writes_only_in_a_tool_call_reaches_no_result_or_transcript(streamed):
    """The quick look for a secret reads the strings inside vectors too (a turn's tool
    calls are a pvector): a key in a call's arguments alone was kept as it came."""
    store = in_memory_store()
    script = [tool_calls_reply(("note", {"what": KEY})), text_reply("done")]

    @define_tool
    def note(what: str) -> str:
        """Note something."""
        return "noted"

    with fake_provider(script) as fp, _client(fp.url, store=store) as c:
        if streamed:
            r = list(stream(c, "q", toolkit=toolkit(note), id="u"))[-1]["result"]
        else:
            r = run(c, "q", toolkit=toolkit(note), id="u")
    assert _leaks(json.dumps([dict(m) for m in r["messages"]], default=str)) == []
    assert _leaks(json.dumps([dict(m) for m in store["get"]("u")], default=str)) == []


# ---- encoded copies in a tool's answer ----------------------------------------------------


def test_base64_and_hex_copies_in_a_tool_answer_reach_neither_model_nor_store():
    store = in_memory_store()
    script = [tool_calls_reply(("echo_env", {"what": "env"})), text_reply("done")]
    with fake_provider(script) as fp, _client(fp.url, store=store) as c:
        r = run(c, "dump", toolkit=toolkit(echo_env), id="t")
    output = r["tool_calls"][0]["output"]
    assert output.count("***") >= 3 and _leaks(output) == []
    assert _leaks(json.dumps(fp.requests[1]["body"])) == []  # what the model read next
    assert _leaks(json.dumps([dict(m) for m in store["get"]("t")], default=str)) == []


secrets = st.text(st.characters(codec="utf-8"), min_size=12, max_size=60)


@given(secrets, st.binary(max_size=8), st.binary(max_size=8))
def test_every_alignment_of_a_base64_copy_is_masked(secret, before, after):
    raw = before + secret.encode("utf-8", "surrogatepass") + after
    scrub = scrubber([secret])
    for encoded in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        out = scrub(encoded)
        assert "***" in out
        assert not any(form[:16] in out for form in encodings(secret))
    assert "***" in scrub(raw.hex()) and secret.encode().hex() not in scrub(raw.hex())


@given(secrets)
def test_a_short_secret_has_no_encoded_forms_and_a_long_one_only_long_ones(secret):
    assert encodings(secret[:11]) == ()
    assert all(len(f) >= 14 for f in encodings(secret))


# ---- a base URL's userinfo ------------------------------------------------------------------


def test_userinfo_is_a_header_and_never_in_a_log_line_or_traceback(caplog):
    def refuse(req):
        return 401, {"content-type": "application/json"}, b'{"error": {"message": "no"}}'

    password = "s3cr3t-userinfo-pass"
    with EdgeServer(refuse) as server:
        base = f"http://gw-user:{password}@127.0.0.1:{server.port}/v1"
        with caplog.at_level(logging.DEBUG), _client(base) as c:
            with pytest.raises(ProviderError) as refused:
                run(c, "hi")
        closed = f"http://gw-user:{password}@127.0.0.1:{_closed_port()}/v1"
        with caplog.at_level(logging.DEBUG), _client(closed) as c:
            with pytest.raises(ProviderError) as unreachable:
                run(c, "hi")
    assert any("HTTP Request:" in r.getMessage() for r in caplog.records)  # httpx's line
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert password not in logged and "gw-user" not in logged
    for e in (refused.value, unreachable.value):
        shown = "".join(traceback.format_exception(e))
        assert password not in shown and "gw-user" not in shown
    sent = [v for k, v in server.requests[0]["headers"] if k.lower() == "authorization"]
    assert sent == ["Basic " + base64.b64encode(f"gw-user:{password}".encode()).decode()]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@given(secrets, st.lists(st.one_of(st.text(max_size=12), st.sampled_from(["SECRET", "B64", "HEX"])),
                          max_size=6))  # fmt: skip
def test_the_quick_look_finds_what_the_full_scan_finds(secret, parts):
    """A text without escapes skips the escape-aware scan when it holds no piece of a
    secret: that shortcut masks exactly what the full scan (forced by a line break at
    the end, which changes no finding) masks."""
    forms = {"SECRET": secret, "B64": base64.b64encode(secret.encode()).decode(),
             "HEX": secret.encode().hex()}  # fmt: skip
    text = "".join(forms.get(p, p) for p in parts)
    scrub = scrubber([secret])
    assert scrub(text) + "\n" == scrub(text + "\n")
