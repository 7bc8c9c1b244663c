"""The neutral view (core/wire/view.py), rule by rule: which record reads a message,
system items kept in place, ids mapped, calls named, a prompt's message in each dialect.
Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS, view

CALL = {"type": "tool_use", "id": "x", "name": "f", "input": {}}


def test_a_message_is_read_by_the_dialect_owning_its_shape_else_the_shared_one():
    assert view.record_of({"role": "assistant", "items": []}).name == "responses"
    assert view.record_of({"role": "model", "parts": [{"text": "a"}]}).name == "gemini"
    shared = next(d for d in DIALECTS.values() if d.owns is None)
    assert view.record_of({"role": "user", "content": "x"}) is shared


def test_ids_are_mapped_on_reading_and_left_alone_without_a_map():
    m = {"role": "tool", "tool_call_id": "a", "content": "x"}
    assert view.read(m, {"a": "b"}) == [("result", "b", "x", False)]
    assert view.read(m) == [("result", "a", "x", False)]


def test_items_skip_what_is_not_a_message():
    assert view.items([{"role": "user", "content": "u"}, "junk", 3]) == [("user", "u")]


def test_system_items_stay_in_place_between_the_messages_written_around_them():
    neutral = [
        ("system", "s"),
        ("user", "u"),
        ("assistant", [], [("c", "f", "{}", {})], [], {}),
        ("system", "t"),
        ("result", "c", "r", False),
        ("system", "z"),
    ]
    got = thaw(view.transcript_of(neutral, "anthropic"))
    assert got == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}],
        },
        {"role": "system", "content": "t"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "r"}]},
        {"role": "system", "content": "z"},
    ]
    assert view.transcript_of([], "anthropic") == []


def test_write_lifts_system_texts_where_the_dialect_does():
    messages, system = view.write([("system", "s"), ("user", "u")], "anthropic")
    assert thaw(messages) == [{"role": "user", "content": "u"}] and system == ["s"]


def test_transcript_of_follows_the_policy_for_a_part_the_dialect_cannot_carry():
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    with pytest.raises(ValueError, match="audio"):
        view.transcript_of([("user", [audio])], "anthropic")
    (m,) = view.transcript_of([("user", [audio])], "anthropic", "text")
    assert m["content"][0]["text"] == "[audio (audio/wav) omitted: not supported by anthropic]"


def test_only_an_assistant_message_makes_calls_and_results_are_read_by_shape():
    assert view.call_ids({"role": "assistant", "content": [CALL]}) == ("x",)
    assert view.call_ids({"role": "user", "content": [CALL]}) == ()
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}
    assert view.result_ids(answer) == ("x",)


def test_call_names_map_every_call_of_a_transcript_to_its_tool():
    second = {**CALL, "id": "y", "name": "g"}
    t = [{"role": "assistant", "content": [CALL, second]}, "junk", {"role": "user", "content": "u"}]
    assert view.call_names(t) == {"x": "f", "y": "g"}


def test_a_block_no_dialect_reads_is_a_bare_part_of_its_type():
    assert thaw(view.content_part({"type": "zzz", "x": 1})) == {"type": "zzz"}
    assert thaw(view.content_part({"type": "text", "text": "a"})) == {"type": "text", "text": "a"}


def test_a_prompt_message_is_text_or_parts_following_the_policy_and_the_size_bound():
    assert thaw(view.prompt_message("anthropic", "hi")) == {"role": "user", "content": "hi"}
    audio = [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]
    m = view.prompt_message("anthropic", audio, on_unsupported_part="text")
    assert m["content"][0]["text"] == "[audio (audio/wav) omitted: not supported by anthropic]"
    with pytest.raises(ValueError, match="audio"):
        view.prompt_message("anthropic", audio)
    with pytest.raises(ValueError, match="exceeds max_part_bytes=1"):
        view.prompt_message("openai", audio, max_part_bytes=1)
    assert view.prompt_message("openai", audio, max_part_bytes=3)["role"] == "user"
