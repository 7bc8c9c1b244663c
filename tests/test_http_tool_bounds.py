"""Issue 39, item 3: an HTTP tool an adversarial model cannot turn against the operator.

Over loopback servers: 127.0.0.1 is the tool's own origin, 127.0.0.2 stands in for
another origin (an internal host, a metadata address). Each test names what failed on
the old code (redirects followed anywhere with the secret headers, `..` segments, the
schema's rules unchecked, undeclared arguments sent, the template's query dropped,
unbounded answers, one cookie jar for every run, loopback reachable by default).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import http_tool
from toolnexus.http_fetch import address_refusal
from toolnexus.http_tool import argument_problem, argument_rules

SECRET = "sk-live-0123456789abcdefSECRET"
BOMB = gzip.compress(b"\0" * (64 * 1024 * 1024), 9)  # ~64 KB that inflate to 64 MiB


class Site:
    """A loopback server on `host`: `routes` maps a path to fn(handler) -> None; every
    request is recorded (path, query, headers)."""

    def __init__(self, host: str) -> None:
        self.seen: list[dict] = []
        self.routes: dict = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                parts = urlsplit(self.path)
                site.seen.append({"path": parts.path, "query": parse_qs(parts.query),
                                  "headers": {k.lower(): v for k, v in self.headers.items()},
                                  "body": body})  # fmt: skip
                route = site.routes.get(parts.path, Site.echo)
                route(self)

            do_GET = do_POST = do_PUT = do_DELETE = _any

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()  # fmt: skip

    @staticmethod
    def send(h, status: int, body: bytes = b"", **headers: str) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k.replace("_", "-"), v)
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    @staticmethod
    def echo(h) -> None:
        Site.send(h, 200, json.dumps({"path": urlsplit(h.path).path}).encode())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sites():
    home, other = Site("127.0.0.1"), Site("127.0.0.2")
    yield home, other
    home.close()
    other.close()


def redirect_to(url: str, status: int = 302):
    return lambda h: Site.send(h, status, location=url)


def tool_at(url: str, **options):
    options.setdefault("allow_private", True)  # loopback stands in for the operator's host
    options.setdefault("input_schema", None)
    return http_tool(name="t", description="d", method=options.pop("method", "GET"), url=url,
                     **options)  # fmt: skip


# ---- redirects ------------------------------------------------------------------------


def test_no_redirect_is_followed_by_default(sites):
    """Old: followed to any host, handing the internal answer back to the model."""
    home, other = sites
    home.routes["/go"] = redirect_to(other.url + "/internal")
    r = tool_at(home.url + "/go")["execute"]({})
    assert r["is_error"] and r["output"].startswith("HTTP 302: a redirect")
    assert r["metadata"]["status"] == 302 and other.seen == []


@pytest.mark.parametrize("status", [302, 307, 308])
def test_a_redirect_to_another_origin_never_carries_the_secret_headers(sites, monkeypatch, status):
    """Old: every `${SECRET}` header but Authorization followed the redirect."""
    home, other = sites
    monkeypatch.setenv("T39_KEY", SECRET)
    home.routes["/go"] = redirect_to(other.url + "/internal", status)
    headers = {"X-Api-Key": "${T39_KEY}", "Authorization": "Bearer ${T39_KEY}"}
    t = tool_at(home.url + "/go", method="POST", follow_redirects=3, headers=headers)
    r = t["execute"]({})
    assert r["is_error"] and r["output"].startswith(f"HTTP {status}: a redirect")
    assert other.seen == [] and home.seen[0]["headers"]["x-api-key"] == SECRET


def test_same_origin_redirects_are_followed_when_asked_within_the_hops(sites):
    home, _ = sites
    home.routes["/a"] = redirect_to("/b")
    home.routes["/b"] = redirect_to(home.url + "/c", 307)
    followed = tool_at(home.url + "/a", follow_redirects=2)["execute"]({})
    assert not followed["is_error"] and json.loads(followed["output"]) == {"path": "/c"}
    home.seen.clear()
    short = tool_at(home.url + "/a", follow_redirects=1)["execute"]({})
    assert short["is_error"] and short["output"].startswith("HTTP 307")
    assert [s["path"] for s in home.seen] == ["/a", "/b"]
    home.routes["/loop"] = redirect_to("/loop")
    home.seen.clear()
    assert tool_at(home.url + "/loop", follow_redirects=True)["execute"]({})["is_error"]
    assert len(home.seen) == 6  # the first request and 5 hops, then the 3xx is the answer


# ---- the URL the model fills ----------------------------------------------------------


@pytest.mark.parametrize("value", ["..", ".", ""])
def test_a_path_argument_of_dot_dot_dot_or_empty_is_refused_before_any_request(sites, value):
    """Old: `..` moved the request to another path of the host, secret headers included."""
    home, _ = sites
    t = tool_at(home.url + "/users/{id}/profile")
    r = t["execute"]({"id": value})
    assert r["is_error"] and "refused" in r["output"] and home.seen == []
    assert json.loads(t["execute"]({"id": "a/../b"})["output"]) == {
        "path": "/users/a%2F..%2Fb/profile"
    }


def test_the_template_s_own_query_is_kept(sites):
    """Old: `?fixed=query` of the template was dropped once arguments went to the query."""
    home, _ = sites
    props = {"q": {"type": "string"}}
    t = tool_at(home.url + "/search?v=2&fmt=json", input_schema={"properties": props})
    assert not t["execute"]({"q": "x y"})["is_error"]
    assert home.seen[0]["query"] == {"v": ["2"], "fmt": ["json"], "q": ["x y"]}
    assert not t["execute"]({})["is_error"]
    assert home.seen[1]["query"] == {"v": ["2"], "fmt": ["json"]}


SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]{1,6}$"},
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        "kind": {"type": "string", "enum": ["a", "b"]},
    },
    "required": ["id"],
}


@pytest.mark.parametrize(
    "args, why",
    [
        ({"id": "../admin"}, "pattern"),
        ({"id": "1", "name": "x"}, "shorter than 2"),
        ({"id": "1", "name": "toolong"}, "longer than 5"),
        ({"id": "1", "tags": ["ok", "long"]}, "longer than 3"),
        ({"id": "1", "kind": "c"}, "kind"),
        ({"id": "1", "admin": True}, "undeclared"),
    ],
)
def test_arguments_are_checked_against_the_schema_before_any_request(sites, args, why):
    """Old: pattern, lengths and undeclared names went unchecked (undeclared ones became
    query parameters)."""
    home, _ = sites
    t = tool_at(home.url + "/items/{id}", input_schema=SCHEMA)
    r = t["execute"](args)
    assert r["is_error"] and why in r["output"] and home.seen == []
    assert not t["execute"]({"id": "12", "name": "abc", "tags": ["x"], "kind": "a"})["is_error"]


def test_without_a_schema_only_placeholders_and_query_names_are_arguments(sites):
    home, _ = sites
    t = tool_at(home.url + "/u/{id}", query=["q"])
    assert list(t["input_schema"]["required"]) == ["id"]
    assert t["execute"]({"id": "1", "other": "x"})["is_error"] and home.seen == []
    assert not t["execute"]({"id": "1", "q": "x"})["is_error"]


# ---- bounded answers ------------------------------------------------------------------


def test_a_gzip_bomb_stops_at_the_byte_bound_without_inflating(sites):
    """Old: a 64 KB gzip answer became a 64 MiB tool result."""
    home, _ = sites
    home.routes["/bomb"] = lambda h: Site.send(h, 200, BOMB, content_encoding="gzip")
    t = tool_at(home.url + "/bomb", max_response_bytes=1_000_000)
    tracemalloc.start()
    try:
        r = t["execute"]({})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r["is_error"] and "over 1,000,000 bytes" in r["output"]
    assert peak < 8 * 1024 * 1024, peak  # the bound and a chunk, never the 64 MiB
    home.routes["/small"] = lambda h: Site.send(h, 200, gzip.compress(b"hello"),
                                                content_encoding="gzip")  # fmt: skip
    assert tool_at(home.url + "/small")["execute"]({})["output"] == "hello"
    assert home.seen[-1]["headers"]["accept-encoding"] == "gzip, deflate"


def test_an_answer_over_the_bound_is_refused_and_the_default_bound_is_a_megabyte(sites):
    home, _ = sites
    home.routes["/big"] = lambda h: Site.send(h, 200, b"x" * (1024 * 1024 + 1))
    r = tool_at(home.url + "/big")["execute"]({})
    assert r["is_error"] and "over 1,048,576 bytes" in r["output"]


def drip(h) -> None:
    """Send a byte every 50 ms (each read well inside any read timeout), for 4 s at most."""
    h.send_response(200)
    h.send_header("content-length", "80")
    h.end_headers()
    for _ in range(80):
        try:
            h.wfile.write(b".")
            h.wfile.flush()
        except OSError:
            return  # the client left
        time.sleep(0.05)


def test_a_slow_drip_stops_at_the_tool_s_timeout(sites):
    """Old: a read timeout per chunk, so a drip never timed out (here: 4 s, not 0.5)."""
    home, _ = sites
    home.routes["/drip"] = drip
    t0 = time.monotonic()
    r = tool_at(home.url + "/drip", timeout_ms=500)["execute"]({})
    took = time.monotonic() - t0
    assert r["is_error"] and "took over 0.5 s" in r["output"]
    assert took < 2.0, took


# ---- no state between runs ------------------------------------------------------------


def test_no_cookie_passes_from_one_call_to_the_next(sites):
    """Old: one cookie jar per tool, shared by every run, user and tenant."""
    home, _ = sites
    home.routes["/login"] = lambda h: Site.send(h, 200, b"ok", set_cookie="session=alice")
    t = tool_at(home.url + "/{page}")
    t["execute"]({"page": "login"})
    t["execute"]({"page": "inbox"})
    assert "cookie" not in home.seen[1]["headers"]


def test_a_client_of_yours_is_used_as_given_and_left_open(sites):
    home, _ = sites
    sent = []
    with httpx.Client(event_hooks={"request": [sent.append]}, follow_redirects=True) as mine:
        home.routes["/go"] = redirect_to("/elsewhere")
        r = tool_at(home.url + "/go", http_client=mine)["execute"]({})
        assert r["is_error"] and r["output"].startswith("HTTP 302")  # its redirects: ours
        assert len(sent) == 1 and not mine.is_closed


# ---- where a call may go --------------------------------------------------------------


def test_loopback_and_private_addresses_are_refused_by_default(sites):
    """Old: any address, loopback and metadata-style ones included."""
    home, _ = sites
    r = http_tool(name="t", description="d", method="GET", url=home.url + "/x",
                  input_schema=None)["execute"]({})  # fmt: skip
    assert r["is_error"] and "not public" in r["output"] and home.seen == []
    for address in ("10.1.2.3", "169.254.169.254", "192.168.0.1", "::1", "::ffff:127.0.0.1",
                    "fe80::1", "100.64.0.1", "0.0.0.0"):  # fmt: skip
        assert address_refusal(address, 80) is not None, address
    assert address_refusal("8.8.8.8", 443) is None


def test_the_host_allow_list(sites):
    home, other = sites
    url = "http://{host}:" + str(home.server.server_address[1]) + "/x"
    props = {"host": {"type": "string"}}
    with pytest.raises(ValueError, match="allow_hosts"):
        tool_at(url, input_schema={"properties": props})
    with pytest.raises(ValueError, match="not in allow_hosts"):
        tool_at(home.url + "/x", allow_hosts=["api.example.com"])
    t = tool_at(url, input_schema={"properties": props}, allow_hosts=["127.0.0.1"])
    assert not t["execute"]({"host": "127.0.0.1"})["is_error"]
    r = t["execute"]({"host": "127.0.0.2"})
    assert r["is_error"] and "not among the tool's allowed hosts" in r["output"]
    assert other.seen == []


# ---- the pure checks ------------------------------------------------------------------


@given(st.text(max_size=12), st.integers(0, 6), st.integers(0, 6))
def test_length_rules_agree_with_len(value, lo, hi):
    rules = argument_rules({"properties": {"s": {"minLength": lo, "maxLength": hi}}})
    problem = argument_problem(frozenset({"s"}), rules, {"s": value})
    assert (problem is None) == (lo <= len(value) <= hi)


@given(st.dictionaries(st.sampled_from("abcxyz"), st.integers(), max_size=4))
def test_only_declared_names_pass(args):
    problem = argument_problem(frozenset("abc"), {}, args)
    assert (problem is None) == (set(args) <= set("abc"))
