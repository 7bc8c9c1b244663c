"""The copyable chat example answers every bad input with a 4xx of its error table.

Named cases (each answered 500 in the previous example) and a hypothesis property over
the routes, over real loopback HTTP to the app served in this process, on PostgreSQL.
"""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from chat_service_kit import (  # noqa: E402
    _postgres,
    base_env,
    exchanges,
    in_process,
    model,
    serving,
)

from toolnexus.testing import fake_provider, text_reply  # noqa: E402

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def provider():
    with fake_provider(model, delay=0.03) as fp:
        yield fp


def test_bad_input_is_a_clear_4xx_and_sse_history_delete_work(provider, tmp_path):
    env = {**base_env(provider), "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}
    with serving(env) as base, httpx.Client(base_url=base, timeout=10) as http:
        bad = [
            ("POST", "/conversations//messages", {"json": {"text": "x"}}, 400, "bad_id"),
            ("POST", "/conversations/" + "a" * 129 + "/messages", {"json": {"text": "x"}},
             400, "bad_id"),
            ("POST", "/conversations/a%20b/messages", {"json": {"text": "x"}}, 400, "bad_id"),
            ("POST", "/conversations/a%2Fb/messages", {"json": {"text": "x"}}, 400, "bad_id"),
            ("POST", "/conversations/u/messages", {"content": b"{not json", "headers": JSON}, 400,
             "bad_json"),
            ("POST", "/conversations/u/messages", {"json": ["text"]}, 400, "bad_json"),
            ("POST", "/conversations/u/messages", {"json": {}}, 422, "missing_text"),
            ("POST", "/conversations/u/messages", {"json": {"text": " "}}, 422, "bad_text"),
            ("POST", "/conversations/u/messages", {"json": {"text": 7}}, 422, "bad_text"),
            ("POST", "/conversations/u/messages", {"content": b"x" * 70_000, "headers": JSON},
             413, "too_large"),
            ("POST", "/conversations/u/messages", {"content": b'{"text": "x"}'}, 415, "not_json"),
            ("POST", "/conversations/u/messages",
             {"content": b'{"text": "x"}', "headers": {"content-type": "text/plain"}}, 415,
             "not_json"),
            ("GET", "/conversations/u/history?since=2026-13-01", {}, 400, "bad_date"),
            ("GET", "/conversations/u/history?until=yesterdayish", {}, 400, "bad_date"),
            ("GET", "/conversations/u/history?limit=0", {}, 400, "bad_limit"),
            ("GET", "/conversations/u/history?contain=x", {}, 400, "bad_query"),
            ("GET", "/conversations/", {}, 400, "bad_id"),
            ("GET", "/conversations/nobody", {}, 404, "not_found"),
            ("GET", "/nowhere", {}, 404, "not_found"),
            ("PUT", "/health", {}, 405, "method_not_allowed"),
        ]  # fmt: skip
        for method, path, kw, status, code in bad:
            r = http.request(method, path, **kw)
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), (path, r.text)
            assert "Traceback" not in r.text

        assert http.post("/conversations/u/messages", json={"text": "hello"}).json()["text"] == (
            "re: hello"
        )
        with http.stream("POST", "/conversations/u/messages", json={"text": "sum #add"},
                         headers={"accept": "text/event-stream"}) as r:  # fmt: skip
            assert r.headers["content-type"].startswith("text/event-stream")
            kinds = [b.split("\n")[0] for b in r.read().decode().split("\n\n") if b]
        assert {"event: tool_call", "event: tool_result", "event: text"} <= set(kinds)
        assert kinds[-1] == "event: done"
        transcript = http.get("/conversations/u").json()["messages"]
        assert exchanges(transcript) == [("hello", "re: hello"), ("sum #add", "re: sum #add = 5")]
        hits = http.get("/conversations/u/history", params={"contains": "SUM", "since": "today"})
        assert [e["text"] for e in hits.json()["entries"]] == ["sum #add", "re: sum #add = 5"]
        assert http.get("/conversations/u/history?until=2000-01-01").json()["entries"] == []
        assert (
            http.get("/conversations/u/history?limit=1").json()["entries"][0]["direction"] == "ai"
        )

        gone = http.delete("/conversations/u").json()
        assert gone == {"conversation_id": "u", "deleted": True, "log_entries_removed": 4}
        assert http.get("/conversations/u").status_code == 404
        assert http.get("/conversations/u/history").json()["entries"] == []
        assert http.get("/health").json()["status"] == "ok"


