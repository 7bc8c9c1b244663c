"""A conversation read cold from a database store: its rows come as their UTF-8 (never
decoded to be encoded again), are checked, and read back exactly, each message keeping
its row's bytes as its JSON. Over the real SQLite, Redis and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from durable_store_cases import store_maker
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolnexus.core.frozen import known_json, thaw
from toolnexus.core.rowvector import RowVector
from toolnexus.store._encode import encode_message

# What a string's JSON may hold: escapes of every kind, a control character (a \u
# escape), non-ASCII of two, three and four bytes, and the row's own punctuation.
TRICKY = st.sampled_from(['"', "\\", "\n", "\t", "\x01", "\x7f", "é", "€", "😀", "/", "}{", '":"'])
ANY = st.characters(blacklist_categories=("Cs",))
TEXT = st.lists(st.one_of(TRICKY, ANY), max_size=12).map("".join)
PLAIN = st.builds(
    lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "assistant"]), TEXT
)
OTHER = st.builds(lambda c: {"role": "tool", "tool_call_id": "t", "content": c}, TEXT)
CHAT = st.lists(st.one_of(PLAIN, PLAIN, OTHER), min_size=1, max_size=8)


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def make_store(request, tmp_path, unique):
    yield from store_maker(request.param, request, tmp_path, unique, "cold")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30)
@given(CHAT)
@example(
    [{"role": "user", "content": 'say "hi"\n\\ \x01 é 😀'}, {"role": "assistant", "content": "x"}]
)
@example([{"role": "user", "content": "plain"}, {"role": "assistant", "content": "rows"}])
@example([{"role": "user", "content": ""}, {"role": "assistant", "content": "\\"}])
def test_a_cold_read_gives_back_every_message_and_its_row(make_store, messages):
    cid = f"c-{uuid.uuid4().hex[:8]}"
    make_store()["save"](cid, messages)
    got = make_store()["get"](cid)  # a new store value: nothing of it known
    assert type(got) is RowVector and thaw(got) == messages
    for m, row in zip(got, map(encode_message, messages), strict=True):
        assert known_json(m) == row.encode()  # what a request carries: the stored row
