"""What a Messages request replays of a model's reasoning (core/wire/anthropic_replay.py),
rule by rule: unsigned thinking kept where it led to an answer, left out for servers that
take it back signed only. Pure, no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.wire import anthropic_replay as R

LONE = {"type": "thinking", "thinking": "t"}
SIGNED = {"type": "thinking", "thinking": "t", "signature": "s"}
REDACTED = {"type": "redacted_thinking", "data": "d"}
TEXT = {"type": "text", "text": "a"}
USE = {"type": "tool_use", "id": "u", "name": "f", "input": {}}


def test_unsigned_is_a_thinking_block_without_a_signature():
    assert R.unsigned(LONE) and R.unsigned({**LONE, "signature": ""})
    assert not R.unsigned(SIGNED) and not R.unsigned(TEXT) and not R.unsigned(REDACTED)
    assert not R.unsigned("thinking") and not R.unsigned(None)


def test_a_block_leads_when_output_follows_it_not_only_more_reasoning():
    assert R.leads([LONE, REDACTED, SIGNED, TEXT], 0)
    assert R.leads([LONE, USE], 0) and R.leads([LONE, "x"], 0)
    assert not R.leads([LONE, REDACTED, SIGNED], 0)
    assert not R.leads([TEXT, LONE], 1)
    assert R.leads([TEXT, LONE, TEXT], 1) and not R.leads([LONE, TEXT, LONE], 2)


def test_lone_thinking_is_an_unsigned_block_leading_to_nothing():
    assert R.lone_thinking({"content": [TEXT, LONE]})
    assert R.lone_thinking({"content": (LONE,)}) and R.lone_thinking({"content": pvector([LONE])})
    assert not R.lone_thinking({"content": [LONE, TEXT]})
    assert not R.lone_thinking({"content": [TEXT, SIGNED]})
    assert R.lone_thinking({"content": "thinking"}) is False and R.lone_thinking({}) is False
    assert not R.lone_thinking({"content": {"type": "thinking"}})


def test_led_drops_the_unsigned_thinking_that_leads_to_nothing():
    blocks = [LONE, TEXT, SIGNED, LONE, REDACTED, LONE]
    assert R.led(blocks) == [LONE, TEXT, SIGNED, REDACTED]
    assert R.led([SIGNED, TEXT, LONE, USE]) == [SIGNED, TEXT, LONE, USE]
    same = [SIGNED, TEXT, REDACTED]
    assert R.led(same) is same


def test_led_only_gives_a_message_without_lone_thinking():
    m = {"role": "assistant", "content": [TEXT, LONE]}
    got = R.led_only(m)
    assert thaw(got) == {"role": "assistant", "content": [TEXT]}
    assert isinstance(got, FrozenMap)
    kept = {"role": "assistant", "content": [LONE, TEXT]}
    assert R.led_only(kept) is kept


@pytest.mark.parametrize(
    ("model", "left_out"),
    [
        ("claude-sonnet-4-5", {"unsigned_thinking"}),
        ("anthropic/Claude-Opus-4", {"unsigned_thinking"}),
        ("a/b/claude-3", {"unsigned_thinking"}),
        ("deepseek-v4-pro", set()),
        ("my-claude", set()),
        ("claude/deepseek", set()),
    ],
)
def test_anthropics_own_models_leave_unsigned_thinking_out_from_the_start(model, left_out):
    assert R.omissions(model) == left_out
    assert isinstance(R.omissions(model), frozenset)


def test_a_refusal_naming_a_signature_asks_to_leave_unsigned_thinking_out():
    said = "messages.1.content.0.thinking.signature: Field required"
    assert R.refused_part(ProviderError(said, status=400)) == "unsigned_thinking"
    assert R.refused_part(ProviderError("bad", status=400, body="...Signature...")) == (
        "unsigned_thinking"
    )
    assert R.refused_part(ProviderError("bad request", status=400)) is None
    assert R.refused_part(ProviderError(said, status=500)) is None
    assert R.refused_part(ValueError(said)) is None


def test_omit_leaves_unsigned_thinking_out_and_drops_what_is_left_empty():
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [LONE, TEXT]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u"}]},
        {"role": "assistant", "content": (LONE,)},
        {"role": "assistant", "content": [SIGNED, USE]},
    ]
    body = {"model": "m", "messages": msgs}
    got = R.omit(body, frozenset({"unsigned_thinking", "other"}))
    assert thaw(got) == {
        "model": "m",
        "messages": [msgs[0], {"role": "assistant", "content": [TEXT]}, msgs[2], msgs[4]],
    }
    assert body["messages"] is msgs and len(msgs) == 5
    assert got["messages"][0] is msgs[0] and got["messages"][3] is msgs[4]


def test_omit_gives_the_same_body_when_there_is_nothing_to_leave_out():
    body = {"messages": [{"role": "assistant", "content": [LONE, TEXT]}]}
    assert R.omit(body, frozenset()) is body
    assert R.omit(body, frozenset({"foreign_fields"})) is body
    clean = {"messages": [{"role": "assistant", "content": [SIGNED, TEXT]}, {"content": "x"}]}
    assert R.omit(clean, frozenset({"unsigned_thinking"})) is clean
    empty = {"messages": []}
    assert R.omit(empty, frozenset({"unsigned_thinking"})) is empty
    none = {"model": "m"}
    assert R.omit(none, frozenset({"unsigned_thinking"})) is none
