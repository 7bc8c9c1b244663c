"""HTTP tools: declare a REST endpoint as a tool; the library makes the request.

The request a call makes is a pure function of the declaration and the arguments
(`plan_request`), checked against the declaration before anything is sent
(`argument_problem`: no undeclared argument, the schema's lengths and patterns, no `.`
or `..` path segment); the tool's execute only expands `${ENV}` headers, sends through
`http_fetch` (where a call may go, redirects, bounds) and maps the answer to a result.
Expanded header values never reach a log, an error or a result: they are scrubbed
(`core.secrets`: also fragments, URL/JSON-escaped forms and values split over lines)
wherever response text is handed back.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from . import http_fetch as fetch
from .core.errors import excerpt
from .core.frozen import FrozenMap, freeze, thaw
from .core.secrets import scrubber
from .core.tool import tool, tool_result

__all__ = ["http_tool", "plan_request", "expand_env", "placeholders", "argument_problem"]

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_IN_QUERY = frozenset({"GET", "DELETE", "HEAD", "OPTIONS"})  # methods that send args as a query
BODIES = ("json", "form")
ERROR_BODY_CHARS = 2000
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_RESPONSE_BYTES = 1024 * 1024  # a tool result the model reads: a megabyte is plenty
MAX_REDIRECTS = 5  # the most same-origin hops a tool may ask for
MAX_URL = 8192  # the longest URL a call may build (servers refuse longer ones anyway)
_DOT_SEGMENTS = frozenset({".", ".."})


def placeholders(url: str) -> tuple[str, ...]:
    """Return the `{name}` placeholders of a URL template, in order.

    >>> placeholders("https://api.example.com/users/{user_id}/repos/{repo}")
    ('user_id', 'repo')
    """
    return tuple(_PLACEHOLDER.findall(url))


def _text(value: Any) -> str:
    """Return an argument as the text a URL carries (JSON spelling for non-strings)."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _query_value(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_text(v) for v in value]  # repeated parameter: ?tag=a&tag=b
    return _text(value)


