"""The rules of core/wire/sse.py no other test asserts: each field's reading (an
`error:` line, `data` alone, one space dropped), comments, a BOM only at the very start,
bytes that are not UTF-8, the decoder's state after each kind of chunk (held, a CR
waiting for its LF, between events), the line bound at its edge on both paths,
`stream_error`'s and `load_json`'s messages, and split characters joined or refused."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap
from toolnexus.core.wire.jsonload import MAX_BYTES
from toolnexus.core.wire.sse import (
    MAX_LINE,
    SSEState,
    decode,
    end,
    feed,
    hold_half,
    load_json,
    start,
    stream_error,
    whole_characters,
)

SMILE = "\U0001f600"
HIGH, LOW = "\ud83d", "\ude00"
OVER = f"a stream line is over {MAX_LINE:,} bytes: not read further"


def _events(*chunks: bytes) -> list[tuple[str, str]]:
    state, out = start(), []
    for chunk in chunks:
        state, events = feed(state, chunk)
        out += events
    return [(e["event"], e["data"]) for e in (*out, *end(state))]


# ---- fields --------------------------------------------------------------------------------


def test_an_event_is_a_read_only_map_named_message_by_default():
    (e,) = decode(b"data: a\ndata:b\ndata:  c\n\n")
    assert type(e) is MappingProxyType and dict(e) == {"event": "message", "data": "a\nb\n c"}


def test_event_names_and_data_alone():
    assert _events(b"event:x\ndata\ndata: 1\n\nevent:  y\ndata: 2\n\n") == [
        ("x", "\n1"),
        (" y", "2"),
    ]
    assert _events(b"event: gone\n\ndata: 3\n\n") == [("message", "3")]  # a blank resets it


def test_an_error_line_is_an_error_event():
    assert _events(b"error: boom\n\n") == [("error", "boom")]
    assert _events(b"error:x\nerror:  y\n\n") == [("error", "x\n y")]
    assert _events(b"event: ping\ndata: a\nerror: b\n\n") == [("error", "a\nb")]


def test_comments_ids_and_unknown_fields_carry_nothing():
    assert _events(b":\n: ping\nid: 1\nretry: 5\nfoo: bar\ndata: a\n:x\n\n") == [("message", "a")]
    assert _events(b":\n\n") == []


def test_a_bom_is_dropped_only_at_the_very_start():
    assert _events("\ufeffdata: a\n\n".encode()) == [("message", "a")]
    assert _events(b"data: a\n\n", "\ufeffdata: b\n\n".encode()) == [("message", "a")]
    assert [dict(e) for e in end(feed(start(), "\ufeffdata: c".encode())[0])] == [
        {"event": "message", "data": "c"}
    ]


def test_bytes_that_are_not_utf8_are_replaced():
    assert _events(b"data: a\xffb\n\n") == [("message", "a\ufffdb")]
    assert end(feed(start(), b"data: \xfe")[0])[0]["data"] == "\ufffd"


# ---- the state -------------------------------------------------------------------------------


def test_a_fresh_state():
    assert start() == SSEState((), 0, False, "", (), True) == SSEState()
    s = start()
    assert (s.buffer, s.held, s.skip_lf, s.event, s.data, s.fresh) == ((), 0, False, "", (), True)


def test_a_chunk_without_a_line_end_is_held():
    s, ev = feed(start(), b"data")
    assert ev == () and s == SSEState((b"data",), 4, False, "", (), True)
    s, ev = feed(s, b": x")
    assert ev == () and s == SSEState((b"data", b": x"), 7, False, "", (), True)
    assert feed(s, b"") == (s, ())


def test_the_state_between_events_and_inside_one():
    s, ev = feed(start(), b"data: a\n\n")
    assert s == SSEState(fresh=False) and [e["data"] for e in ev] == ["a"]
    s, _ = feed(start(), b"event: x\n")
    assert s == SSEState((), 0, False, "x", (), False)
    s, _ = feed(start(), b"data: a\ndat")
    assert s == SSEState((b"dat",), 3, False, "", ("a",), False)
    s, _ = feed(start(), b":ping\r")
    assert s == SSEState((), 0, True, "", (), False)
    s, _ = feed(start(), b":ping\n")
    assert s == SSEState((), 0, False, "", (), False)


def test_a_line_end_alone_dispatches_at_once():
    s, _ = feed(start(), b"data: a\n")
    assert [e["data"] for e in feed(s, b"\n")[1]] == ["a"]
    assert [e["data"] for e in feed(s, b"\ndata: b")[1]] == ["a"]


def test_text_after_the_last_line_end_is_kept_for_the_next_chunk():
    assert _events(b"data: a\nd", b"ata: b\n\n") == [("message", "a\nb")]
    assert _events(b"data: a\nda", b"ta: b\n\n") == [("message", "a\nb")]


def test_a_cr_waits_for_its_lf_only_until_other_bytes_come():
    assert _events(b"data: a\r", b"\n\r\n") == [("message", "a")]
    # after the CR, other bytes: a later LF is a line end of its own
    assert _events(b"data: a\r", b"b", b"\n\n") == [("message", "a")]
    s, _ = feed(feed(start(), b"data: a\r")[0], b"b")
    assert s.skip_lf is False and s.held == 1


def test_the_line_bound_while_a_line_is_held():
    s, _ = feed(start(), b"x" * (MAX_LINE - 10))
    s, _ = feed(s, b"x" * 10)
    assert s.held == MAX_LINE
    with pytest.raises(ProviderError) as e:
        feed(s, b"x")
    assert str(e.value) == OVER
    assert MAX_LINE == MAX_BYTES + 1024


def test_the_line_bound_after_a_line_end():
    s, _ = feed(start(), b"\n" + b"x" * MAX_LINE)
    assert s.held == MAX_LINE
    with pytest.raises(ProviderError) as e:
        feed(start(), b"\n" + b"x" * (MAX_LINE + 1))
    assert str(e.value) == OVER


# ---- errors -------------------------------------------------------------------------------


def test_a_stream_error_from_json_text():
    data = '{"type":"error","error":{"type":"overloaded_error","message":"Busy","code":"c"}}'
    e = stream_error(data)
    assert (str(e), e.status, e.error_type, e.code, e.body) == (
        "Busy",
        529,
        "overloaded_error",
        "c",
        data,
    )


def test_a_stream_error_from_a_decoded_object_or_plain_text():
    e = stream_error({"message": "m", "type": "server_error"})
    assert (str(e), e.status, e.body) == ("m", 500, '{"message": "m", "type": "server_error"}')
    e = stream_error("upstream went away")
    assert str(e) == "error event in stream: upstream went away"  # text is no message
    assert e.body == "upstream went away" and e.status is None
    assert str(stream_error('"boom"')) == "boom"  # JSON text: its message
    e = stream_error({"error": {"code": 503}, "when": object})
    assert str(e) == f"error event in stream: {e.body}" and e.status == 503
    assert "<class 'object'>" in e.body


def test_a_stream_error_without_a_message_says_its_data_cut():
    e = stream_error("[" + "1," * 300 + "1]")
    assert str(e) == "error event in stream: " + ("[" + "1," * 300)[:200] + "... [403 more chars]"
    assert stream_error("").args[0] == "error event in stream: "
    e = stream_error({"message": "m" * 1200})
    assert str(e) == "m" * 1000 + "... [200 more chars]"


def test_a_cyclic_error_object_is_named_by_its_type():
    loop: dict = {"message": "x"}
    loop["self"] = loop
    e = stream_error(loop)
    assert str(e) == "x" and e.body == repr(dict)


def test_load_json_takes_only_an_object():
    assert load_json('{"a": [1]}') == {"a": [1]}
    with pytest.raises(ProviderError) as e:
        load_json("[1]")
    assert str(e.value) == "unreadable stream event: [1]" and e.value.body == "[1]"
    with pytest.raises(ProviderError) as e:
        load_json('{"a": ' + "x" * 300)
    assert str(e.value).startswith("unreadable stream event (Expecting value: line 1 column 7")
    assert str(e.value).endswith('): {"a": ' + "x" * 194 + "... [106 more chars]")
    assert e.value.body.startswith('{"a": x') and e.value.__cause__ is None


# ---- characters ---------------------------------------------------------------------------


def test_split_characters_are_joined_in_every_kind_of_container():
    value = {
        "a": [HIGH + LOW],
        "b": (1, "x" + HIGH + LOW),
        "c": FrozenMap({"d": pvector([None, True, 2.5, HIGH + LOW])}),
        "e": MappingProxyType({"f": HIGH + LOW}),
        "g": ["plain", "é"],
    }
    out = whole_characters(value)
    assert out == {
        "a": [SMILE],
        "b": (1, "x" + SMILE),
        "c": {"d": [None, True, 2.5, SMILE]},
        "e": {"f": SMILE},
        "g": ["plain", "é"],
    }
    assert type(out["c"]) is FrozenMap and type(out["e"]) is MappingProxyType


@pytest.mark.parametrize(
    "value",
    [
        {"a": ["é", 1, None]},
        ("ascii", "ü"),
        FrozenMap({"a": pvector(["ü"])}),
        {1, HIGH},  # a set is not looked into
        HIGH.encode("utf-8", "surrogatepass"),
        5,
        None,
    ],
)
def test_a_value_without_split_characters_is_the_same_value(value):
    assert whole_characters(value) is value


@pytest.mark.parametrize(
    "value",
    [
        HIGH + LOW,
        [HIGH + LOW],
        (HIGH + LOW,),
        MappingProxyType({"a": HIGH + LOW}),
        pvector([[HIGH + LOW]]),
    ],
)
def test_a_split_character_is_found_at_any_depth(value):
    assert whole_characters(value) != value


def test_a_split_character_in_a_list_of_another_class_is_joined():
    class Items(list):
        pass

    assert whole_characters({"a": Items([HIGH + LOW])}) == {"a": [SMILE]}


def test_a_lone_half_is_an_error_naming_where_and_what():
    with pytest.raises(ProviderError) as e:
        whole_characters({"t": ["ok " + HIGH + " x"]})
    assert str(e.value) == (
        "the provider sent half of a character in its answer (a lone UTF-16 surrogate"
        " '\\ud83d' at 3): not text any store could keep"
    )
    assert e.value.body == "ok \\ud83d x"
    with pytest.raises(
        ProviderError, match="^the provider sent half of a character in a tool call"
    ):
        whole_characters(LOW + "é", "a tool call")
    with pytest.raises(ProviderError) as e:
        whole_characters("é" * 300 + LOW)
    assert e.value.body == "é" * 200 + "... [106 more chars]"  # "\\ude00" is 6 of them


@pytest.mark.parametrize(
    "held, delta, shown, kept",
    [
        ("", "a", "a", ""),
        ("", "", "", ""),
        ("", "a\ud800", "a", "\ud800"),
        ("", "a\udbff", "a", "\udbff"),
        ("", "a\udc00", "a\udc00", ""),  # a low half is never held
        ("", "a\ud7ff", "a\ud7ff", ""),
        (HIGH, LOW + "!", SMILE + "!", ""),
        (HIGH, "", "", HIGH),
        ("", HIGH + LOW + HIGH, SMILE, HIGH),
        ("é", "ü", "éü", ""),
    ],
)
def test_hold_half(held, delta, shown, kept):
    assert hold_half(held, delta) == (shown, kept)
