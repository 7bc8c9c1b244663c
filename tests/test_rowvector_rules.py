"""A transcript read from rows (`RowVector`): the pvector of its decoded rows in every
way a reader can look, every row checked when it is made, its plain text messages built
only when read, and a cold exchange that builds none of them."""

from __future__ import annotations

import json
import operator
import pickle

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from toolnexus.core.frozen import known_json
from toolnexus.core.rowvector import RowVector, all_plain, plain_rows, starts_with
from toolnexus.store._decode import read_rows_at_once, read_rows_lazily

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
PLAIN = st.builds(lambda role, content: {"role": role, "content": content},
                  st.sampled_from(["user", "assistant"]), TEXT)  # fmt: skip
OTHER = st.one_of(
    st.builds(lambda c: {"role": "system", "content": c}, TEXT),
    st.builds(lambda c, n: {"role": "user", "content": c, "name": n}, TEXT, TEXT),
    st.builds(lambda c: {"content": c, "role": "user"}, TEXT),  # another key order
    st.builds(lambda i: {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, TEXT),
    st.builds(lambda i, c: {"role": "tool", "tool_call_id": i, "content": c}, TEXT, TEXT),
    st.builds(lambda c: {"role": "user", "content": [{"type": "text", "text": c}]}, TEXT),
)  # fmt: skip
MESSAGES = st.lists(st.one_of(PLAIN, OTHER), max_size=8)


def rows_of(messages: list) -> tuple[str, ...]:
    """The rows a store writes: compact JSON, keys in the message's order."""
    return tuple(json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in messages)


def lazily(messages: list) -> RowVector:
    vector = read_rows_lazily(rows_of(messages))
    assert type(vector) is RowVector
    return vector


def is_plain(row: str) -> bool:
    """What a plain row is, by decoding it: written as the store writes, exactly a role
    (user or assistant) and a non-empty text, in that order."""
    m = json.loads(row)
    shape = type(m) is dict and list(m) == ["role", "content"]
    if not shape or m["role"] not in ("user", "assistant") or type(m["content"]) is not str:
        return False
    return bool(m["content"]) and row == json.dumps(m, ensure_ascii=False, separators=(",", ":"))


@given(st.lists(st.one_of(PLAIN, OTHER, st.builds(lambda r: {"role": r, "content": ""},
                                                   st.sampled_from(["user", "assistant"]))),
                max_size=10))  # fmt: skip
def test_plain_rows_are_exactly_the_plain_messages(messages):
    rows = rows_of(messages)
    found = plain_rows(rows)
    assert [bool(k) for k in found] == [is_plain(r) for r in rows]
    for row, k in zip(rows, found, strict=True):
        if k:
            assert json.loads(row[k - 1 : -1]) == json.loads(row)["content"]


# Pieces a corrupt row (or one written by hand) may be made of: the plain prefixes,
# ends, quotes, escapes good and bad, newlines and control characters.
PIECES = st.sampled_from([
    '{"role":"user","content":"', '{"role":"assistant","content":"', '"}', '"', "}", "{",
    "\\", "\\\\", '\\"', "\\n", "\\u0041", "\\uZZ", "\\x", "\n", "\x01", "a", "abcde", "é",
])  # fmt: skip
NEAR_PLAIN = st.one_of(
    st.builds("".join, st.lists(PIECES, max_size=6)),
    st.builds(lambda p, body, end: p + "".join(body) + end,
              st.sampled_from(['{"role":"user","content":"', '{"role":"assistant","content":"']),
              st.lists(PIECES, max_size=4),
              st.sampled_from(['"}', '"} ', '"', "}", '""}', '"]', '"x'])),
)  # fmt: skip


def plain_by_decoding(row: str) -> bool:
    """A plain row, by decoding: a user or assistant text, not empty, written compact in
    that key order (its text any well-formed JSON string: escapes as the author wrote)."""
    try:
        m = json.loads(row)
        if type(m) is not dict or list(m) != ["role", "content"] or not m["content"]:
            return False
        prefix = '{"role":"' + m["role"] + '","content":'
        literal = row[len(prefix) : -1]
        return (
            m["role"] in ("user", "assistant")
            and row.startswith(prefix)
            and row.endswith('"}')
            and type(json.loads(literal)) is str
            and json.loads(literal) == m["content"]
        )
    except (ValueError, TypeError):
        return False


@given(st.lists(st.one_of(NEAR_PLAIN, PLAIN.map(lambda m: rows_of([m])[0])), max_size=8))
@example(['{"role":"user","content":"a"x', '{"role":"user","content":"b"}'])  # not "}" after
@example(['{"role":"user","content":"}', '{"role":"user","content":"abcd"}'])  # cut short
@example(['{"role":"assistant","content":""}', '{"role":"user","content":"abcde"}'])  # empty
@example(['{"role":"user","content":"a\\"}', '{"role":"user","content":"a\\\\"}'])  # open, closed
@example(['{"role":"user","content":"a"} ', '{"role":"user","content":"a"}}'])  # more after
def test_rows_told_at_once_are_what_decoding_each_says(rows):
    """However rows are broken, the checks made over all of them at once (C-speed passes)
    say of each what decoding it says."""
    assert [bool(k) for k in plain_rows(rows)] == list(map(plain_by_decoding, rows))


def unicode_escaped(row: str) -> bool:
    """Whether a row holds a \\u escape (backslashes paired from the left, as json reads)."""
    return "\\u" in row.replace("\\\\", "")


@given(st.lists(st.one_of(NEAR_PLAIN, PLAIN.map(lambda m: rows_of([m])[0])), max_size=8))
@example(['{"role":"user","content":"a"x', '{"role":"user","content":"b"}'])  # not "}" after
@example(['{"role":"user","content":"}', '{"role":"user","content":"abcd"}'])  # cut short
@example(['{"role":"assistant","content":""}', '{"role":"user","content":"abcde"}'])  # empty
@example(['{"role":"user","content":"\\n"}', '{"role":"user","content":"\\n"}'])  # all escape
@example(['{"role":"user","content":"a\\"}', '{"role":"user","content":"a\\\\"}'])  # open
@example(['{"role":"user","content":"a\\\\"}', '{"role":"user","content":"a\\\\\\"}'])
@example(['{"role":"user","content":"a"} ', '{"role":"user","content":"a"}}'])  # more after
@example(['{"role":"user","content":"a"}"}', '{"role":"user","content":"b"}'])  # a ninth quote
@example(['{"role":"user","content":"a\x01"}'])  # a control character
@example(['{"role":"user","content":"a\n"}'])  # a raw newline: a joint where none is
@example(['{"role":"user","content":"a"}\n{"role":"user","content":"b"}'])  # two in one
@example(['{"role":"user","content":"a\\q"}', '{"role":"user","content":"a\\u0041"}'])
@example(['{"role":"user","content":"a"}', '{"role":"user","content":"b"', 'x"}'])
@example(['{"role":"user","content":"a"}', '{"role":"user","content":"b"}}'])  # last: no end
@example([' {"role":"user","content":"a"}', '{"role":"user","content":"b"}'])  # first: no start
def test_rows_told_whole_are_what_decoding_each_says(rows):
    """However rows are broken, the passes over all of them joined say they are all plain
    exactly when decoding each says so (but when one holds a \\u escape: not told whole)."""
    utf8 = [row.encode(errors="surrogatepass") for row in rows]
    every = bool(rows) and all(map(plain_by_decoding, rows))
    if any(map(unicode_escaped, rows)):
        assert not all_plain(utf8)
    else:
        assert all_plain(utf8) == every


@given(st.lists(PLAIN.map(lambda m: rows_of([m])[0]), min_size=1, max_size=8), st.data())
def test_a_row_not_utf8_or_not_bytes_is_not_told_whole(rows, data):
    utf8 = [row.encode() for row in rows]
    i = data.draw(st.integers(0, len(rows) - 1))
    bad = data.draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc3"]))  # not UTF-8
    broken = [*utf8[:i], utf8[i][:-2] + bad + b'"}', *utf8[i + 1 :]]
    assert not all_plain(broken)
    assert not all_plain([*utf8[:i], rows[i], *utf8[i + 1 :]])  # a str among them
    told = all(map(plain_by_decoding, rows)) and not any(map(unicode_escaped, rows))
    assert all_plain(utf8) == told


@given(MESSAGES, st.data())
def test_a_row_vector_is_the_pvector_of_its_decoded_rows(messages, data):
    if not messages:
        assert read_rows_lazily(()) is None  # no rows: the caller's empty transcript
        return
    rows = rows_of(messages)
    vector, expected = lazily(messages), pvector(read_rows_at_once(rows))
    assert isinstance(vector, PVector) and len(vector) == len(expected)
    assert vector == expected and expected == vector and hash(vector) == hash(expected)
    assert not (vector != expected) and repr(vector) == repr(expected)
    i = data.draw(st.integers(-len(rows), len(rows) - 1))
    assert vector[i] == expected[i] and vector[i] is vector[i]  # built once, kept
    assert known_json(vector[i]) == rows[i].encode()  # its row, as the request carries it
    a, b = data.draw(st.integers(-9, 9)), data.draw(st.integers(-9, 9))
    more = data.draw(st.lists(PLAIN, max_size=3))
    assert vector[a:b] == expected[a:b] and vector[a:b:-1] == expected[a:b:-1]
    assert vector.extend(more) == expected.extend(more) and vector + more == expected + more
    assert vector.extend(more)[a:b] == expected.extend(more)[a:b]
    assert vector.append(more) == expected.append(more)
    assert list(vector) == list(expected) and vector.tolist() == expected.tolist()
    assert list(reversed(vector)) == list(reversed(expected))
    assert vector.set(i, 1) == expected.set(i, 1) and vector.delete(i) == expected.delete(i)
    assert vector.index(expected[i]) == expected.index(expected[i])
    assert vector.count(expected[i]) == expected.count(expected[i])
    assert expected[i] in vector and pickle.loads(pickle.dumps(vector)) == expected
    assert vector.evolver().persistent() == expected


@given(MESSAGES, st.integers(0, 8), st.lists(PLAIN, max_size=3), st.lists(PLAIN, max_size=3))
def test_starts_with_tells_what_identity_would(messages, cut, first, then):
    if not messages:
        return
    vector = lazily(messages)
    longer = vector.extend(first)
    longest = longer.extend(then)
    for whole, prefix in ((longest, longer), (longer, vector), (longest, vector),
                          (vector, longer), (vector, vector[:cut]), (vector[:cut], vector),
                          (longer, vector[:cut])):  # fmt: skip
        by_identity = len(prefix) <= len(whole) and all(map(lambda x, y: x is y, prefix, whole))
        assert starts_with(whole, prefix) == by_identity


@given(MESSAGES, st.data())
def test_every_row_is_checked_when_read(messages, data):
    """A row made not JSON, or not a message, refuses the whole read (the caller then
    reads row by row, naming it); a vector made is made of rows that decode."""
    rows = list(rows_of(messages + [{"role": "user", "content": "x"}]))
    i = data.draw(st.integers(0, len(rows) - 1))
    cut = data.draw(st.integers(0, len(rows[i]) - 1))
    broken = data.draw(st.sampled_from([
        rows[i][:cut], rows[i] + "x", rows[i][:cut] + "\x01" + rows[i][cut:],
        rows[i].replace('"', "'", 1), rows[i][:-1] + "]", rows[i][:-1] + '"', rows[i][:-1],
        rows[i] + "}",
    ]))  # fmt: skip
    rows[i] = broken
    vector = read_rows_lazily(tuple(rows))
    if vector is not None:
        assert list(vector) == [json.loads(r) for r in rows]


@given(MESSAGES, st.data())
def test_a_row_is_kept_once_as_its_utf8_the_very_json_of_its_message(messages, data):
    """The vector keeps each row's UTF-8 as given (no text beside it): the message built
    from a row, read alone or walked, keeps that very object as its JSON."""
    rows = rows_of(messages)
    encoded = tuple(row.encode() for row in rows)
    vector = read_rows_lazily(rows, encoded)
    assert type(vector) is RowVector or not messages  # no rows: read the usual way
    if messages and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(messages) - 1))
        assert vector[i] == messages[i] and known_json(vector[i]) is encoded[i]
    if vector is None:
        return
    assert list(vector) == messages
    assert all(map(operator.is_, map(known_json, vector), encoded))
    assert all(map(operator.is_, vector.jsons(), encoded))


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def make_store(request, tmp_path, unique):
    """A maker of store values over one place of each durable kind (a new value: an
    empty memo, as a worker that never saw the conversation)."""
    from toolnexus.store import sqlite_store

    if request.param == "sqlite":
        yield lambda: sqlite_store(tmp_path / "c.db")
        return
    if request.param == "redis":
        from toolnexus.store import redis_store

        url = request.getfixturevalue("redis_url")
        yield lambda: redis_store(url, prefix=f"tnx-test:{unique}:")
        redis_store(url, prefix=f"tnx-test:{unique}:")["delete"]("c")
        return
    import psycopg

    from toolnexus.store import postgres_store

    dsn, made, table = request.getfixturevalue("postgres_dsn"), [], f"rows_{unique}"
    yield lambda: made.append(postgres_store(dsn, table)) or made[-1]
    for s in made:
        s["close"]()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_heads")


