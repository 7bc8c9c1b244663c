"""HTTP tools against a real loopback HTTP server (and their pure request planning)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import create_client, execute, http_tool, run, toolkit
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.http_tool import expand_env, plan_request
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

ALL = sorted(_REGISTRY)  # every row of the dialect registry

SECRET = "tok-0123456789-secret"


class Echo(BaseHTTPRequestHandler):
    """Answers every request with what it received; /status/N answers N; /slow waits."""

    def log_message(self, *args):
        pass

    def _answer(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        parts = urlsplit(self.path)
        if parts.path.startswith("/status/"):
            code = int(parts.path.rsplit("/", 1)[1])
            return self._send(code, f"nope: {self.headers.get('authorization')}".encode())
        if parts.path == "/slow":
            time.sleep(0.5)
        seen = {
            "method": self.command,
            "path": parts.path,
            "query": parse_qs(parts.query),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": raw.decode(),
        }
        self._send(200, json.dumps(seen).encode())

    def _send(self, code, payload):
        self.send_response(code)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def call(t, args):
    return t["execute"](args)


def test_get_fills_placeholders_and_sends_the_rest_as_query(server):
    props = {
        "user": {"type": "string"},
        "repo": {"type": "string"},
        "page": {"type": "integer"},
        "tags": {"type": "array"},
        "on": {"type": "boolean"},
    }
    t = http_tool(name="repo", description="A repo.", method="get",
                  url=server + "/users/{user}/repos/{repo}", allow_private=True,
                  input_schema={"type": "object", "properties": props})  # fmt: skip
    r = call(t, {"user": "a b/c", "repo": "x?y", "page": 2, "tags": ["p", "q"], "on": True})
    assert not r["is_error"] and r["metadata"]["status"] == 200 and t["source"] == "http"
    seen = json.loads(r["output"])
    assert seen["method"] == "GET" and seen["path"] == "/users/a%20b%2Fc/repos/x%3Fy"
    assert seen["query"] == {"page": ["2"], "tags": ["p", "q"], "on": ["true"]}
    assert seen["body"] == ""


def test_post_sends_json_without_the_placeholders_and_named_query_args(server):
    props = {k: {} for k in ("kind", "title", "n", "dry_run")}
    t = http_tool(name="create", description="Create.", method="POST", allow_private=True,
                  url=server + "/items/{kind}", input_schema={"properties": props},
                  query=["dry_run"])  # fmt: skip
    seen = json.loads(
        call(t, {"kind": "book", "title": "Dune", "n": [1, 2], "dry_run": False})["output"]
    )
    assert seen["path"] == "/items/book" and seen["query"] == {"dry_run": ["false"]}
    assert json.loads(seen["body"]) == {"title": "Dune", "n": [1, 2]}
    assert seen["headers"]["content-type"] == "application/json"


def test_form_body(server):
    t = http_tool(name="f", description="", method="PUT", url=server + "/f",
                  input_schema={"properties": {"a": {}, "b": {}}}, body="form",
                  allow_private=True)  # fmt: skip
    seen = json.loads(call(t, {"a": "1 2", "b": 3})["output"])
    assert seen["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert parse_qs(seen["body"]) == {"a": ["1 2"], "b": ["3"]}


def test_env_headers_are_expanded_at_call_time_and_never_shown(server, monkeypatch):
    t = http_tool(name="auth", description="", method="GET", url=server + "/echo",
                  input_schema=None, headers={"Authorization": "Bearer ${HT_TOKEN}"},
                  allow_private=True)  # fmt: skip
    missing = call(t, {})
    assert missing["is_error"] and "HT_TOKEN is not set" in missing["output"]
    monkeypatch.setenv("HT_TOKEN", SECRET)
    ok = call(t, {})
    assert not ok["is_error"] and SECRET not in ok["output"]  # the echo is masked
    assert json.loads(ok["output"])["headers"]["authorization"] == "Bearer ***"
    assert SECRET not in repr(t) and "${HT_TOKEN}" not in repr(t)


def test_non_2xx_is_an_error_result_with_status_and_a_bounded_masked_body(server, monkeypatch):
    monkeypatch.setenv("HT_TOKEN", SECRET)
    t = http_tool(name="s", description="", method="GET", url=server + "/status/{code}",
                  input_schema=None, headers={"Authorization": "${HT_TOKEN}"},
                  allow_private=True)  # fmt: skip
    r = call(t, {"code": "404"})
    assert r["is_error"] and r["output"] == "HTTP 404: nope: ***"
    assert r["metadata"]["status"] == 404
    assert call(t, {"code": "204"})["is_error"] is False


def test_unreachable_timeout_and_missing_placeholder_are_error_results(server):
    dead = http_tool(name="d", description="", method="GET", url="http://127.0.0.1:9/x",
                     input_schema=None, timeout_ms=2000, allow_private=True)  # fmt: skip
    r = call(dead, {})
    assert r["is_error"] and r["output"].startswith("GET http://127.0.0.1:9/x failed: ConnectError")
    slow = http_tool(name="s", description="", method="GET", url=server + "/slow",
                     input_schema=None, timeout_ms=100, allow_private=True)  # fmt: skip
    assert "Timeout" in call(slow, {})["output"]
    props = {"a": {"type": "integer"}, "b": {"type": "string"}}
    t = http_tool(name="p", description="", method="GET", url=server + "/{a}/{b}",
                  input_schema={"properties": props}, allow_private=True)  # fmt: skip
    assert call(t, {"a": 1}) == call(t, {"a": 1}) and call(t, {"a": 1})["output"] == (
        "missing argument(s) for the URL: b"
    )


def test_bad_declarations_are_clear_errors():
    base = {"name": "x", "description": "", "input_schema": None}
    with pytest.raises(ValueError, match="method"):
        http_tool(method="FETCH", url="http://h", **base)
    with pytest.raises(ValueError, match="url"):
        http_tool(method="GET", url="ftp://h", **base)
    with pytest.raises(ValueError, match="body"):
        http_tool(method="POST", url="http://h", body="xml", **base)
    with pytest.raises(ValueError, match="query"):
        http_tool(method="POST", url="http://h", query="q", **base)


@pytest.mark.parametrize("style", ALL)
def test_the_model_calls_an_http_tool(server, style):
    t = http_tool(name="lookup", description="Look up a word.", method="GET",
                  url=server + "/words/{word}", allow_private=True,
                  input_schema={"type": "object", "properties": {"word": {"type": "string"}},
                                "required": ["word"]})  # fmt: skip
    script = [tool_calls_reply(("lookup", {"word": "hé llo"})), text_reply("found it")]
    with fake_provider(script) as fp:
        client = create_client(base_url=fp.url, style=style, model="m", api_key="k")
        r = run(client, "look it up", toolkit=toolkit(t))
    (tc,) = r["tool_calls"]
    assert (
        tc["metadata"]["status"] == 200
        and json.loads(tc["output"])["path"] == "/words/h%C3%A9%20llo"
    )
    assert execute(toolkit(t), "lookup", {"word": "x"})["is_error"] is False


# ---- the pure part ------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
values = st.one_of(
    st.text(max_size=10), st.integers(), st.booleans(), st.lists(st.integers(), max_size=3)
)


@given(
    st.dictionaries(names, values, max_size=6),
    st.sets(names, max_size=3),
    st.sampled_from(["GET", "POST", "DELETE", "PATCH"]),
    st.sampled_from(["json", "form"]),
)
def test_plan_accounts_for_every_argument_exactly_once(args, in_url, method, body):
    # a path segment of "", "." or ".." is refused (tested in test_http_tool_bounds.py)
    in_url = sorted(n for n in in_url if n in args and args[n] not in ("", ".", ".."))
    url = "http://h/" + "/".join(f"{{{n}}}" for n in in_url)
    plan = plan_request(method, url, args, ("q",), body)
    segments = urlsplit(plan["url"]).path.split("/")[1:] if in_url else []
    assert [unquote(s) for s in segments] == [
        a if isinstance(a, str) else json.dumps(a, separators=(",", ":"))
        for a in (args[n] for n in in_url)
    ]
    sent = set(plan["params"]) | set(plan.get("json", {})) | set(plan.get("data", {}))
    assert sent == set(args) - set(in_url)
    assert not set(plan["params"]) & (set(plan.get("json", {})) | set(plan.get("data", {})))
    if method in ("GET", "DELETE"):
        assert "json" not in plan and "data" not in plan


@given(st.dictionaries(st.from_regex(r"[A-Z_]{1,5}", fullmatch=True), st.text(max_size=8)))
def test_expand_env_replaces_only_set_names(env):
    template = " ".join(f"${{{k}}}" for k in env) + " plain $HOME {x}"
    out, used = expand_env(template, env)
    assert out == " ".join(env.values()) + " plain $HOME {x}" and used == tuple(env.values())
    with pytest.raises(KeyError):
        expand_env("${NOT_THERE_X}", env)
