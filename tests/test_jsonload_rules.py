"""The rules of core/wire/jsonload.py: `load`'s byte and depth bounds at their edges and
their messages, what it takes (str, bytes, bytearray), NaN refused, and
`nesting_exceeds` against a model of it (brackets in strings and escapes not counted,
an unclosed string's counted)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.wire.jsonload import (
    MAX_BYTES,
    MAX_DEPTH,
    JSONLimitError,
    load,
    nesting_exceeds,
)


def test_the_default_bounds():
    assert (MAX_DEPTH, MAX_BYTES) == (100, 32 * 1024 * 1024)
    assert issubclass(JSONLimitError, ValueError)


@pytest.mark.parametrize(
    "data", ['{"a": [1, "é"]}', '{"a": [1, "é"]}'.encode(), bytearray('{"a": [1, "é"]}'.encode())]
)
def test_load_reads_text_bytes_and_bytearrays(data):
    assert load(data) == {"a": [1, "é"]}


def test_the_byte_bound_at_its_edge_and_its_message():
    assert load("[1]", max_bytes=3) == [1]
    with pytest.raises(JSONLimitError) as e:
        load("[1] ", max_bytes=3)
    assert str(e.value) == "JSON larger than 3 bytes (4)"
    assert load(" " * (MAX_BYTES - 1) + "1") == 1
    with pytest.raises(JSONLimitError, match=f"^JSON larger than {MAX_BYTES} bytes"):
        load(" " * MAX_BYTES + "1")


def test_the_depth_bound_at_its_edge_and_its_message():
    assert load("[" * 100 + "]" * 100) == json.loads("[" * 100 + "]" * 100)
    with pytest.raises(JSONLimitError) as e:
        load("[" * 101 + "]" * 101)
    assert str(e.value) == "JSON nested deeper than 100 levels"
    assert load('{"a":{"b":1}}', max_depth=2) == {"a": {"b": 1}}
    with pytest.raises(JSONLimitError, match="^JSON nested deeper than 1 levels$"):
        load('{"a":{"b":1}}', max_depth=1)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}'])
def test_nan_and_infinity_are_not_json(text):
    with pytest.raises(ValueError, match="is not JSON$") as e:
        load(text)
    assert not isinstance(e.value, JSONLimitError)


def test_malformed_text_is_a_value_error():
    with pytest.raises(ValueError):
        load("{")
    with pytest.raises(UnicodeDecodeError):
        load(b"\xff")


def _decoded(text):
    # json's own decoder with load's option: its value, or its error's type and message
    reject = json.JSONDecoder(parse_constant=lambda name: _refuse(name))
    try:
        return ("value", reject.decode(text))
    except ValueError as e:
        return ("error", type(e), str(e))


def _refuse(name):
    raise ValueError(f"{name} is not JSON")


def _loaded(text):
    try:
        return ("value", load(text))
    except ValueError as e:
        return ("error", type(e), str(e))


_JSONISH = st.text(alphabet=' \t\n\r{}[]":,0123456789.eE+-tfrunlasNIaiy\\xé', max_size=24)
_DOCS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
).map(json.dumps)


@given(st.one_of(_JSONISH, _DOCS, st.tuples(st.sampled_from(["", " ", "\n\t"]), _DOCS,
                                            st.sampled_from(["", " ", "\r\n", " x", "]"]))
                 .map("".join)))  # fmt: skip
def test_load_decodes_as_json_decode_does_values_and_errors(text):
    # load runs JSONDecoder.decode's steps inline: the same value, or the same error
    # (type and message, position included), for any text within the bounds
    assert _loaded(text) == _decoded(text)


def test_a_recursion_error_while_decoding_is_a_limit_error():
    import sys

    text = "[" * 90 + "]" * 90

    def deep(n):
        return deep(n - 1) if n else load(text)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        with pytest.raises(JSONLimitError) as e:
            deep(350)
    finally:
        sys.setrecursionlimit(limit)
    assert str(e.value) == "JSON nested too deep to decode here (100 allowed)"
    assert e.value.__cause__ is None and e.value.__suppress_context__


def _model_depth(text: str) -> int:
    """The deepest nesting of well-formed JSON, read by walking it as json does."""

    def depth(v):
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        return 0

    return depth(json.loads(text))


json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3)
    ),
    max_leaves=20,
)


@given(json_values, st.integers(0, 8))
def test_nesting_exceeds_is_exact_for_well_formed_json(value, bound):
    text = json.dumps(value)
    assert nesting_exceeds(text, bound) == (_model_depth(text) > bound)


@pytest.mark.parametrize(
    "text, bound, exceeds",
    [
        ("[[]]", 2, False),
        ("[[]]", 1, True),
        ('["[[[[", {"a": "{{{{"}]', 2, False),  # brackets in strings do not count
        ('["\\"[[[["]', 1, False),  # an escaped quote does not end the string
        ('["\\\\", [[]]]', 2, True),  # an escaped backslash does not escape the quote
        ('["[[[[', 2, True),  # an unclosed string hides nothing
        ("[[[", 2, True),  # malformed: its brackets count all the same
        ("]]][[[", 2, False),  # the decoder stops at the first "]": never deep
        ("", 0, False),
        ('"[[[["', 2, False),  # every bracket in a string: nothing nests
        ('"["', 0, False),
        ('[][]"', 1, False),  # a quote left open is no bracket
        ('[[]]"', 1, True),
        ("[]", 0, True),
        ("[][][]", 1, False),
    ],
)
def test_nesting_exceeds_at_its_cases(text, bound, exceeds):
    assert nesting_exceeds(text, bound) is exceeds


def test_nesting_exceeds_by_default_is_the_load_bound():
    assert nesting_exceeds("[" * 100 + "]" * 100) is False
    assert nesting_exceeds("[" * 101 + "]" * 101) is True
    assert nesting_exceeds("{}" * 500) is False  # many brackets, none deep


@given(st.one_of(_JSONISH, _DOCS).map(lambda t: t.encode("utf-8")) | st.binary(max_size=12))
def test_bytes_and_a_bytearray_of_them_load_alike(data):
    # bytes are decoded as they are (no copy first); a bytearray is copied: same outcome
    assert _loaded(data) == _loaded(bytearray(data))
