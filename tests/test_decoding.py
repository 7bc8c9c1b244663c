"""Bounded decoding and the codecs' boundary: nothing malformed escapes as anything but a
ProviderError; list-of-parts content is text; empty answers are never replayed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from toolnexus.core import calls
from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import freeze
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.core.wire import anthropic, openai, sse
from toolnexus.core.wire.common import EMPTY_ANSWER, encode_body, is_empty_answer
from toolnexus.core.wire.jsonload import JSONLimitError, load, nesting_exceeds
from toolnexus.testing import anthropic_response, openai_response
from toolnexus.testing.fake_gemini import gemini_response
from toolnexus.testing.fake_responses import responses_response

ALL = sorted(_REGISTRY)  # every row of the dialect registry

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
          allow_infinity=False) | st.text(max_size=10)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),  # fmt: skip
    max_leaves=30,
)


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


# ---- jsonload --------------------------------------------------------------------


@given(json_values, st.integers(0, 12))
def test_nesting_check_is_exact_for_json(value, limit):
    text = json.dumps(value)
    assert nesting_exceeds(text, limit) == (depth(value) > limit)
    if depth(value) <= limit:
        assert load(text, max_depth=limit) == value
    else:
        with pytest.raises(JSONLimitError):
            load(text, max_depth=limit)


@given(st.text(alphabet='[]{}",:\\1a ', max_size=3000))
def test_any_bracket_soup_decodes_or_is_a_value_error(text):
    try:
        load(text, max_depth=20)
    except ValueError:
        pass  # the only way to fail: never RecursionError


@pytest.mark.parametrize("opener", ["[", '{"a":', '[{"a":'])
def test_100000_deep_is_refused_without_recursion(opener):
    with pytest.raises(JSONLimitError):
        load(opener * 100_000)


def test_limits_and_non_json_constants():
    with pytest.raises(JSONLimitError):
        load(b"[1, 2, 3]", max_bytes=4)
    for text in ("NaN", "[Infinity]", "-Infinity", b"\xff"):
        with pytest.raises(ValueError):
            load(text)


# ---- tool calls (the pure checks the flow is to call) --------------------------------


@given(json_values)
def test_parse_arguments_takes_any_object_and_refuses_the_rest(value):
    args, why = calls.parse_arguments(json.dumps(value))
    if isinstance(value, dict):
        assert why is None and args == freeze(value)
    else:
        assert args is None and why.startswith("arguments must be a JSON object")


def test_parse_arguments_refuses_deep_text_and_deep_mappings():
    assert "deeper than" in calls.parse_arguments('{"a": ' + "[" * 100_000)[1]
    nested: dict = {}
    inner = nested
    for _ in range(calls.ARGUMENT_DEPTH + 5):
        inner["x"] = {}
        inner = inner["x"]
    assert "deeper than" in calls.parse_arguments(nested)[1]


@pytest.mark.parametrize("name", [["a"], {"a": 1}, 3, None, ""])
def test_name_error_for_anything_but_a_non_empty_string(name):
    assert calls.name_error(name)


# ---- codecs: anything malformed is a ProviderError ----------------------------------

CODECS = _REGISTRY
VALID = {
    "gemini": gemini_response(
        {
            "content": "hi",
            "tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 1}}],
            "thinking": [{"thinking": "hm"}],
        }  # fmt: skip
    ),
    "responses": responses_response(
        {
            "content": "hi",
            "tool_calls": [{"name": "f", "arguments": {"a": 1}}],
            "refusal": "no",
            "reasoning": [{"summary": "s", "encrypted_content": "E"}],
            "incomplete": "max_output_tokens",
        }
    ),
    "openai": openai_response({"content": "hi", "tool_calls": [{"name": "f", "arguments": {}}]}),
    "anthropic": anthropic_response(
        {"content": "hi", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]}
    ),
}


def paths(value, prefix=()):
    """Every path into a JSON value (to replace what is there with junk)."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def replaced(value, path, junk):
    if not path:
        return junk
    copy = json.loads(json.dumps(value))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = junk
    return copy