def test_a_cold_exchange_builds_no_plain_message(make_store):
    import httpx

    import toolnexus as tn
    from toolnexus.testing import openai_response, text_reply

    answer = json.dumps(openai_response(text_reply("Noted."))).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=answer))
    history = [{"role": ("user", "assistant")[i % 2], "content": f"line {i}"} for i in range(40)]
    make_store()["save"]("c", history)
    client = tn.create_client(base_url="http://model.test/v1", model="m", store=make_store(),
                              transport=transport)  # fmt: skip
    r = tn.run(client, "one more", id="c")
    messages = r["messages"]
    assert type(messages) is RowVector and r["text"] == "Noted."
    assert all(type(c) is int for c in messages._rows.cells)  # none built
    assert messages == pvector([*history, {"role": "user", "content": "one more"},
                                {"role": "assistant", "content": "Noted."}])  # fmt: skip
    assert type(messages._rows.cells[0]) is not int  # built when read
    again = tn.run(client, "and again", id="c")["messages"]  # warm: the same rows, shared
    assert again._rows is messages._rows and len(again) == 44


def _chat(n: int) -> list[dict]:
    """n messages of about 200 bytes of JSON, some not ASCII, every 50th pair a tool call
    and its result (rows decoded at load)."""
    out: list[dict] = []
    for i in range(n):
        if i % 50 == 48:
            call = {"id": f"call_{i}", "type": "function",
                    "function": {"name": "look", "arguments": '{"q":"fox"}'}}  # fmt: skip
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif i % 50 == 49:
            out.append({"role": "tool", "tool_call_id": f"call_{i - 1}", "content": "found"})
        else:
            words = "the quick brown fox jumps over the lazy dog, déjà vu " * 3
            out.append({"role": ("user", "assistant")[i % 2], "content": f"{i}: {words}"})
    return out


