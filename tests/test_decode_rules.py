"""The rules of store/_decode.py, read directly: `read_rows_at_once` gives the messages
(str or bytes rows, lists made vectors, each keeping its row as its JSON) or None for
whatever needs reading row by row (mixed kinds, a row too long or possibly too deep at
the edges of those bounds, not JSON, NaN, not one message, a bad role or tool_calls);
`read_message_row` keeps its row and names what is not a message."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from toolnexus.core.frozen import FrozenMap, known_json
from toolnexus.core.wire.jsonload import MAX_BYTES, MAX_DEPTH
from toolnexus.store._decode import READERS, _not_json, read_message_row, read_rows_at_once

USER = '{"role":"user","content":"hi"}'
CALLS = '{"role":"assistant","content":null,"tool_calls":[{"id":"c","args":[1,{"x":[2]}]}]}'
PVECTOR = type(pvector())


def _row(content: str) -> str:
    return '{"role":"user","content":"' + content + '"}'


@pytest.mark.parametrize("kind", [str, bytes])
def test_rows_of_one_kind_are_read_at_once_keeping_their_text(kind):
    rows = [USER, CALLS, '{"role":"tool","content":"[not a list]"}']
    texts = rows if kind is str else [r.encode() for r in rows]
    out = read_rows_at_once(texts)
    assert out == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c", "args": [1, {"x": [2]}]}]},
        {"role": "tool", "content": "[not a list]"},
    ]  # fmt: skip
    assert all(type(m) is FrozenMap for m in out)
    calls = out[1]["tool_calls"]
    assert type(calls) is PVECTOR and type(calls[0]) is FrozenMap
    assert type(calls[0]["args"]) is PVECTOR and type(calls[0]["args"][1]["x"]) is PVECTOR
    assert [known_json(m) for m in out] == [r.encode() for r in rows]


def test_no_rows_are_no_messages():
    assert read_rows_at_once([]) == []


@pytest.mark.parametrize(
    "texts",
    [
        [USER, USER.encode()],
        [USER.encode(), USER],
        [bytearray(USER.encode())],
        [memoryview(USER.encode())],
        [1],
    ],
)
def test_rows_of_mixed_or_other_kinds_are_read_one_by_one(texts):
    assert read_rows_at_once(texts) is None


@pytest.mark.parametrize(
    "row",
    [
        '{"role":"user",',  # not JSON
        '{"role":"user","n":NaN}',
        '{"role":"user","n":Infinity}',
        f"{USER},{USER}",  # two values in one row
        "1",
        "[1]",
        '"text"',
        '{"content":"no role"}',
        '{"role":5}',
        '{"role":"assistant","tool_calls":"many"}',
        '{"role":"assistant","tool_calls":{"a":1}}',
    ],
)
def test_a_row_that_is_not_one_message_is_left_to_the_row_reader(row):
    assert read_rows_at_once([USER, row]) is None
    assert read_rows_at_once([USER.encode(), row.encode()]) is None


def test_null_tool_calls_are_a_message():
    out = read_rows_at_once(['{"role":"assistant","tool_calls":null}'])
    assert out == [{"role": "assistant", "tool_calls": None}]


@pytest.mark.parametrize("kind", [str, bytes])
def test_the_byte_bound_at_its_edge(kind):
    fill = MAX_BYTES - len(_row(""))
    row = _row("x" * fill)
    assert len(row) == MAX_BYTES
    text = row if kind is str else row.encode()
    assert len(read_rows_at_once([text])[0]["content"]) == fill
    longer = _row("x" * (fill + 1))
    assert read_rows_at_once([longer if kind is str else longer.encode()]) is None


@pytest.mark.parametrize("kind", [str, bytes])
@pytest.mark.parametrize("bracket", ["{", "["])
def test_a_row_that_could_nest_too_deep_is_left_to_the_row_reader(kind, bracket):
    # Brackets are counted wherever they are (in a string too) in rows of 2 * MAX_DEPTH
    # characters or more: MAX_DEPTH - 1 of them may be read at once, MAX_DEPTH may not.
    def at(n: int, length: int):
        row = _row(bracket * n + " " * (length - len(_row("")) - n))
        assert len(row) == length
        return row if kind is str else row.encode()

    long = 2 * MAX_DEPTH
    assert read_rows_at_once([at(MAX_DEPTH - 2, long)]) is not None  # + the row's own {
    assert read_rows_at_once([at(MAX_DEPTH - 1, long)]) is None
    assert read_rows_at_once([at(MAX_DEPTH - 1, long - 1)]) is not None  # too short to count
    assert read_rows_at_once([USER, at(MAX_DEPTH - 1, 3 * long)]) is None


def test_a_row_nested_deep_in_fact_is_read_when_under_the_bound():
    deep = '{"role":"user","content":' + "[" * 90 + "]" * 90 + "}"
    deep = deep + " " * (2 * MAX_DEPTH - len(deep))
    out = read_rows_at_once([deep])
    assert out is not None and type(out[0]["content"]) is PVECTOR


def test_one_row_keeps_its_text_as_bytes():
    for row in (USER, USER.encode(), bytearray(USER.encode()), memoryview(USER.encode())):
        m = read_message_row(row)
        assert m == {"role": "user", "content": "hi"} and type(m) is FrozenMap
        assert known_json(m) == USER.encode() and type(known_json(m)) is bytes


def test_one_row_that_is_not_a_message_is_a_value_error():
    with pytest.raises(ValueError) as e:
        read_message_row("[" + "1," * 60 + "1]")
    assert str(e.value) == f"not a message (a map with a string 'role'): {[1] * 61!r:.100}"
    with pytest.raises(ValueError, match="tool_calls must be a list, got int"):
        read_message_row('{"role":"assistant","tool_calls":5}')
    m = read_message_row(CALLS)
    assert type(m["tool_calls"]) is PVECTOR and type(m["tool_calls"][0]["args"]) is PVECTOR


def test_the_readers_by_format_version_and_what_is_not_json():
    assert READERS == {1: read_message_row}
    with pytest.raises(ValueError) as e:
        _not_json("NaN")
    assert str(e.value) == "NaN is not JSON"


@pytest.mark.parametrize(
    "row",
    [
        '{"role":"assistant","tool\\u005fcalls":"many"}',  # the key spelled by an escape
        '{"role":"assistant","\\u0074ool_calls":{"a":1}}',
        '{"role":"assistant","tool_calls":5}',  # no "[" anywhere in the rows
    ],
)
def test_tool_calls_that_are_not_a_list_are_found_however_spelled(row):
    assert read_rows_at_once([USER, row]) is None
    with pytest.raises(ValueError):
        read_message_row(row)


_KEYS = ("tool_calls", "tool\\u005fcalls", "content")
_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='ab[]{}\\"\u00e9', max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xy"), inner),
    max_leaves=6,
)


@st.composite
def _rows(draw):
    """A message row: a role (mostly a string), maybe tool_calls (a list, null or not a
    list), maybe other values; its key maybe spelled by an escape, non-ASCII maybe escaped."""
    role = draw(st.sampled_from(["user", "assistant", "tool"]) | st.integers())
    fields = draw(st.dictionaries(st.sampled_from(_KEYS), _values, max_size=2))
    text = json.dumps({"role": role}, ensure_ascii=draw(st.booleans()))[:-1]
    for key, value in fields.items():
        text += f',"{key}":' + json.dumps(value, ensure_ascii=draw(st.booleans()))
    return text + "}"


@given(st.lists(_rows(), max_size=5), st.booleans())
def test_rows_read_at_once_are_the_rows_read_one_by_one(rows, as_bytes):
    texts = [r.encode() for r in rows] if as_bytes else rows
    try:
        each = [read_message_row(t) for t in texts]
    except ValueError:
        assert read_rows_at_once(texts) is None
        return
    at_once = read_rows_at_once(texts)
    assert at_once == each and [known_json(m) for m in at_once] == [known_json(m) for m in each]
    assert repr(at_once) == repr(each)  # the same types all the way down (pvectors, maps)


def test_rows_given_with_their_bytes_keep_those_bytes():
    rows = [USER, CALLS]
    encoded = [r.encode() for r in rows]
    out = read_rows_at_once(rows, encoded)
    assert out == read_rows_at_once(rows) and type(out[1]["tool_calls"]) is PVECTOR
    assert [known_json(m) for m in out] == encoded
    assert all(known_json(m) is e for m, e in zip(out, encoded, strict=True))
