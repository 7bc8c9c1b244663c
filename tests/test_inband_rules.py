"""The rules of core/wire/inband.py: each envelope shape found (and what is an answer),
every documented error type's status, a code's status at the edges of 100..599, the
fields of an error map, an InBandError's message, body and fields (its excerpts bounded),
and `provider_words` on what it cannot read."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.errors import ProviderError
from toolnexus.core.wire.inband import (
    ERROR_TYPE_STATUS,
    InBandError,
    envelope,
    error_fields,
    inband_error,
    provider_words,
    status_of,
)


def test_every_documented_error_type_s_status():
    assert ERROR_TYPE_STATUS == {
        "invalid_request_error": 400,
        "authentication_error": 401,
        "billing_error": 402,
        "permission_error": 403,
        "not_found_error": 404,
        "request_too_large": 413,
        "rate_limit_error": 429,
        "rate_limit_exceeded": 429,
        "api_error": 500,
        "server_error": 500,
        "timeout_error": 504,
        "overloaded_error": 529,
    }
    assert issubclass(InBandError, ProviderError) and issubclass(InBandError, ValueError)


@pytest.mark.parametrize(
    "obj, err",
    [
        ({"error": {"message": "m"}}, {"message": "m"}),
        ({"type": "error", "error": {"type": "t", "message": "m"}}, {"type": "t", "message": "m"}),
        ({"object": "error", "message": "m"}, {"object": "error", "message": "m"}),
        ({"type": "error", "code": "c"}, {"type": "error", "code": "c"}),
        ({"error": "down", "error_type": "x"}, {"message": "down", "type": "x"}),
        ({"error": "down"}, {"message": "down", "type": None}),
    ],
)
def test_each_envelope_shape_gives_its_error_map(obj, err):
    assert envelope(obj) == err


@pytest.mark.parametrize(
    "obj",
    [
        {"error": None, "output": []},
        {"error": ""},
        {"error": 5},
        {"type": "message", "object": "chat.completion"},
        {},
        ["error"],
        "error",
        None,
    ],
)
def test_what_is_no_envelope(obj):
    assert envelope(obj) is None


@pytest.mark.parametrize(
    "code, error_type, status",
    [
        (100, None, 100),
        (599, None, 599),
        (99, None, None),
        (600, None, None),
        ("502", None, 502),
        ("5020", None, None),
        ("50", None, None),
        ("٥٠٢", None, None),  # digits, not ASCII
        (True, None, None),
        (502.0, None, None),
        (None, "overloaded_error", 529),
        ("rate_limit_exceeded", None, 429),
        ("model_not_found", "api_error", 500),  # the type wins over a code it cannot read
        (503, "overloaded_error", 503),  # an HTTP code wins over the type
        (None, "nope", None),
        (None, 400, None),
        ([], None, None),
    ],
)
def test_a_status_from_the_code_else_the_type(code, error_type, status):
    assert status_of(code, error_type) == status


@pytest.mark.parametrize(
    "err, fields",
    [
        (
            {"type": "rate_limit_error", "code": 7},
            {"status": 429, "error_type": "rate_limit_error", "code": 7},
        ),
        (
            {"code": 404, "message": "m", "status": "NOT_FOUND"},
            {"status": 404, "error_type": "NOT_FOUND", "code": 404},
        ),
        (
            {"type": None, "status": "server_error"},
            {"status": 500, "error_type": "server_error", "code": None},
        ),
        (
            {"type": "error", "code": "rate_limit_exceeded"},
            {"status": 429, "error_type": None, "code": "rate_limit_exceeded"},
        ),
        ({"type": 5, "code": True}, {"status": None, "error_type": None, "code": None}),
        ({"type": "t", "code": 1.5}, {"status": None, "error_type": "t", "code": None}),
        ({"type": "t", "status": "api_error"}, {"status": None, "error_type": "t", "code": None}),
        ({}, {"status": None, "error_type": None, "code": None}),
    ],
)
def test_the_fields_of_an_error_map(err, fields):
    assert error_fields(err) == fields


def test_an_inband_error_s_message_body_and_fields():
    obj = {"error": {"message": "Provider returned error", "code": 502, "type": "upstream"}}
    e = inband_error(obj)
    assert type(e) is InBandError and str(e) == "Provider returned error"
    assert (e.status, e.code, e.error_type) == (502, 502, "upstream")
    assert e.body == json.dumps(obj)
    assert inband_error(obj, text="RAW").body == "RAW"


def test_an_error_without_a_message_says_its_text():
    e = inband_error({"type": "error", "code": "x"}, text='{"type":"error","code":"x"}')
    assert str(e) == 'error in the answer: {"type":"error","code":"x"}'
    e = inband_error({"error": {"message": ""}})
    assert str(e) == 'error in the answer: {"error": {"message": ""}}'
    e = inband_error({"error": {"message": 5}})
    assert str(e).startswith("error in the answer: ")


def test_long_messages_and_bodies_are_cut():
    e = inband_error({"error": {"message": "m" * 1500}}, text="b" * 5000)
    assert str(e) == "m" * 1000 + "... [500 more chars]"
    assert e.body.startswith("b" * 100) and e.body.endswith(" more chars]")
    assert len(e.body) < 5000
    e = inband_error({"error": {}}, text="t" * 300)
    assert str(e) == "error in the answer: " + "t" * 200 + "... [100 more chars]"


def test_an_object_json_cannot_encode_is_its_str_or_its_type():
    class Odd:
        def __repr__(self):
            return "Odd!"

        __str__ = __repr__

    e = inband_error({"error": {}, "x": Odd()})
    assert e.body == '{"error": {}, "x": "Odd!"}'
    loop: dict = {"error": {}}
    loop["self"] = loop
    assert inband_error(loop).body == repr(dict)


def test_no_envelope_is_no_error():
    assert inband_error({"choices": []}) is None and inband_error(None, text="x") is None


@pytest.mark.parametrize(
    "content, words",
    [
        (b'{"type": "error", "error": {"type": "overloaded_error"}}', ("overloaded_error", None)),
        (b'{"error": {"code": 429, "type": "error"}}', (None, 429)),
        (b'{"error": "busy", "error_type": "overloaded"}', ("overloaded", None)),
        (b'{"choices": []}', None),
        (b"<html>bad gateway</html>", None),
        (b"[" * 200 + b"]" * 200, None),
        (b"\xff\xfe", None),
    ],
)
def test_provider_words_never_raise(content, words):
    assert provider_words(content) == words


_FIELD = (
    st.none()
    | st.text(max_size=3)
    | st.integers()
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
_OBJ = st.fixed_dictionaries(
    {},
    optional={"error": _FIELD, "error_type": _FIELD, "object": _FIELD | st.just("error"),
              "type": _FIELD | st.just("error"), "message": _FIELD},
)  # fmt: skip


@given(_OBJ)
def test_a_dict_and_any_other_mapping_are_read_alike(obj):
    assert envelope(obj) == envelope(MappingProxyType(obj))