def _path_placeholders(url: str) -> frozenset[str]:
    """Return the placeholders in a URL template's path (not its query or fragment)."""
    path = url.split("://", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    return frozenset(placeholders(path[path.find("/") :] if "/" in path else ""))


def plan_request(
    method: str,
    url: str,
    args: Mapping,
    query: tuple[str, ...] = (),
    body: str = "json",
) -> FrozenMap:
    """Return {method, url, params, json or data} of a call; ValueError if a placeholder
    is missing or a path argument is empty, `.` or `..`.

    Placeholders are filled URL-encoded as one segment each (a `/` in a value is `%2F`)
    and leave the body; names in `query` (and, for GET/DELETE/HEAD/OPTIONS, every
    remaining argument) become query parameters, sent after the template's own query;
    the rest is the JSON body, or a form body when `body="form"`.

    >>> p = plan_request("POST", "http://h/u/{id}?v=2", {"id": "a b", "q": 1, "x": True}, ("q",))
    >>> p["url"], dict(p["params"]), dict(p["json"])
    ('http://h/u/a%20b?v=2', {'q': '1'}, {'x': True})
    """
    args = thaw(args)  # the model's arguments arrive frozen; plain values encode simply
    named = placeholders(url)
    missing = [n for n in named if n not in args]
    if missing:
        raise ValueError(f"missing argument(s) for the URL: {', '.join(missing)}")
    for n in sorted(_path_placeholders(url)):
        if _text(args[n]) in _DOT_SEGMENTS or _text(args[n]) == "":
            raise ValueError(f"argument {n!r} is a path segment: {_text(args[n])!r} is refused")
    filled = _PLACEHOLDER.sub(lambda m: quote(_text(args[m.group(1)]), safe=""), url)
    if _DOT_SEGMENTS & set(urlsplit(filled).path.split("/")):  # "{a}{b}" of "." and "."
        raise ValueError("the filled URL has a '.' or '..' path segment: refused")
    rest = {k: v for k, v in args.items() if k not in set(named)}
    to_query = set(rest) if method in _IN_QUERY else {k for k in rest if k in query}
    params = {k: _query_value(v) for k, v in rest.items() if k in to_query}
    payload = {k: v for k, v in rest.items() if k not in to_query}
    plan = {"method": method, "url": filled, "params": params}
    if method not in _IN_QUERY and payload:  # no remaining arguments: no body at all
        if body == "form":
            plan["data"] = {k: _query_value(v) for k, v in payload.items()}
        else:
            plan["json"] = payload
    return freeze(plan)


def expand_env(value: str, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """Return (value with `${NAME}` expanded from env, the expanded values); KeyError if unset.

    >>> expand_env("Bearer ${TOKEN}", {"TOKEN": "s3cret"})
    ('Bearer s3cret', ('s3cret',))
    """
    used: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in env:
            raise KeyError(name)
        used.append(env[name])
        return env[name]

    return _ENV.sub(sub, value), tuple(used)


def _headers(headers: Mapping[str, str]) -> tuple[dict, tuple[str, ...]]:
    """Return the headers with the environment expanded now, and the secret values used."""
    out, secrets = {}, []
    for k, v in headers.items():
        out[k], used = expand_env(v, os.environ)
        secrets.extend(used)
    return out, tuple(secrets)


# ---- the arguments, against the declaration ----------------------------------------


def _string_rules(prop: Any) -> tuple | None:
    """Return (minLength, maxLength, compiled pattern) of a string schema, or None."""
    if not isinstance(prop, Mapping):
        return None
    lo, hi, pattern = prop.get("minLength"), prop.get("maxLength"), prop.get("pattern")
    if lo is None and hi is None and pattern is None:
        return None
    return (lo, hi, re.compile(pattern) if isinstance(pattern, str) else None)


def argument_rules(schema: Mapping) -> dict[str, tuple]:
    """Return {name: (minLength, maxLength, pattern)} for the string rules a tool's schema
    declares, on a property or on its array's items; ValueError for a bad pattern."""
    rules = {}
    for name, prop in (schema.get("properties") or {}).items():
        own = _string_rules(prop)
        items = _string_rules(prop.get("items")) if isinstance(prop, Mapping) else None
        if own or items:
            rules[name] = own or items
    return rules


def _string_problem(name: str, value: str, rule: tuple) -> str | None:
    lo, hi, pattern = rule
    if hi is not None and len(value) > hi:  # first: a pattern then runs on bounded text
        return f"argument {name!r} is longer than {hi} characters"
    if lo is not None and len(value) < lo:
        return f"argument {name!r} is shorter than {lo} characters"
    if pattern is not None and pattern.search(value) is None:
        return f"argument {name!r} does not match the pattern {pattern.pattern!r}"
    return None


def argument_problem(declared: frozenset[str], rules: Mapping[str, tuple], args: Mapping):
    """Return why `args` do not fit the declaration (an undeclared name, a string's
    length or pattern), or None. The type, enum and required checks are the tool's own
    (`core.validate`), run before this one.

    >>> rules = {"id": (1, 4, re.compile("^[0-9]+$"))}
    >>> argument_problem(frozenset({"id"}), rules, {"id": "12"}) is None
    True
    >>> argument_problem(frozenset({"id"}), rules, {"id": "12", "admin": True})
    "undeclared argument(s): 'admin' (declared: id)"
    >>> argument_problem(frozenset({"id"}), rules, {"id": "1x"})
    "argument 'id' does not match the pattern '^[0-9]+$'"
    """
    extra = [k for k in args if k not in declared]
    if extra:
        shown = ", ".join(repr(str(k)[:40]) for k in extra[:5])
        return f"undeclared argument(s): {shown} (declared: {', '.join(sorted(declared))})"
    for name, rule in rules.items():
        value = args.get(name)
        values = value if isinstance(value, list | tuple) else (value,)
        for v in values:
            problem = _string_problem(name, v, rule) if isinstance(v, str) else None
            if problem:
                return problem
    return None


def derived_schema(url: str, query: Sequence[str]) -> dict:
    """Return the input schema of a tool declared without one: its placeholders (required)
    and its query names, as strings, nothing else."""
    names = [*placeholders(url), *(q for q in query if q not in placeholders(url))]
    props = {n: {"type": "string"} for n in names}
    return {"type": "object", "properties": props, "required": list(placeholders(url)),
            "additionalProperties": False}  # fmt: skip


# ---- the declaration --------------------------------------------------------------


def _authority_placeholders(url: str) -> list[str]:
    rest = url.split("://", 1)[-1]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0),
              default=len(rest))  # fmt: skip
    return list(placeholders(rest[:cut]))


