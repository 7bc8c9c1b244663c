"""An emoji split across two stream chunks (two JSON escapes, one per delta) is joined;
a lone half is a clear ProviderError before anything is saved (never a raw
UnicodeEncodeError from a store after the answer was shown)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from raw_server import RawServer, sse_answer

from toolnexus import ProviderError, create_client, stream
from toolnexus.core.frozen import thaw
from toolnexus.core.wire.sse import whole_characters
from toolnexus.store import sqlite_store


def _openai_stream(pieces: list[str]) -> bytes:
    out = b""
    for p in pieces:
        chunk = {"model": "m", "choices": [{"index": 0, "delta": {"content": p}}]}
        out += b"data: " + json.dumps(chunk).encode() + b"\n\n"  # ASCII: "\\ud83d" escapes
    end = {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return out + b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"


def _client(url, tmp_path):
    return create_client(base_url=url, model="m", api_key="k",
                         store=sqlite_store(tmp_path / "c.db"))  # fmt: skip


def test_an_emoji_split_across_two_stream_deltas_is_joined_and_saved(tmp_path):
    with RawServer() as s:
        s.script([sse_answer(_openai_stream(["smile ", "\ud83d", "\ude00", "!"]))])
        c = _client(s.url, tmp_path)
        events = list(stream(c, "hi", id="e"))
    done = [e for e in events if e["type"] == "done"]
    assert done and done[0]["result"]["text"] == "smile \U0001f600!"
    deltas = [e["delta"] for e in events if e["type"] == "text"]
    assert "".join(deltas) == "smile \U0001f600!"
    for d in deltas:  # each one printable: never half a character
        d.encode("utf-8")
    saved = thaw(c.store["get"]("e"))
    assert saved[-1]["content"] == "smile \U0001f600!"


def test_a_lone_surrogate_from_the_provider_is_a_clear_error_and_saves_nothing(tmp_path):
    with RawServer() as s:
        s.script([sse_answer(_openai_stream(["half ", "\ud83d", " gone"]))])
        c = _client(s.url, tmp_path)
        with pytest.raises(ProviderError, match="lone UTF-16 surrogate"):
            list(stream(c, "hi", id="e"))
    assert c.store["get"]("e") is None


@given(st.text(), st.integers(0, 100))
def test_whole_characters_joins_any_text_split_into_utf16_halves(text, cut):
    """Any text, cut anywhere in its UTF-16 form, joins back to itself."""
    halves = text.encode("utf-16-le")
    cut = min(cut, len(halves) // 2) * 2
    a = halves[:cut].decode("utf-16-le", "surrogatepass")
    b = halves[cut:].decode("utf-16-le", "surrogatepass")
    assert whole_characters([a + b]) == [text]


def test_the_async_stream_hands_on_whole_characters_too(tmp_path):
    import asyncio

    from toolnexus import astream

    async def collect(c):
        return [e async for e in astream(c, "hi", id="e")]

    with RawServer() as s:
        s.script([sse_answer(_openai_stream(["a", "\ud83d", "\ude00", "b"]))])
        events = asyncio.run(collect(_client(s.url, tmp_path)))
    deltas = [e["delta"] for e in events if e["type"] == "text"]
    assert deltas == ["a", "\U0001f600", "b"]
