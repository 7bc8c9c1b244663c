"""The SSE decoder and the streaming accumulators, over the 16 recorded provider streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import thaw
from toolnexus.core.steps import parse_arguments
from toolnexus.core.wire import anthropic, openai, sse

# The recorded streams, copied into the repository (see tests/data/README.md).
FIXTURES = Path(__file__).resolve().parent / "data" / "fixtures" / "sse"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
CODECS = {"openai": openai, "anthropic": anthropic}


def load(name: str) -> tuple[bytes, dict]:
    return (FIXTURES / f"{name}.sse").read_bytes(), json.loads(
        (FIXTURES / f"{name}.json").read_text()
    )


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


def decode_chunks(chunks) -> tuple:
    state, out = sse.start(), []
    for chunk in chunks:
        state, events = sse.feed(state, chunk)
        out.extend(events)
    return (*out, *sse.end(state))


def accumulate(codec, events) -> tuple:
    acc, deltas = codec.stream_start(), []
    for event in events:
        acc, d = codec.stream_event(acc, event)
        deltas.extend(d)
    return acc, deltas


def joined(deltas, kind: str) -> str:
    return "".join(d["delta"] for d in deltas if d["type"] == kind)


def test_fixture_directory_resolves():
    """The recorded streams are in the repository: every clone runs the same tests."""
    assert len(NAMES) == 16


# ---- the decoder -----------------------------------------------------------------


def test_fields_comments_and_dispatch():
    raw = (
        b": comment\n"
        b"event: ping\n\n"  # a name without data dispatches nothing
        b"data\n\n"  # a field without a colon: empty data, dispatched
        b"id: 7\nretry: 10\nfoo: bar\ndata:  two spaces\ndata:x\n\n"
        b"event: message_stop\ndata: {}\n"  # no blank line at the end
    )
    events = [(e["event"], e["data"]) for e in sse.decode(raw)]
    assert events == [("message", ""), ("message", " two spaces\nx"), ("message_stop", "{}")]


def test_bom_only_at_start_and_empty_chunks():
    state, events = sse.feed(sse.start(), b"\xef\xbb")
    state, more = sse.feed(state, b"")
    state, last = sse.feed(state, b"\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\n")
    assert events == more == () and [e["data"] for e in last] == ["a"]
    # A BOM later in the stream is part of a field name, so that line is ignored.


def test_lone_cr_then_lf_in_next_chunk_counts_once():
    chunks = [b"data: a\r", b"\n", b"\r", b"\n", b"data: b\r", b"\r"]
    assert [e["data"] for e in decode_chunks(chunks)] == ["a", "b"]


def test_a_cr_ended_chunk_then_a_lone_lf_chunk_skips_that_lf_only():
    # the LF after a CR is its CRLF's tail, once: an LF in the chunk after it is a line
    # end of its own (it was swallowed too, merging two events into one)
    chunks = [b"data: a\r", b"\n", b"\n", b"data: b\n\n"]
    assert [e["data"] for e in decode_chunks(chunks)] == ["a", "b"]


def test_feed_does_not_modify_its_input():
    state, _ = sse.feed(sse.start(), b"data: x")
    before = tuple(state)
    sse.feed(state, b"y\n\n")
    assert tuple(state) == before


@st.composite
def event_streams(draw):
    """A list of (name, data lines) events and their encoding with mixed line ends."""
    text = st.text(
        st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=12
    )
    events = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["", "ping", "error", "é✓"]), st.lists(text, min_size=1, max_size=3)
            ),
            max_size=6,
        )
    )
    out = bytearray()
    for name, lines in events:
        eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        if draw(st.booleans()):
            out += f": keep-alive{eol}".encode()
        if name:
            out += f"event: {name}{eol}".encode()
        for line in lines:
            out += f"data: {line}{eol}".encode()
        out += eol.encode()
    expected = [(n or "message", "\n".join(lines)) for n, lines in events]
    return bytes(out), expected


@given(event_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_stream_any_split_matches_the_model(stream, cuts):
    raw, expected = stream
    assert [(e["event"], e["data"]) for e in decode_chunks(split(raw, cuts))] == expected


_DATA_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["", "event: x\n", ": ping\n", "\n", "data\n"]),
        st.text(st.sampled_from("ab :{}\r\n\ufeffé"), max_size=6),
        st.sampled_from(["data: ", "data:", "data:  ", "dat: "]),
        st.sampled_from(["\n\n", "\n", "\r\n\r\n", "\n\n\n"]),
    ),
    max_size=4,
).map(lambda parts: "".join(a + c + b + d for a, b, c, d in parts))


def _bytewise(state, raw):
    events: tuple = ()
    for i in range(len(raw)):
        state, got = sse.feed(state, raw[i : i + 1])
        events += got
    return state, events


def _pairs(events):
    return [(e["event"], e["data"]) for e in events]


@given(_DATA_EVENTS, st.booleans())
def test_a_chunk_of_whole_data_events_reads_as_its_bytes_one_by_one(text, fresh):
    # feed's quick read of whole one-line `data: ` events (sse._data_events) gives what
    # the line-by-line read gives (a chunk of one byte never takes the quick read)
    state = sse.start() if fresh else sse._BETWEEN
    raw = text.encode()
    whole_state, whole = sse.feed(state, raw)
    byte_state, bytewise = _bytewise(state, raw)
    assert _pairs(whole + sse.end(whole_state)) == _pairs(bytewise + sse.end(byte_state))
    assert (whole_state.event, whole_state.data) == (byte_state.event, byte_state.data)


def test_the_quick_read_takes_one_line_data_events_only():
    from toolnexus.core.wire.sse import _data_events

    assert _pairs(_data_events('data: {"a": 1}\n\ndata: \n\n')) == [
        ("message", '{"a": 1}'),
        ("message", ""),
    ]
    for text in ("data: a\n", "data: a\r\n\r\n", "data:a\n\n", "data: a\ndata: b\n\n",
                 "event: x\ndata: a\n\n", "data: a\n\n\n\n"):  # fmt: skip
        assert _data_events(text) is None


# ---- recorded streams --------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [None, 1, 7, 64])
def test_recorded_stream(name, size):
    raw, meta = load(name)
    chunks = [raw] if size is None else [raw[i : i + size] for i in range(0, len(raw), size)]
    events = decode_chunks(chunks)
    assert events == sse.decode(raw)
    codec, expect = CODECS[meta["dialect"]], meta["expect"]
    if "error" in expect:
        with pytest.raises(ProviderError) as info:
            accumulate(codec, events)
        assert str(info.value) == expect["error"]["message"]
        return
    acc, deltas = accumulate(codec, events)
    turn = codec.stream_turn(acc)
    assert turn["text"] == expect["text"] == joined(deltas, "text")
    assert turn["finish"] == expect["finish"]
    u = expect["usage"]
    assert (turn["usage"]["prompt_tokens"], turn["usage"]["completion_tokens"]) == (
        u["prompt_tokens"],
        u["completion_tokens"],
    )
    assert turn["usage"]["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert turn["model"] == meta["model"] or meta["model"] in turn["model"]
    calls = [
        (c["id"], c["name"], thaw(parse_arguments(c["arguments"])[0])) for c in turn["tool_calls"]
    ]
    assert calls == [(c["id"], c["name"], c["arguments"]) for c in expect["tool_calls"]]
    starts = [(d["id"], d["name"]) for d in deltas if d["type"] == "tool_call_start"]
    assert starts == [(c["id"], c["name"]) for c in expect["tool_calls"]]
    if "refusal" in expect:
        assert joined(deltas, "refusal") == expect["refusal"]
    if "thinking" in expect:
        assert joined(deltas, "thinking") == expect["thinking"]
        block = next(b for b in turn["message"]["content"] if b["type"] == "thinking")
        assert block["thinking"] == expect["thinking"] and block["signature"]
        assert expect["thinking"] not in turn["text"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("eol", [b"\r\n", b"\r"])
def test_recorded_stream_with_other_line_ends(name, eol):
    raw, _ = load(name)
    other = raw.replace(b"\n", eol)
    assert decode_chunks([other[i : i + 5] for i in range(0, len(other), 5)]) == sse.decode(raw)


@settings(max_examples=40)
@given(st.sampled_from(NAMES or ["-"]), st.lists(st.integers(0, 40_000), max_size=40))
def test_any_split_of_a_recorded_stream_yields_the_same_events(name, cuts):
    raw, _ = load(name)
    assert decode_chunks(split(raw, cuts)) == sse.decode(raw)


def test_every_byte_split_inside_a_four_byte_character():
    raw, meta = load("anthropic_text_emoji")
    at = raw.index("😄".encode())
    for cut in range(at, at + 5):
        assert decode_chunks([raw[:cut], raw[cut:]]) == sse.decode(raw)
    acc, _ = accumulate(anthropic, sse.decode(raw))
    assert anthropic.stream_turn(acc)["text"].endswith("😄")


def test_unterminated_last_event_is_flushed_by_end():
    raw, _ = load("anthropic_text_then_tool_use")
    assert not raw.endswith(b"\n")
    state, events = sse.feed(sse.start(), raw)
    assert events[-1]["event"] != "message_stop"
    assert [e["event"] for e in sse.end(state)] == ["message_stop"]
    acc, _ = accumulate(anthropic, sse.decode(raw))
    assert acc.done


def test_anthropic_tool_json_cut_at_max_tokens_stays_raw():
    raw, meta = load("anthropic_max_tokens_partial_tool_json")
    acc, _ = accumulate(anthropic, sse.decode(raw))
    turn = anthropic.stream_turn(acc)
    (call,) = turn["tool_calls"]
    assert call["arguments"] == meta["expect"]["tool_calls"][0]["arguments_raw"]
    args, why = parse_arguments(call["arguments"])
    assert args is None and "not valid JSON" in why
    # The replayed message keeps a valid (empty) input: the API requires an object.
    block = turn["message"]["content"][-1]
    assert block["type"] == "tool_use" and thaw(block["input"]) == {}


def test_openai_tool_json_cut_short_stays_raw():
    raw, _ = load("openai_tool_call_fragmented")
    events = sse.decode(raw)
    last = max(i for i, e in enumerate(events) if '"arguments"' in e["data"])
    # Cut at max_tokens before the closing brace: the provider still ends the stream.
    length = {"event": "message", "data": json.dumps(
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})}  # fmt: skip
    acc, _ = accumulate(openai, [*events[:last], length])
    (call,) = openai.stream_turn(acc)["tool_calls"]
    assert call["arguments"].startswith('{"a":')
    assert parse_arguments(call["arguments"])[0] is None  # reported to the model, no crash


@pytest.mark.parametrize("name", [n for n in NAMES if "error" not in n])
def test_stream_turn_equals_parse_response_of_the_equivalent_response(name):
    raw, meta = load(name)
    codec = CODECS[meta["dialect"]]
    acc, _ = accumulate(codec, sse.decode(raw))
    response = codec.stream_response(acc)
    response = response[0] if isinstance(response, tuple) else response
    turn = codec.stream_turn(acc)
    if "max_tokens" in name:  # the one turn whose call keeps raw text, by design
        turn = turn.set("tool_calls", codec.parse_response(response)["tool_calls"])
    assert turn == codec.parse_response(response)


# ---- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "codec, raw",
    [
        (
            anthropic,
            b"event: error\n"
            b'data: {"type":"error","error":{"type":"overloaded_error",'
            b'"message":"Overloaded"}}\n\n',
        ),
        (anthropic, b'data: {"type":"error","error":{"message":"Overloaded"}}\n\n'),
        (openai, b'data: {"error":{"message":"Overloaded","code":503}}\n\n'),
        (openai, b"event: error\ndata: Overloaded\n\n"),
    ],
)
def test_error_events_raise_provider_error(codec, raw):
    with pytest.raises(ProviderError, match="Overloaded"):
        accumulate(codec, sse.decode(raw))


@pytest.mark.parametrize("codec", [openai, anthropic])
def test_unreadable_event_data_is_a_provider_error(codec):
    with pytest.raises(ProviderError, match="unreadable stream event"):
        accumulate(codec, sse.decode(b"data: {not json\n\n"))


def test_pings_and_unknown_events_change_nothing():
    acc = anthropic.stream_start()
    for data in ['{"type": "ping"}', '{"type": "future_event", "x": 1}']:
        assert anthropic.stream_event(acc, {"event": "ping", "data": data}) == (acc, ())


# ---- request bodies ----------------------------------------------------------------


def test_stream_bodies_are_new_values():
    body = {"model": "m", "stream_options": {"x": 1}}
    assert openai.stream_body(body) == {
        "model": "m",
        "stream": True,
        "stream_options": {"x": 1, "include_usage": True},
    }
    assert anthropic.stream_body(body)["stream"] is True
    assert body == {"model": "m", "stream_options": {"x": 1}}


# ---- honest ends: a stream without its final event ---------------------------------------


def _final(codec, acc) -> bool:
    return acc.done if codec is anthropic else (acc.done or acc.finish is not None)


@pytest.mark.parametrize("name", [n for n in NAMES if "error" not in n])
def test_every_recorded_stream_has_its_final_event_and_each_cut_before_it_raises(name):
    raw, meta = load(name)
    codec = CODECS[meta["dialect"]]
    events = sse.decode(raw)
    acc, _ = accumulate(codec, events)
    assert _final(codec, acc)
    codec.stream_turn(acc)  # complete: no error
    for n in range(len(events)):
        cut, _ = accumulate(codec, events[:n])
        if _final(codec, cut):
            continue  # past the final event (the usage chunk and [DONE] may follow it)
        with pytest.raises(ProviderError, match="final event") as info:
            codec.stream_turn(cut)
        assert info.value.network


def test_openrouter_reasoning_details_fragments_merge_by_index():
    def chunk(delta, finish=None):
        data = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return {"event": "message", "data": json.dumps(data)}

    def detail(text, **more):
        return {"type": "reasoning.text", "text": text, "format": "x", "index": 0, **more}

    events = [
        chunk({"role": "assistant", "content": "", "reasoning": "Let ",
               "reasoning_details": [detail("Let ")]}),
        chunk({"content": None, "reasoning": "me.", "reasoning_details": [
            detail("me.", signature="sig")]}),
        chunk({"content": "Hi"}),
        chunk({}, "stop"),
    ]  # fmt: skip
    acc, deltas = accumulate(openai, events)
    message = thaw(openai.stream_turn(acc)["message"])
    assert message["reasoning"] == "Let me." and message["content"] == "Hi"
    assert message["reasoning_details"] == [detail("Let me.", signature="sig")]
    assert joined(deltas, "thinking") == "Let me." and joined(deltas, "text") == "Hi"