def _check(name: str, method: str, url: str, body: str, headers: Any, query: Any) -> None:
    def bad(what: str) -> ValueError:
        return ValueError(f"http_tool {name!r}: {what}")

    if method not in METHODS:
        raise bad(f"method must be one of {sorted(METHODS)}, got {method!r}")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise bad(f"url must start with http:// or https://, got {url!r}")
    if body not in BODIES:
        raise bad(f"body must be one of {BODIES}, got {body!r}")
    if headers is not None and not all(isinstance(v, str) for v in dict(headers).values()):
        raise bad("header values must be strings")
    if query is not None and isinstance(query, str):
        raise bad("query is a list of argument names, not a string")


def _check_bounds(name: str, url: str, limits: fetch.Limits) -> None:
    def bad(what: str) -> ValueError:
        return ValueError(f"http_tool {name!r}: {what}")

    if not 0 <= limits.hops <= MAX_REDIRECTS:
        raise bad(f"follow_redirects is a number of same-origin hops, 0 to {MAX_REDIRECTS}")
    if limits.max_bytes <= 0 or limits.timeout <= 0:
        raise bad("max_response_bytes and timeout_ms must be positive")
    if _authority_placeholders(url) and limits.allow_hosts is None:
        raise bad("a placeholder in the URL's host needs allow_hosts (the hosts it may name)")
    host = urlsplit(url).hostname if not _authority_placeholders(url) else None
    if host and limits.allow_hosts is not None and host.lower() not in limits.allow_hosts:
        raise bad(f"the URL's host {host} is not in allow_hosts")


def _declared(name: str, url: str, schema: Mapping) -> frozenset[str]:
    props = schema.get("properties") or {}
    undeclared = [p for p in placeholders(url) if p not in props]
    if undeclared:
        raise ValueError(
            f"http_tool {name!r}: URL placeholder(s) {', '.join(undeclared)} are not "
            "properties of input_schema"
        )
    return frozenset(props)


