"""A save that no later get could read back is refused, with a clear error, before
anything is acknowledged: the conversation stays readable (never StoreCorruptError)."""

from __future__ import annotations

import base64

import pytest
from durable_store_cases import store_maker

from toolnexus import ask, create_in_process_client
from toolnexus.core.frozen import thaw
from toolnexus.core.transcript import TranscriptFormatError
from toolnexus.core.wire.jsonload import MAX_BYTES


@pytest.fixture(params=["file", "sqlite", "redis", "postgres"])
def make_store(request, tmp_path, unique):
    """Return make_store() for each durable store: a new object on the same backing."""
    yield from store_maker(request.param, request, tmp_path, unique, "limits")


CALLS: list = []


def _echo(request):
    CALLS.append(request)
    return {"content": "got it"}


def test_a_message_over_the_read_bound_is_refused_and_the_conversation_stays_readable(
    make_store,
):
    client = create_in_process_client(model="m", generate=_echo, store=make_store())
    ask(client, "hello", id="big")
    pdf = base64.b64encode(b"%PDF" + b"\0" * (MAX_BYTES * 3 // 4 + 1024)).decode()  # ~40 MB
    part = {"type": "file", "mimeType": "application/pdf", "data": pdf, "name": "big.pdf"}
    CALLS.clear()
    with pytest.raises(TranscriptFormatError, match="the prompt .*reads back"):
        ask(client, [{"type": "text", "text": "read this"}, part], id="big")
    assert CALLS == []  # refused before the model was paid
    fresh = make_store()  # a restart, another worker: still readable, the big turn absent
    assert [m["content"] for m in thaw(fresh["get"]("big"))] == ["hello", "got it"]
    again = create_in_process_client(model="m", generate=_echo, store=fresh)
    assert ask(again, "still there?", id="big")["text"] == "got it"


def test_a_lone_surrogate_is_refused_as_a_clear_error_not_a_unicode_error(make_store):
    store = make_store()
    with pytest.raises(TranscriptFormatError, match="lone surrogate"):
        store["save"]("s", [{"role": "user", "content": "half \ud83d"}])
    assert store["get"]("s") is None


def test_an_answer_no_store_could_read_back_is_refused_before_it_is_acknowledged(make_store):
    big = "x" * (MAX_BYTES + 1)
    client = create_in_process_client(
        model="m", generate=lambda request: {"content": big}, store=make_store()
    )
    with pytest.raises(TranscriptFormatError, match="reads back"):
        ask(client, "say a lot", id="huge")
    assert make_store()["get"]("huge") is None
