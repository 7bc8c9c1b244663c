"""What a runtime remembers is bounded by bytes (issue 35): MEMO_BYTES of the remembered
conversations' JSON, least recently used dropped, over real exchanges."""

from __future__ import annotations

import json

import httpx
import pytest

import toolnexus.runtime as rt
from toolnexus import create_client, run
from toolnexus.core.bounds import DEFAULT_MEMO_BYTES
from toolnexus.store import in_memory_store
from toolnexus.testing import openai_response, text_reply

ANSWER = json.dumps(openai_response(text_reply("Noted."))).encode()


def _client():
    answer = lambda request: httpx.Response(  # noqa: E731
        200, content=ANSWER, headers={"content-type": "application/json"}
    )
    return create_client(base_url="http://model.test/v1", model="m", store=in_memory_store(),
                         transport=httpx.MockTransport(answer))  # fmt: skip


def _history(n: int, size: int) -> list[dict]:
    return [{"role": ("user", "assistant")[i % 2], "content": "x" * size} for i in range(n)]


def test_the_memo_keeps_at_most_its_bytes_and_the_most_recent_conversations(monkeypatch):
    monkeypatch.setattr(rt, "MEMO_BYTES", 64_000)
    c = _client()
    for i in range(8):  # each about 20 KB of JSON: three fit
        run(c, "hi", history=_history(20, 1000), id=f"c{i}")
        assert c.runtime.remembered_bytes() <= 64_000
    kept = [i for i in range(8) if c.runtime.recall(f"c{i}") is not None]
    assert kept == [5, 6, 7]
    sizes = [rt.memo_bytes(c.runtime.recall(f"c{i}")) for i in kept]
    assert sum(sizes) == c.runtime.remembered_bytes() and all(s > 20_000 for s in sizes)


def test_a_conversation_past_the_bound_alone_is_not_remembered_and_still_answers(monkeypatch):
    monkeypatch.setattr(rt, "MEMO_BYTES", 10_000)
    c = _client()
    run(c, "hi", history=_history(4, 100), id="small")
    r = run(c, "hi", history=_history(30, 1000), id="big")
    assert r["text"] == "Noted." and c.runtime.recall("big") is None
    assert c.runtime.recall("small") is not None
    again = run(c, "more", id="big")  # loaded from the store: the same conversation goes on
    assert len(again["messages"]) == len(r["messages"]) + 2


def test_forget_and_close_give_the_bytes_back():
    c = _client()
    run(c, "hi", history=_history(4, 100), id="a")
    assert c.runtime.remembered_bytes() > 0
    c.runtime.forget("a")
    assert c.runtime.remembered_bytes() == 0
    run(c, "hi", history=_history(4, 100), id="b")
    c.runtime.close()
    assert c.runtime.remembered_bytes() == 0


@pytest.mark.parametrize("n", [1, 50])
def test_the_default_bound_is_documented_and_holds(n):
    assert rt.MEMO_BYTES == 16 * 1024 * 1024
    c = _client()
    for i in range(n):
        run(c, "hi", history=_history(10, 200), id=f"d{i}")
    assert 0 < c.runtime.remembered_bytes() <= rt.MEMO_BYTES


def test_a_stores_memo_keeps_at_most_its_bytes_the_most_recent_kept(tmp_path):
    """The durable stores' own memo (what a worker keeps of the conversations it read or
    saved) is bounded by bytes too: transcripts read from a real SQLite file."""
    from toolnexus.store import _rows, sqlite_store

    store = sqlite_store(tmp_path / "chat.db")
    memo = _rows.Memo(max_bytes=64_000)
    for i in range(6):
        store["save"](f"c{i}", _history(20, 1000))  # about 20 KB of JSON each
        transcript = store["get"](f"c{i}")
        texts = tuple(text.encode() for text in _rows.encode_rows(transcript)[0])
        memo.remember(f"c{i}", transcript, "d", len(transcript), texts, exact=True)
        assert memo.remembered_bytes() <= 64_000
    kept = [i for i in range(6) if memo.known_prefix(f"c{i}", transcript) is not None]
    assert kept == [5] and all(memo._seen(f"c{i}") for i in (3, 4, 5))
    assert not any(memo._seen(f"c{i}") for i in (0, 1, 2))
    memo.forget("c5")
    assert memo.remembered_bytes() == 2 * sum(map(len, texts))


def test_a_memo_extended_in_place_counts_only_the_new_rows():
    from toolnexus.core.transcript import freeze_transcript
    from toolnexus.store import _rows

    t = freeze_transcript(_history(10, 100))
    texts = tuple(text.encode() for text in _rows.encode_rows(t)[0])
    memo = _rows.Memo()
    memo.remember("c", t[:4], "d4", 4, texts[:4])
    first = memo.remembered_bytes()
    memo.remember("c", t, "d", 10, texts)
    assert first == sum(map(len, texts[:4]))
    assert memo.remembered_bytes() == sum(map(len, texts))


def test_the_bound_comes_from_toolnexus_memo_bytes():
    assert rt.memo_bytes_bound({}) == DEFAULT_MEMO_BYTES == 16 * 1024 * 1024
    assert rt.memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": ""}) == DEFAULT_MEMO_BYTES
    assert rt.memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": " 64000000 "}) == 64_000_000
    assert rt.memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": "0"}) == 0  # remember nothing
    for bad in ("16MiB", "-1", "1e6", "²"):
        with pytest.raises(ValueError, match="TOOLNEXUS_MEMO_BYTES"):
            rt.memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": bad})


def test_a_process_started_with_toolnexus_memo_bytes_keeps_that_bound(tmp_path):
    """A service worker's bound: set in its environment, held over real exchanges."""
    import os
    import subprocess
    import sys

    probe = (
        "import toolnexus.runtime as rt, tests.test_memo_bound as t\n"
        "from toolnexus import run\n"
        "c = t._client()\n"
        "for i in range(6):\n"
        "    run(c, 'hi', history=t._history(20, 1000), id=f'c{i}')\n"
        "    assert c.runtime.remembered_bytes() <= 50_000\n"
        "kept = [i for i in range(6) if c.runtime.recall(f'c{i}') is not None]\n"
        "print(rt.MEMO_BYTES, kept)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "TOOLNEXUS_MEMO_BYTES": "50000",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=root,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert out.split() == ["50000", "[4,", "5]"]  # two of about 20 KB fit in 50,000


def test_a_cold_read_counts_its_rows_bytes_once_and_exactly():
    """A store's memo sizes a transcript read cold by the bytes of its rows (counted once
    by the read, for the size and the longest row's bound): UTF-8 bytes, not characters."""
    from toolnexus.core.transcript import FORMAT_VERSION, freeze_transcript
    from toolnexus.store import _rows

    t = freeze_transcript([*_history(6, 100), {"role": "user", "content": "déjà vu, 東京"}])
    texts = _rows.encode_rows(t)[0]
    memo = _rows.Memo()
    got = memo.read("test", "c", FORMAT_VERSION, len(texts), "d", list(enumerate(texts)))
    assert got == t and type(got).__name__ == "RowVector"  # the cold read's own way
    assert memo.remembered_bytes() == sum(len(text.encode()) for text in texts)
    assert memo.remembered_bytes() > sum(map(len, texts))  # bytes, not characters
