"""One scrubber for every way out: a tool that raises with the API key in its message is
scrubbed before the key reaches the model, the RunResult, the stored transcript, the
traceback or the DEBUG log."""

from __future__ import annotations

import json
import logging

from toolnexus import ask, create_client, define_tool, toolkit
from toolnexus.store import sqlite_store
from toolnexus.testing import fake_provider

KEY = "sk-test-THISisTHEsecretKEY0123456789"


@define_tool
def leak(city: str) -> str:
    """Raise an error that quotes the client's key (a misbehaving tool)."""
    raise RuntimeError(f"upstream refused Authorization: Bearer {KEY} for {city}")


def _script(body, dialect):
    if not any(m.get("role") == "tool" for m in body["messages"]):
        return {"tool_calls": [{"id": "call_1", "name": "leak", "arguments": {"city": "Oslo"}}]}
    return {"content": "sorry"}


def test_a_tool_error_quoting_the_key_is_scrubbed_on_every_way_out(tmp_path, caplog):
    store = sqlite_store(tmp_path / "c.db")
    with fake_provider(_script) as fp, caplog.at_level(logging.DEBUG, logger="toolnexus"):
        c = create_client(base_url=fp.url, model="m", api_key=KEY, store=store)
        r = ask(c, "weather?", toolkit=toolkit(leak), id="x")
        sent = json.dumps([r["body"] for r in fp.requests])  # the key is in a header only
    assert r["text"] == "sorry"
    out = r["tool_calls"][0]
    assert out["is_error"] and "upstream refused" in out["output"]
    everything = {
        "to the model": sent,
        "RunResult": repr(r),
        "traceback": out["metadata"]["traceback"],
        "stored": json.dumps(store["get"]("x"), default=str),
        "DEBUG log": caplog.text,
    }
    assert "upstream refused" in caplog.text  # the log did record the tool's failure
    for where, text in everything.items():
        assert KEY not in text and KEY[:16] not in text, where


def test_the_async_driver_scrubs_a_tool_error_too(tmp_path):
    import asyncio

    from toolnexus import aask

    @define_tool
    async def aleak(city: str) -> str:
        """Raise an error that quotes the client's key (an async misbehaving tool)."""
        raise RuntimeError(f"refused {KEY} for {city}")

    def script(body, dialect):
        if not any(m.get("role") == "tool" for m in body["messages"]):
            return {"tool_calls": [{"id": "c1", "name": "aleak", "arguments": {"city": "Oslo"}}]}
        return {"content": "sorry"}

    store = sqlite_store(tmp_path / "a.db")
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, model="m", api_key=KEY, store=store)
        r = asyncio.run(aask(c, "weather?", toolkit=toolkit(aleak), id="x"))
        sent = json.dumps([q["body"] for q in fp.requests])
    out = r["tool_calls"][0]
    assert out["is_error"] and "refused" in out["output"]
    for text in (sent, repr(r), json.dumps(store["get"]("x"), default=str)):
        assert KEY not in text and KEY[:16] not in text
