"""A decoded turn whose JSON text holds no "\\u" escape is vouched for (`keep_whole`), so the
flow does not walk it for surrogates: the same turns and the same errors as the walk of
every turn gives, on the whole and the streamed paths, whatever the answer holds (a
split pair, a lone half, one hidden a level down in JSON text inside a string)."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import ProviderError, create_client, run, stream
from toolnexus.core.frozen import FrozenMap, keep_whole, known_whole
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.jsonload import load
from toolnexus.core.wire.sse import surrogate_free, whole_characters
from toolnexus.drivers.transport import Endpoint, _Stream

HIGH, LOW = "\ud83d", "\ude00"
# Text that may hold surrogate halves (lone or paired) and backslashes ("\\u" as text).
TEXT = st.text(st.sampled_from(["a", "é", "\\", "u", "d", "8", "3", HIGH, LOW, '"']), max_size=12)


def _strings(value):
    """Yield every string of a decoded value, and of any JSON text among them, any depth."""
    if isinstance(value, str):
        yield value
        try:
            inner = json.loads(value)
        except ValueError:
            return
        if not isinstance(inner, str) or inner != value:
            yield from _strings(inner)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _dumps(value, ascii_only: bool) -> str | None:
    try:
        text = json.dumps(value, ensure_ascii=ascii_only)
        text.encode("utf-8")  # what a server can send (a lone half only as an escape)
    except UnicodeEncodeError:
        return None
    return text


@given(TEXT, st.integers(0, 3), st.booleans())
def test_a_text_without_a_u_escape_decodes_to_no_surrogate_at_any_depth(s, depth, ascii_only):
    value = s
    for _ in range(depth):  # JSON text inside a string (tool arguments, partial_json)
        value = {"inner": _dumps(value, ascii_only) or json.dumps(value)}
    text = _dumps(value, ascii_only)
    if text is None:
        return
    data = text.encode("utf-8")
    assert surrogate_free(text) == surrogate_free(data)
    if surrogate_free(data):
        for piece in _strings(load(data)):
            assert not any("\ud800" <= ch <= "\udfff" for ch in piece)


def test_keep_whole_is_kept_by_the_map_only():
    m = FrozenMap({"a": "b"})
    assert not known_whole(m) and not known_whole({"a": "b"})
    assert keep_whole(m) is m and known_whole(m)
    assert not known_whole(m.set("c", "d"))  # a new map: not vouched for
    assert keep_whole([1]) == [1] and not known_whole([1])  # nowhere to keep it


def _outcome(fn):
    try:
        return ("ok", fn())
    except ProviderError as e:
        return ("error", str(e))


def _openai_answer(content: str, args: str) -> dict:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
    message = {"role": "assistant", "content": content, "tool_calls": [call]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


ENDPOINT = Endpoint("http://model.test/v1/chat/completions", {}, DIALECTS["openai"], None)


@given(TEXT, TEXT, st.booleans())
def test_a_whole_answer_gives_the_turn_or_error_the_walk_gives(content, inner, ascii_only):
    args = _dumps({"x": inner}, ascii_only) or json.dumps({"x": inner})
    text = _dumps(_openai_answer(content, args), ascii_only)
    if text is None:
        return
    body = text.encode("utf-8")
    walked = _outcome(lambda: whole_characters(DIALECTS["openai"].parse_response(body)))
    assert _outcome(lambda: whole_characters(ENDPOINT.decode(200, body))) == walked


@given(st.lists(TEXT, max_size=4), st.booleans())
def test_a_streamed_answer_gives_the_turn_or_error_the_walk_gives(pieces, ascii_only):
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    texts = [_dumps(c, ascii_only) or json.dumps(c) for c in chunks]
    data = b"".join(b"data: " + t.encode() + b"\n\n" for t in texts)

    def streamed(vouch: bool):
        state = _Stream(DIALECTS["openai"])
        state.feed(data)
        turn = state.end()[-1]["turn"]
        assert not vouch or known_whole(turn) == all(map(surrogate_free, texts))
        return whole_characters(turn if vouch else FrozenMap(turn))  # (a copy: unvouched)

    assert _outcome(lambda: streamed(True)) == _outcome(lambda: streamed(False))


def _client(answer, style: str = "openai"):
    return create_client(base_url="http://model.test/v1", style=style, model="m", api_key="k",
                         transport=httpx.MockTransport(answer))  # fmt: skip


def test_a_whole_answer_with_an_escaped_pair_is_joined_and_a_lone_half_refused():
    def answer(text: str):
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}]}  # fmt: skip
        return lambda request: httpx.Response(200, content=json.dumps(body).encode())

    assert run(_client(answer("smile " + HIGH + LOW)), "hi")["text"] == "smile \U0001f600"
    with pytest.raises(ProviderError, match="lone UTF-16 surrogate"):
        run(_client(answer("half " + HIGH)), "hi")


def test_a_lone_half_hidden_in_streamed_tool_input_text_is_refused():
    """Anthropic's partial_json is JSON text inside a string: its escape "\\ud83d" is a lone
    half once the input is read, and the event's text may spell that backslash "\\u005c".
    No "\\ud" in the event's text, but a "\\u": the turn is walked and the half refused."""
    partial = json.dumps(json.dumps({"x": HIGH})).replace("\\\\", "\\u005c")
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "m1", "role": "assistant", "model": "m", "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": "P"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    data = b"".join(
        f"event: {name}\ndata: {json.dumps(obj)}\n\n".replace('"P"', partial).encode()
        for name, obj in events
    )
    assert b"\\ud" not in data.lower() and b"\\u" in data

    def answer(request):
        return httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})

    with pytest.raises(ProviderError, match="lone UTF-16 surrogate"):
        list(stream(_client(answer, "anthropic"), "hi"))
