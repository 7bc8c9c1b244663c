"""Gemini messages and the neutral view (core/wire/gemini_items.py), rule by rule: which
messages Gemini takes as they are, what a prompt, a turn and its results read as, and
how another dialect's turns are written as Gemini parts (reasoning dropped, the
placeholder signature on a foreign turn's first call). Pure, no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.frozen import FrozenMap, thaw
from toolnexus.core.wire import gemini_items as GI
from toolnexus.core.wire.parts import UnsupportedPartError

PV = type(pvector())
SKIP = "skip_thought_signature_validator"
IMAGE_BLOCK = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": "aGk="}}  # fmt: skip
INLINE = {"inlineData": {"mimeType": "image/png", "data": "aGk="}}


def test_the_placeholder_signature():
    assert GI.FOREIGN_SIGNATURE == SKIP
    assert GI._REASONING == {"thinking", "redacted_thinking", "reasoning", "gemini_parts"}


@pytest.mark.parametrize(
    ("message", "native"),
    [
        ({"role": "tool", "parts": []}, True),
        ({"role": "assistant", "parts": ()}, True),
        ({"role": "user", "content": "x"}, True),
        ({"role": "assistant", "content": "x"}, True),
        ({"role": "system", "content": "x"}, False),
        ({"role": "tool", "content": "x"}, False),
        ({"content": "x"}, False),
        ({"role": "user", "content": ""}, False),
        ({"role": "user", "content": None}, False),
        ({"role": "user", "content": [{"type": "text", "text": "x"}]}, False),
        ({"role": "user", "content": "x", "name": "n"}, False),
        ({"role": "user", "parts": "x"}, False),
    ],
)
def test_a_message_is_native_when_gemini_takes_it_as_it_is(message, native):
    assert GI.native(message) is native


# ---- reading -------------------------------------------------------------------------


def _answer(i, response, **more):
    return {"functionResponse": {"id": i, "name": "f", "response": response, **more}}


def test_results_read_as_their_outputs_ids_mapped():
    parts = [
        _answer("a", {"output": "ok"}),
        _answer("b", {"error": "bad"}),
        _answer("c", {"error": "e", "output": "o"}),
        _answer("d", {}),
        _answer("e", {"x": 1}),
        _answer("f", "not a map"),
        _answer("g", {"output": {"k": "é"}}),
        _answer("h", {"error": [1]}),
        {"text": "not a result"},
        "junk",
    ]
    got = GI.items({"role": "tool", "parts": parts}, {"a": "A", "b": "B"})
    assert got == [
        ("result", "A", "ok", False),
        ("result", "B", "bad", True),
        ("result", "c", "o", False),
        ("result", "d", "", False),
        ("result", "e", '{"x":1}', False),
        ("result", "f", "", False),
        ("result", "g", '{"k":"é"}', False),
        ("result", "h", "[1]", True),
    ]


def test_a_result_of_text_parts_stays_a_list():
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    ((kind, i, value, error),) = GI.items({"role": "tool", "parts": [_answer("a", {
        "output": blocks})]}, {"a": "A"})  # fmt: skip
    assert (kind, i, error) == ("result", "A", False) and isinstance(value, PV)
    assert thaw(value) == blocks
    ((_, i, _, _),) = GI.items({"role": "tool", "parts": [_answer("a", {"output": blocks})]}, {})
    assert i == "a"
    for other in ([], [{"type": "text", "text": "a", "x": 1}], [{"type": "image", "text": "a"}],
                  [{"type": "text", "text": 3}], ["a"]):  # fmt: skip
        assert not GI._text_blocks(other)
    assert GI._text_blocks(tuple(blocks)) and GI._text_blocks(pvector(blocks))
    assert not GI._text_blocks("ab")


def test_a_result_with_media_parts_reads_as_blocks():
    media = [
        INLINE,
        {"text": "ignored"},
        "junk",
        {"fileData": {"fileUri": "https://x/a.png", "mimeType": "image/png"}},
    ]
    part = _answer("a", {"error": "see"}, parts=media)  # fmt: skip
    ((kind, i, value, error),) = GI.items({"role": "tool", "parts": [part]}, {"a": "A"})
    assert (kind, i, error) == ("result", "A", True)
    url_block = {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}
    assert thaw(value) == [{"type": "text", "text": "see"}, IMAGE_BLOCK,
                           {"type": "text", "text": "ignored"}, url_block]  # fmt: skip
    assert isinstance(value, PV)
    part = _answer("a", {"output": ""}, parts=[INLINE])
    ((kind, i, value, error),) = GI.items({"role": "tool", "parts": [part]}, {"b": "B"})
    assert (kind, i, thaw(value), error) == ("result", "a", [IMAGE_BLOCK], False)
    audio = {"inlineData": {"mimeType": "audio/wav", "data": "aGk="}}
    part = _answer("a", {"output": ""}, parts=[audio])
    ((_, _, value, _),) = GI.items({"role": "tool", "parts": [part]}, {})
    said = "[audio (audio/wav) omitted: not supported by anthropic]"  # the view's blocks
    assert thaw(value) == [{"type": "text", "text": said}]
    part = _answer("a", {"output": "x"}, parts=[{"functionCall": {}}])
    assert GI.items({"role": "tool", "parts": [part]}, {}) == [("result", "a", "x", False)]


def test_a_prompt_reads_as_its_content_parts():
    parts = [{"text": "hi"}, INLINE, {"text": "t", "thought": True}, "junk"]
    ((kind, content),) = GI.items({"role": "user", "parts": parts}, {})
    assert kind == "user"
    assert [dict(c) for c in content] == [
        {"type": "text", "text": "hi"},
        {"type": "image", "mimeType": "image/png", "data": "aGk="},
    ]
    assert GI.items({"role": "user", "parts": [{"functionCall": {}}]}, {}) == []
    assert GI.items({"role": "user"}, {}) == []


def test_a_turn_reads_as_its_text_calls_and_its_own_parts():
    parts = [
        {"text": "hmm", "thought": True},
        {"text": "a"},
        {"text": " more", "thought": True, "thoughtSignature": "s"},
        {"functionCall": {"id": "c1", "name": "f", "args": {"x": 1}}, "thoughtSignature": "s"},
        {"functionCall": {"id": "c2", "args": "bad"}},
        {"functionCall": "x"},
        {"text": 3, "thought": True},
    ]
    ((kind, content, calls, kept, own),) = GI.items({"role": "assistant", "parts": parts},
                                                    {"c1": "C1"})  # fmt: skip
    assert (kind, own) == ("assistant", {})
    assert [dict(c) for c in content] == [{"type": "text", "text": "a"}]
    assert calls == [("C1", "f", {"x": 1}, {}), ("c2", "", {}, {})]
    assert isinstance(calls[1][2], FrozenMap)
    (block,) = kept
    assert thaw(block) == {"type": "gemini_parts", "parts": parts, "thinking": "hmm more"}
    assert isinstance(block["parts"], PV)
    ((_, _, _, kept, _),) = GI.items({"role": "assistant", "parts": [{"text": "a"}]}, {})
    assert thaw(kept) == [{"type": "gemini_parts", "parts": [{"text": "a"}]}]


def test_gathers_close_and_keep_results():
    assert GI.gathers({}) is True
    gathered = {"role": "tool", "parts": [_answer("a", {"output": "ok"})]}
    merged, new = GI.close({}, gathered, ["b"], "no result")
    assert new == []
    error = {"functionResponse": {"id": "b", "name": "", "response": {"output": "no result"}}}
    assert thaw(merged) == {"role": "tool", "parts": [gathered["parts"][0], error]}
    merged, new = GI.close({}, None, ["b"], "no result")
    assert merged is None and thaw(new) == [{"role": "tool", "parts": [error]}]
    message = {"role": "tool", "parts": [{"text": "x"}, _answer("a", {}), _answer("b", {})]}
    assert GI.keep_results(message, lambda i: True) is message
    kept = GI.keep_results(message, lambda i: i == "b")
    assert thaw(kept) == {"role": "tool", "parts": [{"text": "x"}, _answer("b", {})]}
    only = {"role": "tool", "parts": [_answer("a", {})]}
    assert GI.keep_results(only, lambda i: False) is None
    assert GI._is_answer(_answer("a", {})) and not GI._is_answer({"functionResponse": 1})
    assert not GI._is_answer("x")


# ---- writing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "args"),
    [
        ({"a": 1}, {"a": 1}),
        ('{"a": 1}', {"a": 1}),
        (None, {}),
        ("", {}),
        ("  ", {}),
        (5, {}),
        ("[1]", {"INVALID_JSON": "[1]"}),
        ("{bad", {"INVALID_JSON": "{bad"}),
    ],
)
def test_call_arguments_are_an_object(raw, args):
    assert thaw(GI._args(raw)) == args


def test_arguments_given_as_a_map_are_the_same_object():
    given = {"a": 1}
    assert GI._args(given) is given


def _write(*items, policy="text"):
    out, lifted = GI.write(list(items), policy)
    assert lifted == []
    return thaw(out)


def test_prompts_and_system_messages_are_written():
    image = FrozenMap({"type": "image", "mimeType": "image/png", "data": "aGk="})
    got = _write(
        ("system", "be brief"),
        ("system", ""),
        ("user", "hi"),
        ("user", ""),
        ("user", [FrozenMap({"type": "text", "text": "look"}), image,
                  FrozenMap({"type": "text", "text": ""})]),
        ("user", [FrozenMap({"type": "text", "text": ""})]),
    )  # fmt: skip
    assert got == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "user", "parts": [{"text": "look"}, INLINE]},
    ]


def test_a_part_gemini_cannot_carry_follows_the_policy():
    odd = FrozenMap({"type": "video"})
    got = _write(("user", [odd]))
    said = "[video (unknown type) omitted: not supported by gemini]"
    assert got == [{"role": "user", "parts": [{"text": said}]}]
    with pytest.raises(UnsupportedPartError) as e:
        GI.write([("user", [odd])], "error")
    assert (
        str(e.value) == "gemini cannot carry the video (unknown type) part: no such content there"
    )


def test_results_of_a_turn_go_as_one_message():
    got = _write(
        ("result", "a", "ok", False),
        ("result", "b", None, True),
        ("user", "next"),
        ("result", "c", "", False),
    )
    answer = {"id": "", "name": "", "response": {}}
    assert got == [
        {"role": "tool", "parts": [
            {"functionResponse": {**answer, "id": "a", "response": {"output": "ok"}}},
            {"functionResponse": {**answer, "id": "b", "response": {"error": ""}}},
        ]},
        {"role": "user", "content": "next"},
        {"role": "tool", "parts": [
            {"functionResponse": {**answer, "id": "c", "response": {"output": ""}}}]},
    ]  # fmt: skip


def test_a_result_of_blocks_is_text_parts_or_text_and_media():
    text_blocks = [{"type": "text", "text": "a"}, {"type": "text"}, "junk"]
    got = _write(("result", "a", text_blocks, 1))
    assert got[0]["parts"][0]["functionResponse"]["response"] == {
        "error": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]
    }
    blocks = [
        {"type": "text", "text": "see "},
        IMAGE_BLOCK,
        {"type": "text", "text": ""},
        {"type": "image_url", "image_url": {"url": "https://x/b.png"}},
        {"type": "input_file", "file_url": "https://x/c.pdf"},
        {"type": "text", "text": "this"},
        {"type": "server_thing"},
        {"no": "type"},
    ]
    ((m,),) = [_write(("result", "a", blocks, False))]
    answer = m["parts"][0]["functionResponse"]
    assert answer["response"] == {"output": "see this"}
    assert answer["parts"] == [
        INLINE,
        {"fileData": {"mimeType": "image/png", "fileUri": "https://x/b.png"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "https://x/c.pdf"}},
    ]
    with pytest.raises(UnsupportedPartError):
        GI.write([("result", "a", blocks, False)], "error")
    assert thaw(GI._part_of({"no": "type"})) == {"type": "unknown"}
    assert thaw(GI._part_of({"type": "odd"})) == {"type": "odd"}


def test_a_result_value_of_only_unknown_blocks_is_empty_text():
    assert GI._result_value([{"type": "odd"}], "text") == ("", [])
    assert GI._result_value(None, "text") == ("", [])
    assert GI._result_value("x", "text") == ("x", [])
    assert GI._result_value([], "text") == ("", [])


def test_a_foreign_turn_is_written_with_the_placeholder_signature_on_its_first_call():
    calls = [("c1", "f", '{"a":1}', {}), ("c2", "g", {"b": 2}, {})]
    extras = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "thinking", "thinking": ""},
        {"type": "reasoning", "summary": []},
        {"type": "redacted_thinking"},
        {"type": "web_search_tool_result"},
        {"type": "server_tool_use"},
        {"type": "mcp_tool_use"},
        {"type": "container_upload"},
    ]
    parts = [FrozenMap({"type": "text", "text": "a"}), FrozenMap({"type": "text", "text": ""})]
    got = _write(("assistant", parts, calls, extras, {"refusal": "no"}))
    assert got == [{"role": "assistant", "parts": [
        {"text": "hmm", "thought": True},
        {"text": "a"},
        {"text": "no"},
        {"functionCall": {"id": "c1", "name": "f", "args": {"a": 1}}, "thoughtSignature": SKIP},
        {"functionCall": {"id": "c2", "name": "g", "args": {"b": 2}}},
    ]}]  # fmt: skip


def test_a_foreign_turn_with_nothing_gemini_carries_is_left_out():
    assert _write(("assistant", [], [], [{"type": "reasoning"}], {"refusal": ""})) == []
    assert _write(("assistant", [], [], [], {"refusal": 5})) == []


def test_a_turns_part_gemini_cannot_carry_follows_the_policy():
    parts = [FrozenMap({"type": "video"}), FrozenMap({"type": "text", "text": "a"})]
    got = _write(("assistant", parts, [], [], {}))
    said = "[video (unknown type) omitted: not supported by gemini]"
    assert got == [{"role": "assistant", "parts": [{"text": said}, {"text": "a"}]}]
    with pytest.raises(UnsupportedPartError):
        GI.write([("assistant", parts, [], [], {})], "error")


def test_another_dialects_own_block_follows_the_policy():
    extras = [{"type": "web_search_call"}, {"type": None}, {"type": 5}]
    got = _write(("assistant", [], [], extras, {}))
    said = "[{} (unknown type) omitted: not supported by gemini]"
    assert got == [{"role": "assistant", "parts": [{"text": said.format("web_search_call")},
                                                   {"text": said.format("unknown")},
                                                   {"text": said.format(5)}]}]  # fmt: skip
    with pytest.raises(UnsupportedPartError) as e:
        GI.write([("assistant", [], [], extras[:1], {})], "error")
    assert str(e.value) == "gemini cannot carry the web_search_call (unknown type) part"


def test_a_gemini_turn_is_written_back_as_it_came_with_its_new_ids():
    parts = [
        {"text": "t", "thought": True, "thoughtSignature": "s"},
        {"functionCall": {"id": "old1", "name": "f", "args": {}}, "thoughtSignature": "s1"},
        "junk",
        {"functionCall": {"id": "old2", "name": "g", "args": {}}},
    ]
    mine = {"type": "gemini_parts", "parts": parts}
    calls = [("n1", "f", {}, {}), ("n2", "g", {}, {})]
    got = _write(("assistant", [FrozenMap({"type": "text", "text": "x"})], calls,
                  [{"type": "thinking", "thinking": "y"}, mine], {"refusal": "r"}))  # fmt: skip
    assert got == [{"role": "assistant", "parts": [
        parts[0],
        {"functionCall": {"id": "n1", "name": "f", "args": {}}, "thoughtSignature": "s1"},
        "junk",
        {"functionCall": {"id": "n2", "name": "g", "args": {}}},
    ]}]  # fmt: skip
