"""Reading a chat completions answer's JSON (core/wire/openai_read.py), rule by rule: the
shape checks and their messages, the fields kept as they came, arguments as JSON text.
Pure, no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.wire import openai_read as R
from toolnexus.core.wire.common import MalformedResponse


def test_the_call_fields_the_loop_reads():
    assert frozenset({"id", "type", "function", "index"}) == R.READ_CALL


def test_extra_fields_are_the_unread_ones_that_say_something():
    read = frozenset({"id"})
    assert R.extra_fields({"id": 1}, read) == {}
    given = {"id": 1, "a": 0, "b": False, "n": None, "s": "", "l": [], "d": {}, "x": "v"}
    assert R.extra_fields(given, read) == {"a": 0, "b": False, "x": "v"}
    assert R.extra_fields({"reasoning_content": ""}, read) == {"reasoning_content": ""}
    assert R.extra_fields({"reasoning_content": None}, read) == {}
    assert R.extra_fields({"reasoning_content": []}, read) == {}
    assert R.extra_fields({}, read) == {}


def test_arguments_are_json_text():
    assert R.args_text('{"x": 1}') == '{"x": 1}'
    assert R.args_text({"x": [1, "é"]}) == '{"x":[1,"é"]}'
    assert R.args_text(None) == "null"


def test_mapping_gives_an_object_or_names_what_is_wrong():
    d = {"a": 1}
    assert R.mapping(d, "w") is d
    f = FrozenMap(d)
    assert R.mapping(f, "w") is f
    assert R.mapping(None, "w") == {}
    with pytest.raises(MalformedResponse, match=r"^choices\[0\] is a JSON list, not an object$"):
        R.mapping([1], "choices[0]")
    with pytest.raises(MalformedResponse, match="^w is a JSON str, not an object$"):
        R.mapping("x", "w")


def test_array_gives_an_array_or_names_what_is_wrong():
    items = [1]
    assert R.array(items, "w") is items
    for ok in [(1,), pvector([1])]:
        assert R.array(ok, "w") is ok
    assert R.array(None, "w") == ()
    with pytest.raises(MalformedResponse, match="^tool_calls is a JSON dict, not an array$"):
        R.array({}, "tool_calls")
    with pytest.raises(MalformedResponse, match="^w is a JSON str, not an array$"):
        R.array("x", "w")


def test_str_or_none():
    assert R.str_or_none("a") == "a" and R.str_or_none("") == ""
    assert R.str_or_none(1) is None and R.str_or_none(None) is None