# ---- every bad input is a 4xx: named cases and a property over the routes -------------

SECRET = "sk-test-never-shown-0123456789"


def secret_model(body: dict, dialect: str) -> dict:
    """Like `model`; "#leak" asks for the tool, then fails with the key in the error body."""
    messages = body["messages"]
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if "#leak" in user and messages[-1]["role"] == "tool":
        return {"status": 500, "body": json.dumps({"error": f"bad key {SECRET}"})}
    if "#leak" in user:
        return {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 1}}]}
    return model(body, dialect)


def assert_clean(r, allowed: set[int] = frozenset({200})) -> None:
    """A response is an answer or a JSON error of the table: no 500 but store_corrupt."""
    assert "Traceback" not in r.text and SECRET not in r.text, r.text
    if r.status_code in allowed:
        return
    code = r.json()["error"]["code"]
    assert r.status_code != 500 or code == "store_corrupt", (r.status_code, r.text)
    assert r.status_code < 500 or code in {"store_unavailable", "busy"}, (r.status_code, r.text)


@pytest.mark.parametrize(
    "method, path, body, status, code",
    [
        ("GET", "/conversations/u/history?since=0001-01-01T00:00%2B05:00", None, 400, "bad_date"),
        ("GET", "/conversations/u/history?until=9999-12-31T23:59:59-05:00", None, 400, "bad_date"),
        ("GET", "/conversations/u/history?limit=%C2%B2", None, 400, "bad_limit"),
        ("GET", "/conversations/u/history?limit=%D9%A3", None, 400, "bad_limit"),
        ("GET", "/conversations/u/history?contains=a%00b", None, 400, "bad_query"),
        ("POST", "/conversations/u/messages", b"[" * 60_000, 400, "bad_json"),
        ("POST", "/conversations/u/messages", b'{"text": "' + b"[" * 30_000 + b'"}', 200, None),
        ("POST", "/conversations/u/messages", b'{"a":' * 9_000 + b"1" + b"}" * 9_000, 400,
         "bad_json"),
        ("POST", "/conversations/u/messages", b'{"text": "a\\ud800b"}', 422, "bad_text"),
        ("POST", "/conversations/u/messages", b'{"text": "a\\u0000b"}', 422, "bad_text"),
    ],
)  # fmt: skip
def test_the_inputs_that_gave_500s_are_a_clear_4xx(
    method, path, body, status, code, provider, postgres_dsn, unique, tmp_path, monkeypatch
):
    """On PostgreSQL: out-of-range dates (OverflowError), non-ASCII digits (int() fails),
    deep JSON (RecursionError), lone surrogates (UnicodeEncodeError) and NUL (DataError)
    each answered 500 in the previous example; each is now a 4xx of the table."""
    env, _, cleanup = _postgres(postgres_dsn, unique, tmp_path)
    try:
        with in_process({**base_env(provider), **env}, monkeypatch) as http:
            r = http.request(method, path, content=body, headers=JSON)
            assert r.status_code == status, r.text
            if code is not None:
                assert r.json()["error"]["code"] == code
            assert_clean(r)
    finally:
        cleanup()


