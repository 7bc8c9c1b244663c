"""HTTP tools: declare a REST endpoint as a tool; the library makes the request.

The request a call makes is a pure function of the declaration and the arguments
(`plan_request`); the tool's execute only expands `${ENV}` headers, sends, and maps
the response to a result. Expanded header values never reach a log, an error or a
result: they are scrubbed (`core.secrets`: also fragments, URL/JSON-escaped forms and
values split over lines) wherever response text is handed back.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from pyrsistent import PMap, freeze, thaw

from .core.errors import excerpt
from .core.secrets import scrubber
from .core.tool import tool, tool_result

__all__ = ["http_tool", "plan_request", "expand_env", "placeholders"]

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_IN_QUERY = frozenset({"GET", "DELETE", "HEAD", "OPTIONS"})  # methods that send args as a query
BODIES = ("json", "form")
ERROR_BODY_CHARS = 2000
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


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


def plan_request(
    method: str,
    url: str,
    args: Mapping,
    query: tuple[str, ...] = (),
    body: str = "json",
) -> PMap:
    """Return {method, url, params, json or data} of a call; ValueError if a placeholder is missing.

    Placeholders are filled URL-encoded and leave the body; names in `query` (and, for
    GET/DELETE/HEAD/OPTIONS, every remaining argument) become query parameters; the rest
    is the JSON body, or a form body when `body="form"`.

    >>> p = plan_request("POST", "http://h/u/{id}", {"id": "a b", "q": 1, "x": True}, ("q",))
    >>> p["url"], dict(p["params"]), dict(p["json"])
    ('http://h/u/a%20b', {'q': '1'}, {'x': True})
    """
    args = thaw(args)  # the model's arguments arrive frozen; plain values encode simply
    missing = [n for n in placeholders(url) if n not in args]
    if missing:
        raise ValueError(f"missing argument(s) for the URL: {', '.join(missing)}")
    filled = _PLACEHOLDER.sub(lambda m: quote(_text(args[m.group(1)]), safe=""), url)
    rest = {k: v for k, v in args.items() if k not in set(placeholders(url))}
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


def _check(name: str, method: str, url: str, body: str, headers: Any, query: Any) -> None:
    if method not in METHODS:
        raise ValueError(
            f"http_tool {name!r}: method must be one of {sorted(METHODS)}, got {method!r}"
        )
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"http_tool {name!r}: url must start with http:// or https://, got {url!r}"
        )
    if body not in BODIES:
        raise ValueError(f"http_tool {name!r}: body must be one of {BODIES}, got {body!r}")
    if headers is not None and not all(isinstance(v, str) for v in dict(headers).values()):
        raise ValueError(f"http_tool {name!r}: header values must be strings")
    if query is not None and isinstance(query, str):
        raise ValueError(f"http_tool {name!r}: query is a list of argument names, not a string")


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
) -> PMap:
    """Return a tool (source "http") that calls `method url` with the model's arguments.

    `{placeholders}` in `url` are filled from the arguments; `query` names arguments sent
    as query parameters; `${ENV}` in header values is read from the environment at call
    time. A 2xx response is the body text (metadata.status); any other is the error
    result `HTTP <status>: <body>`.
    """
    method = method.upper() if isinstance(method, str) else method
    _check(name, method, url, body, headers, query)
    static = dict(headers or {})
    names = tuple(query or ())
    lazy: dict[str, Any] = {}
    lock = threading.Lock()

    def http():  # one client per tool, made on first use and shared by every call
        with lock:
            if "client" not in lazy:
                import httpx

                lazy["client"] = httpx.Client(timeout=timeout_ms / 1000, follow_redirects=True)
            return lazy["client"]

    def execute(args: Mapping):
        try:
            plan = plan_request(method, url, args, names, body)
        except ValueError as e:
            return tool_result(str(e), True)
        try:
            sent_headers, secrets = _headers(static)
            scrub = scrubber(secrets)  # every form: fragments, URL/JSON escapes, split lines
        except KeyError as e:
            return tool_result(
                f"environment variable {e.args[0]} is not set (header of {name})", True
            )
        try:
            resp = http().request(
                plan["method"],
                plan["url"],
                params=thaw(plan["params"]),
                headers=sent_headers,
                json=thaw(plan.get("json")),
                data=thaw(plan.get("data")),
            )
        except Exception as e:  # a failure to send is a result; masked in case it quotes a header
            reason = scrub(f"{type(e).__name__}: {e}")
            return tool_result(f"{plan['method']} {plan['url']} failed: {reason}", True)
        meta = {"status": resp.status_code}
        if not 200 <= resp.status_code < 300:
            text = excerpt(resp.text, scrub, ERROR_BODY_CHARS)
            return tool_result(f"HTTP {resp.status_code}: {text}", True, meta)
        return tool_result(scrub(resp.text), metadata=meta)

    return tool(name, description, input_schema, execute, source="http")