@pytest.mark.parametrize("style", ALL)
@given(data=st.data(), junk=json_values)
def test_a_response_with_any_part_replaced_is_a_turn_or_a_provider_error(style, data, junk):
    path = data.draw(st.sampled_from(list(paths(VALID[style]))))
    body = json.dumps(replaced(VALID[style], path, junk))
    try:
        turn = CODECS[style].parse_response(body.encode())
    except ProviderError as e:
        assert isinstance(e, ValueError)  # a driver catching ValueError still wraps it
        return
    assert isinstance(turn["text"], str)
    assert all(isinstance(c["name"], str) and isinstance(c["id"], str) for c in turn["tool_calls"])
    encode_body(CODECS[style].body("m", [turn["message"]], [], "", {}))


@pytest.mark.parametrize("style", ALL)
@given(events=st.lists(st.tuples(st.sampled_from(["message", "error", "content_block_delta",
                                                  "message_start", "content_block_start",
                                                  "response.output_item.added",
                                                  "response.completed"]),
                                 json_values | st.text(max_size=20)), max_size=6))  # fmt: skip
def test_any_stream_events_give_a_turn_or_a_provider_error(style, events):
    codec = CODECS[style]
    acc = codec.stream_start()
    try:
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            acc, deltas = codec.stream_event(acc, {"event": name, "data": text})
            assert all(isinstance(d["delta"], str) for d in deltas if d["type"] == "text")
        turn = codec.stream_turn(acc)
    except ProviderError:
        return
    assert isinstance(turn["text"], str)


def test_openai_list_content_is_text_in_responses_and_streams():
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    turn = openai.parse_response({"choices": [{"message": {"content": parts}}]})
    assert turn["text"] == "ab" and turn["message"]["content"] == "ab"
    acc, deltas = openai.stream_event(
        openai.stream_start(),
        {
            "event": "message",
            "data": json.dumps(
                {"choices": [{"delta": {"content": parts}, "finish_reason": "stop"}]}
            ),
        },  # fmt: skip
    )
    assert [d["delta"] for d in deltas] == ["ab"] and openai.stream_turn(acc)["text"] == "ab"


def test_an_sse_error_payload_that_is_deep_or_odd_is_still_a_provider_error():
    assert isinstance(sse.stream_error("[" * 100_000), ProviderError)
    assert isinstance(sse.stream_error({"error": {"message": ["not", "text"]}}), ProviderError)


# ---- empty answers and empty text blocks ---------------------------------------------


def test_empty_answers_are_stored_in_one_shape_and_never_replayed():
    a = anthropic.parse_response({"content": [{"type": "text", "text": ""}]})
    o = openai.parse_response({"choices": [{"message": {"content": None}}]})
    assert a["message"] == o["message"] == EMPTY_ANSWER
    user = freeze({"role": "user", "content": "hi"})
    history = pvector([user, EMPTY_ANSWER, freeze({"role": "assistant", "content": []}), user])
    for codec in (openai, anthropic):  # cleaned once, when a history is loaded
        assert list(codec.replayable(history)) == [user, user]


def test_empty_text_blocks_are_dropped_and_untouched_histories_are_not_copied():
    msg = freeze({"role": "assistant", "content": [{"type": "text", "text": ""},
                                                   {"type": "tool_use", "id": "t", "name": "f",
                                                    "input": {}}]})  # fmt: skip
    sent = anthropic.replayable(pvector([msg]))
    assert [b["type"] for b in sent[0]["content"]] == ["tool_use"]
    clean = pvector([freeze({"role": "user", "content": "hi"})])
    assert anthropic.replayable(clean) is clean and openai.replayable(clean) is clean


messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={"content": json_values, "tool_calls": json_values},
)


@pytest.mark.parametrize("style", ALL)
@given(st.lists(messages, max_size=6))
def test_body_takes_any_stored_history_and_never_sends_an_empty_answer(style, history):
    """A store may hold any messages with a string role: body() never raises on them
    (it raised KeyError on an anthropic assistant message without content)."""
    codec = CODECS[style]
    sent = codec.body("m", codec.replayable(pvector(freeze(m) for m in history)), [], "", {})
    said = next(sent[k] for k in ("messages", "input", "contents") if k in sent)
    assert not any(is_empty_answer(m) for m in said)
    encode_body(sent)
