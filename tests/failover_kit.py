"""What the failover tests share: scripted loopback providers reused across a module, a
tool that counts its runs, and the checks every failover must pass (each request valid in
its dialect, each tool run once, one transcript in the store)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolnexus import create_client, define_tool, toolkit
from toolnexus.core.transcript import dumps, tool_call_ids, tool_result_ids
from toolnexus.core.wire import DIALECTS
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.validators import validate_request

STYLES = tuple(DIALECTS)  # the registry's rows: a new dialect is tested without edits
PAIRS = [(a, b) for a in STYLES for b in STYLES]

# The primary's failures that fail over, as a provider sends them; "stream_overloaded" is
# an overloaded error event in a stream before any content (streamed runs only).
FAILURES = {
    "529": {"status": 529, "headers": {"x-should-retry": "true"},
            "body": {"type": "error", "error": {"type": "overloaded_error",
                                                "message": "Overloaded"}}},
    "503": {"status": 503, "body": {"error": {"message": "unavailable", "type": "server_error"}}},
    "drop": {"drop": True},
    "stream_overloaded": {"content": "never shown", "stream_fail": "overloaded"},
}  # fmt: skip
BAD_REQUEST = {"status": 400, "body": {"error": {"message": "bad request",
                                                 "type": "invalid_request_error"}}}  # fmt: skip


class Script:
    """A provider's script, reloaded by each test: replies in order, then a 500."""

    def __init__(self) -> None:
        self.replies: list = []
        self.lock = threading.Lock()

    def load(self, replies: Sequence) -> None:
        with self.lock:
            self.replies = list(replies)

    def __call__(self, body: Mapping, dialect: str) -> Mapping:
        with self.lock:
            if not self.replies:
                return {"status": 500, "body": "fake provider: script exhausted"}
            reply = self.replies.pop(0)
        return reply(body, dialect) if callable(reply) else reply


class Provider:
    """A running fake provider (all dialects, by path) whose script a test reloads."""

    def __init__(self, model: str) -> None:
        self.script = Script()
        self.fp = fake_provider(self.script, model=model).start()
        self.model = model

    @property
    def url(self) -> str:
        return self.fp.url

    def load(self, replies: Sequence) -> Provider:
        self.script.load(replies)
        self.fp.requests.clear()
        return self

    @property
    def requests(self) -> list:
        return self.fp.requests

    def stop(self) -> None:
        self.fp.stop()


class Counter:
    """A tool that counts its runs (by its argument), to prove none ran twice."""

    def __init__(self) -> None:
        self.runs: list = []
        self.lock = threading.Lock()

        @define_tool
        def lookup(n: int) -> str:
            """Look a number up."""
            with self.lock:
                self.runs.append(n)
            return f"RESULT-{n}"

        self.toolkit = toolkit(lookup)


def client(provider: Provider, style: str, **options: Any):
    """Return a client of `style` on a provider, quick to retry."""
    options = {"retries": 1, "retry_base_ms": 1, "api_key": "sk-test", **options}
    return create_client(base_url=provider.url, style=style, model=provider.model, **options)


def failing(kind: str, times: int = 2) -> list:
    """Return the replies of a failure the client's own retries see `times` times."""
    return [FAILURES[kind]] * times


def call(n: int) -> Mapping:
    return tool_calls_reply(("lookup", {"n": n}))


def answer(text: str) -> Mapping:
    return text_reply(text)


def invalid_requests(provider: Provider) -> list:
    """Return the problems of every request a provider got, by its dialect's checks."""
    from toolnexus.testing.fake_provider import _dialect_of_path

    out = []
    for r in provider.requests:
        dialect = _dialect_of_path(r["path"])
        out += [f"{dialect}: {p}" for p in validate_request(r["body"], dialect)]
    return out


def one_exchange(messages: Sequence[Mapping], prompt: str, tool_runs: int) -> None:
    """Assert a stored transcript holds the exchange of `prompt` once: the prompt once,
    every tool call answered exactly once, as many results as the tool ran."""
    text = dumps(messages)
    assert text.count(prompt) == 1, text
    calls = [i for m in messages for i in tool_call_ids(m)]
    results = [i for m in messages for i in tool_result_ids(m)]
    assert sorted(calls) == sorted(results) and len(set(calls)) == len(calls), (calls, results)
    assert len(results) == tool_runs


def stream_result(events: Any) -> tuple[Any, list]:
    """Return (the done event's result, the text deltas the consumer saw)."""
    shown, result = [], None
    for event in events:
        if event["type"] == "text":
            shown.append(event["delta"])
        elif event["type"] == "done":
            result = event["result"]
    return result, shown


def stopped(providers: Sequence[Provider]) -> Callable[[], None]:
    return lambda: [p.stop() for p in providers]