def test_no_input_gets_a_500_or_a_traceback(provider, postgres_dsn, unique, tmp_path, monkeypatch):
    """Any id, any query values and any body bytes, on every route and method, on
    PostgreSQL (which refuses NUL): an answer or a JSON error of the table; never a 500
    (but store_corrupt) nor a traceback."""
    from urllib.parse import quote, urlencode

    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    # Mostly valid ids and GETs of /history, so most examples get past the id check to
    # the query; any text as an id, and every route and method, all the same.
    valid = st.from_regex(r"[a-z0-9._:@-]{1,8}", fullmatch=True)
    ids = st.one_of(valid, valid, st.text(max_size=140))
    hard = st.sampled_from(["today", "0001-01-01T00:00+05:00", "9999-12-31T23:59:59-05:00",
                            "²", "a\x00b", "\ud800", "2026-13-01", " "])  # fmt: skip
    values = st.one_of(hard, hard, hard, st.text(max_size=40), st.integers(-5, 5000).map(str))
    queries = st.fixed_dictionaries(
        {}, optional=dict.fromkeys(["contains", "since", "until", "limit", "x"], values)
    )
    json_text = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)),
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.sampled_from(["text", "a"]), inner, max_size=2)),
        max_leaves=8,
    ).map(json.dumps)  # fmt: skip
    texts = st.text(max_size=30).map(lambda t: json.dumps({"text": t}).encode())
    bodies = st.one_of(st.binary(max_size=200), json_text.map(str.encode), texts)
    routes = st.sampled_from(["/history", "/history", "/messages", ""])
    methods = st.sampled_from(["GET", "GET", "POST", "DELETE", "PUT"])
    env, _, cleanup = _postgres(postgres_dsn, unique, tmp_path)
    try:
        with in_process({**base_env(provider), **env}, monkeypatch) as http:
            many = settings(max_examples=max(30, settings.default.max_examples), deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])  # fmt: skip

            def request(method: str, path: str, query: dict, body: bytes) -> None:
                query = urlencode(query, errors="surrogatepass")  # a lone surrogate: as its bytes
                assert_clean(http.request(method, path + "?" + query, content=body, headers=JSON))

            @many
            @given(methods, ids, routes, queries, bodies)
            @example("GET", ".", "", {}, b"")  # httpx sends "/conversations": no redirect
            def any_request(method, id, route, query, body):
                request(method, "/conversations/" + quote(id, safe="") + route, query, body)

            # The cases first (hypothesis seldom draws a list's far end), then any.
            @many
            @given(queries)
            @example({"since": "0001-01-01T00:00+05:00"})
            @example({"until": "9999-12-31T23:59:59-05:00"})
            @example({"limit": "²"})
            @example({"contains": "a\x00b"})
            @example({"contains": "\ud800"})
            def any_history_query(query):
                request("GET", "/conversations/u/history", query, b"")

            @many
            @given(bodies)
            @example(b"[" * 5000)
            @example(b'{"text": ' + b"[" * 5000 + b"}")
            @example(b'{"text": "\\ud800"}')
            @example(b'{"text": "\\u0000"}')
            def any_message_body(body):
                request("POST", "/conversations/u/messages", {}, body)

            any_request()
            any_history_query()
            any_message_body()
    finally:
        cleanup()


def test_the_sse_error_event_never_shows_the_key(tmp_path, monkeypatch):
    """A provider failing mid-stream with the key in its error body: the error event says
    what failed, without the key (scrubbed by the library and again by the app)."""
    with fake_provider(secret_model) as fp:
        env = {**base_env(fp), "OPENAI_API_KEY": SECRET, "TOOLNEXUS_RETRIES": "0",
               "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}  # fmt: skip
        with in_process(env, monkeypatch) as http:
            headers = {"accept": "text/event-stream"}
            r = http.post("/conversations/s/messages", json={"text": "x #leak"}, headers=headers)
    assert r.status_code == 200 and "event: tool_result" in r.text
    assert "event: error" in r.text and '"provider_error"' in r.text
    assert SECRET not in r.text and "Traceback" not in r.text


def test_the_service_speaks_responses_when_toolnexus_style_says_so(tmp_path, monkeypatch):
    with fake_provider([text_reply("hello from /responses"), text_reply("again")]) as fp:
        env = {**base_env(fp), "TOOLNEXUS_STYLE": "responses",
               "TOOLNEXUS_DATABASE": f"sqlite:{tmp_path / 'chat.db'}"}  # fmt: skip
        with in_process(env, monkeypatch) as http:
            first = http.post("/conversations/r/messages", json={"text": "hi"})
            second = http.post("/conversations/r/messages", json={"text": "more"})
    assert first.status_code == second.status_code == 200
    assert "hello from /responses" in first.text and "again" in second.text
    assert [q["path"] for q in fp.requests] == ["/v1/responses"] * 2
    users = [i.get("content") for i in fp.requests[1]["body"]["input"] if i.get("role") == "user"]
    assert users == ["hi", "more"]