def http_tool(
    *,
    name: str,
    description: str,
    method: str,
    url: str,
    input_schema: Mapping | None,
    headers: Mapping[str, str] | None = None,
    query: list[str] | tuple[str, ...] | None = None,
    body: str = "json",
    timeout_ms: int = 30000,
    follow_redirects: int | bool = 0,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
    allow_hosts: Sequence[str] | None = None,
    allow_private: bool = False,
    http_client: Any = None,
) -> FrozenMap:
    """Return a tool (source "http") that calls `method url` with the model's arguments.

    `{placeholders}` in `url` are filled from the arguments (each one path segment);
    `query` names arguments sent as query parameters; `${ENV}` in header values is read
    from the environment at call time. Arguments are checked first: only declared ones
    (without `input_schema`: the placeholders and `query` names, as strings), and the
    schema's `minLength`, `maxLength` and `pattern`. A 2xx answer is the body text
    (metadata.status); any other, and a redirect not followed, is the error result
    `HTTP <status>: <body>`. Bounds (`http_fetch`): the whole call within `timeout_ms`,
    the answer at most `max_response_bytes` once decoded, redirects only when
    `follow_redirects` (a number of hops, True: 5) and only to the same origin, hosts in
    `allow_hosts` when given, and no private, loopback or link-local address unless
    `allow_private`. Each call uses a fresh httpx.Client (no cookies kept between calls);
    `http_client` is a client of yours to use instead, as given.
    """
    method = method.upper() if isinstance(method, str) else method
    _check(name, method, url, body, headers, query)
    hops = MAX_REDIRECTS if follow_redirects is True else int(follow_redirects)
    hosts = None if allow_hosts is None else frozenset(h.lower() for h in allow_hosts)
    limits = fetch.Limits(timeout_ms / 1000, max_response_bytes, hops, hosts, allow_private)
    _check_bounds(name, url, limits)
    names = tuple(query or ())
    schema = input_schema if input_schema is not None else derived_schema(url, names)
    declared = _declared(name, url, schema)
    rules = argument_rules(schema)
    call = _Call(method, url, names, body, dict(headers or {}), limits, http_client)

    def execute(args: Mapping):
        problem = argument_problem(declared, rules, args)
        if problem is not None:
            return tool_result(problem, True)
        try:
            plan = plan_request(method, url, args, names, body)
        except ValueError as e:
            return tool_result(str(e), True)
        try:
            sent_headers, secrets = _headers(call.headers)
        except KeyError as e:
            return tool_result(
                f"environment variable {e.args[0]} is not set (header of {name})", True
            )
        # every form of a secret: fragments, URL/JSON escapes, split lines
        return call.send(plan, sent_headers, scrubber(secrets))

    return tool(name, description, schema, execute, source="http")


class _Call:
    """What every call of one HTTP tool shares: its declaration and a maker of clients."""

    def __init__(self, method, url, query, body, headers, limits, http_client) -> None:
        self.method, self.url, self.query, self.body = method, url, query, body
        self.headers, self.limits, self.given = headers, limits, http_client
        self.clients = fetch.Clients(limits.timeout)

    def send(self, plan: FrozenMap, headers: dict, scrub: Any) -> FrozenMap:
        """Make the planned request within the tool's bounds; return the tool result."""
        import httpx

        shown = f"{plan['method']} {scrub(plan['url'])}"
        try:
            target = httpx.URL(plan["url"]).copy_merge_params(thaw(plan["params"]))
            if len(str(target)) > MAX_URL:
                raise fetch.Refused(f"the URL would be over {MAX_URL} characters")
            fetch.check_target(target, self.limits)
            client = self.given if self.given is not None else self.clients.new()
            try:
                request = client.build_request(
                    plan["method"], target, headers=fetch.request_headers(headers),
                    json=thaw(plan.get("json")), data=thaw(plan.get("data")),
                    timeout=self.limits.timeout,
                )  # fmt: skip
                answer = fetch.exchange(client, request, self.limits)
            finally:
                if client is not self.given:
                    client.close()
        except fetch.Refused as e:
            return tool_result(f"{shown} refused: {scrub(str(e))}", True)
        except Exception as e:  # a failure to send is a result; masked in case it quotes a header
            return tool_result(f"{shown} failed: {scrub(f'{type(e).__name__}: {e}')}", True)
        return _result(answer, self.limits.hops, scrub)


def _result(answer: fetch.Answer, hops: int, scrub: Any) -> FrozenMap:
    """Return the tool result of a finished exchange."""
    try:
        text = answer.body.decode(answer.charset, errors="replace")
    except LookupError:  # a charset Python does not know
        text = answer.body.decode("utf-8", errors="replace")
    meta = {"status": answer.status}
    if answer.redirect:
        why = f"this tool follows {hops} same-origin redirect(s)" if hops else "not followed"
        return tool_result(f"HTTP {answer.status}: a redirect ({why})", True, meta)
    if not 200 <= answer.status < 300:
        return tool_result(
            f"HTTP {answer.status}: {excerpt(text, scrub, ERROR_BODY_CHARS)}", True, meta
        )
    return tool_result(scrub(text), metadata=meta)
