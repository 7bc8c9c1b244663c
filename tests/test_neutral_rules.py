"""toolnexus.from_neutral's refusals word for word, and its policy for parts a dialect
cannot carry handed on. Pure, no I/O."""

from __future__ import annotations

import pytest

from toolnexus import from_neutral
from toolnexus.core.frozen import thaw

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
