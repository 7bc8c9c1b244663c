"""toolnexus.from_neutral's refusals word for word, and its policy for parts a dialect
cannot carry handed on. Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus import from_neutral, to_neutral
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.parts import UnsupportedPartError

KINDS = "'system' (2 fields), 'user' (2 fields), 'assistant' (5 fields), 'result' (4 fields)"


@pytest.mark.parametrize(
    ("items", "said"),
    [
        ([("user",)], f"item 0: a neutral item is a tuple of one of {KINDS}, got ('user',)"),
        ("ab", "neutral items are a list of tuples (see toolnexus.to_neutral)"),
        (5, "neutral items are a list of tuples (see toolnexus.to_neutral)"),
    ],
)
def test_bad_items_are_refused_word_for_word(items, said):
    with pytest.raises(ValueError) as e:
        from_neutral(items)
    assert str(e.value) == said


def test_the_policy_for_an_unsupported_part_reaches_the_writer():
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    with pytest.raises(ValueError, match="audio"):
        from_neutral([("user", [audio])], "anthropic")
    (m,) = from_neutral([("user", [audio])], "anthropic", on_unsupported_part="text")
    text = "[audio (audio/wav) omitted: not supported by anthropic]"
    assert thaw(m) == {"role": "user", "content": [{"type": "text", "text": text}]}


IMAGE = {"type": "image", "mimeType": "image/png", "data": "aGk="}


@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_an_image_in_an_assistant_turn_is_kept_or_refused_never_dropped(style):
    # An assistant turn with an image (a model that draws): each dialect either carries it
    # and reads it back as a part, or cannot (chat completions and Responses carry text
    # alone there) and its policy says so: an error, or a placeholder in the text.
    items = [("user", "draw"), ("assistant", [{"type": "text", "text": "here"}, IMAGE], [], [], {})]
    try:
        written = from_neutral(items, style)
    except UnsupportedPartError as e:
        assert "image" in str(e) and style in str(e)
        (_, (_, parts, *_)) = to_neutral(from_neutral(items, style, on_unsupported_part="text"))
        assert [thaw(p)["type"] for p in parts] == ["text"] and "omitted" in parts[0]["text"]
        return
    (_, (kind, parts, _calls, extras, _own)) = to_neutral(written)
    assert kind == "assistant"
    assert [thaw(p) for p in parts] == [{"type": "text", "text": "here"}, IMAGE]
    assert not any(thaw(e).get("type") == "image" for e in extras)