def _held_by(do) -> int:
    """The bytes still allocated (tracemalloc: every Python allocation) once `do()` has
    run and the collector with it: what the process keeps of what it did."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        do()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("how", ["get", "run"])
def test_a_conversation_read_cold_keeps_at_most_twice_its_json(make_store, how):
    """Issue 35 item 3: what a process keeps for a conversation it read cold (the store's
    memo; with `run`, the runtime's memo of the exchange it saved too) costs at most
    twice the conversation's JSON: each row is kept once, as its UTF-8."""
    import httpx

    import toolnexus as tn
    from toolnexus.store._encode import encode_message
    from toolnexus.testing import openai_response, text_reply

    answer = json.dumps(openai_response(text_reply("Noted."))).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=answer))
    writer = make_store()
    writer["save"]("c", _chat(1000))
    writer["save"]("warm", _chat(4))
    reader = make_store()
    client = tn.create_client(base_url="http://model.test/v1", model="m", store=reader,
                              transport=transport)  # fmt: skip
    tn.run(client, "first", id="warm")  # first-use costs (a connection, caches): not counted
    if how == "get":
        held = _held_by(lambda: reader["get"]("c"))
    else:
        held = _held_by(lambda: tn.run(client, "one more", id="c"))
    rows = reader["get"]("c")
    size = sum(len(encode_message(m).encode()) for m in rows)
    writer["delete"]("warm")
    assert len(rows) == 1000 + 2 * (how == "run") and size > 150_000
    assert held <= 2 * size, f"kept {held} bytes for {size} bytes of JSON"
