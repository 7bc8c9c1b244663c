"""What a chat completions request leaves out where a strict server refuses it
(core/wire/openai_fields.py), rule by rule: the refusals that name a provider's own field,
and the assistant messages cut to the fields chat completions defines. Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.wire import openai_fields as F

OWN = {
    "role": "assistant",
    "content": "a",
    "refusal": None,
    "name": "n",
    "audio": None,
    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}],
    "function_call": None,
}
ANY = frozenset({"foreign_fields"})


def test_nothing_is_left_out_from_the_start():
    assert F.omissions("gpt-4o") == frozenset() and F.omissions("deepseek-chat") == frozenset()


@pytest.mark.parametrize(
    "field", ["reasoning_content", "reasoning_details", "reasoning", "extra_content", "thinking"]
)
def test_a_400_naming_a_providers_own_field_asks_to_leave_them_out(field):
    said = f"property '{field}' is unsupported"
    assert F.refused_part(ProviderError(said, status=400)) == "foreign_fields"
    assert F.refused_part(ProviderError("Extra inputs", status=400, body=field.upper())) == (
        "foreign_fields"
    )
    assert F.refused_part(ProviderError(said, status=422)) is None


@pytest.mark.parametrize(
    "said",
    [
        "Missing `reasoning_content` field",
        "the reasoning_content must be passed back",
        "reasoning_content is required",
        "Extra inputs are not permitted",
    ],
)
def test_a_refusal_asking_for_the_field_or_naming_none_is_not_answered_by_leaving_out(said):
    assert F.refused_part(ProviderError(said, status=400)) is None


def test_a_message_with_only_defined_fields_is_kept_as_it_is():
    assert F._own(OWN) is OWN
    plain = {"role": "assistant", "content": "a"}
    assert F._own(plain) is plain


def test_a_message_and_its_calls_are_cut_to_the_defined_fields():
    call = {"id": "c", "type": "function", "function": {"name": "f"}, "extra_content": 1}
    got = F._own({**OWN, "reasoning_content": "r", "tool_calls": [call]})
    assert isinstance(got, FrozenMap)
    assert thaw(got) == {
        **OWN,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}],
    }
    only_call = F._own({"role": "assistant", "tool_calls": [call]})
    assert thaw(only_call) == {"role": "assistant", "tool_calls": [OWN["tool_calls"][0]]}
    no_calls = F._own({"role": "assistant", "content": "a", "reasoning": "r", "tool_calls": None})
    assert thaw(no_calls) == {"role": "assistant", "content": "a", "tool_calls": None}


def test_omit_cuts_assistant_messages_only_when_foreign_fields_are_refused():
    user = {"role": "user", "content": "q", "extra": 1}
    foreign = {"role": "assistant", "content": "a", "reasoning_content": "r"}
    body = {"model": "m", "messages": [user, foreign, OWN]}
    got = F.omit(body, ANY | {"other"})
    assert thaw(got) == {
        "model": "m",
        "messages": [user, {"role": "assistant", "content": "a"}, thaw(OWN)],
    }
    assert got["messages"][0] is user and got["messages"][2] is OWN
    assert body["messages"] == [user, foreign, OWN]
    assert F.omit(body, frozenset()) is body
    assert F.omit(body, frozenset({"unsigned_thinking"})) is body
    clean = {"messages": [user, OWN]}
    assert F.omit(clean, ANY) is clean
    empty = {"messages": []}
    assert F.omit(empty, ANY) is empty
    none = {"model": "m"}
    assert F.omit(none, ANY) is none
