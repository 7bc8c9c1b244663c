"""The chat completions decoder builds its turn frozen, field by field: for any answer
(well formed or not) it gives exactly the turn, or the error, of the decoder that built
plain dicts and froze the whole turn afterwards (kept here as the reference). Pure."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.frozen import FrozenMap, freeze
from toolnexus.core.wire import openai as O
from toolnexus.core.wire.common import MALFORMED, malformed, name_text, text_of, unique_id
from toolnexus.core.wire.openai_read import (
    READ_CALL,
    args_text,
    array,
    extra_fields,
    mapping,
    str_or_none,
)


def reference(data: Mapping) -> FrozenMap:
    """The decoder before it built frozen maps: plain dicts, then `common.turn` froze all."""
    try:
        choices = array(data.get("choices"), "choices")
        if not choices:
            raise O.MalformedResponse("response has no choices")
        choice = mapping(choices[0], "choices[0]")
        message = mapping(choice.get("message"), "choices[0].message")
        calls, taken = [], set()
        for i, c in enumerate(array(message.get("tool_calls"), "tool_calls")):
            c = mapping(c, f"tool_calls[{i}]")
            fn = mapping(c.get("function"), f"tool_calls[{i}].function")
            cid = c.get("id")
            call = {
                "id": unique_id(cid if isinstance(cid, str) and cid else f"call_{i}", taken),
                "name": name_text(fn.get("name")),
                "arguments": args_text(fn.get("arguments") or ""),
            }
            extra = extra_fields(c, READ_CALL)
            if extra:
                call["extra"] = FrozenMap(extra)
            calls.append(call)
        text = text_of(message.get("content"), "choices[0].message.content")
        usage_ = data.get("usage")
        return O._turn(
            text,
            calls,
            usage_ if isinstance(usage_, Mapping) else None,
            str_or_none(choice.get("finish_reason")),
            str_or_none(data.get("model")),
            extra_fields(message, O._READ_MESSAGE),
        )
    except MALFORMED as e:
        raise malformed(e) from None


def outcome(decode, data):
    """Return ("turn", the turn) or ("error", its type and message)."""
    try:
        return "turn", decode(data)
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return "error", (type(e), str(e))


LEAF = st.none() | st.booleans() | st.integers(-3, 10**6) | st.text(max_size=6)
JSON = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def maybe(strategy):
    """A field as an answer has it, or (one time in eight) any JSON value in its place."""
    return st.sampled_from([False] * 7 + [True]).flatmap(lambda odd: JSON if odd else strategy)


FUNCTION = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "name": maybe(st.sampled_from(["add", "get_weather", ""])),
            "arguments": maybe(st.sampled_from(['{"a": 1}', "", "{"])),
        },
    )
)
CALL = maybe(
    st.fixed_dictionaries(
        {"function": FUNCTION},
        optional={
            "id": maybe(st.sampled_from(["c1", "c2", ""])),
            "type": st.just("function"),
            "index": st.integers(0, 3),
            "extra_content": JSON,
        },
    )
)
MESSAGE = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "role": st.just("assistant"),
            "content": maybe(st.text(max_size=8)),
            "tool_calls": maybe(st.lists(CALL, max_size=3)),
            "refusal": maybe(st.text(max_size=4)),
            "reasoning_content": JSON,
            "annotations": JSON,
        },
    )
)
USAGE = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": maybe(st.integers(-2, 10**6)),
            "completion_tokens": maybe(st.integers(-2, 10**6) | st.floats(allow_nan=True)),
            "total_tokens": st.integers(0, 10**6),
            "prompt_tokens_details": JSON,
        },
    )
)
CHOICE = st.fixed_dictionaries(
    {"message": MESSAGE}, optional={"finish_reason": maybe(st.sampled_from(["stop", "length"]))}
)
ANSWER = st.fixed_dictionaries(
    {"choices": maybe(st.lists(maybe(CHOICE), min_size=1, max_size=2))},
    optional={"usage": USAGE, "model": maybe(st.just("m"))},
)


@given(ANSWER)
def test_the_frozen_decoder_gives_the_reference_turn_or_error(data):
    got, want = outcome(O.parse_response, data), outcome(reference, data)
    assert got == want
    if got[0] == "turn":
        assert freeze(got[1]) is got[1]  # frozen all through: nothing left to freeze
        assert [type(v) for v in got[1].values()] == [type(v) for v in want[1].values()]
