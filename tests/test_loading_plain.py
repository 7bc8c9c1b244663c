"""`loading.whole` keeps a transcript as it is by looking only at its messages that are
not plain text: what it gives always equals the general pass over every message.

Plain text messages are put anywhere on purpose (between a tool call and its result,
first, last, in runs), around the messy transcripts of test_loading.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_loading import messy

from toolnexus.core import loading
from toolnexus.core.frozen import freeze
from toolnexus.core.wire import DIALECTS

_PLAIN = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant"]),
    st.text(min_size=1, max_size=5),
)


@st.composite
def with_plain(draw) -> list:
    out = draw(messy())
    for _ in range(draw(st.integers(0, 4))):
        out.insert(draw(st.integers(0, len(out))), draw(_PLAIN))
    return out


@given(with_plain(), st.sampled_from(tuple(DIALECTS)))
def test_the_quick_look_gives_what_the_general_pass_gives(t, dialect):
    t = freeze(t)
    try:
        expected = loading.general(t, dialect, "text")
    except ValueError:  # what the dialect cannot carry even as text
        return
    got = loading.whole(t, dialect, "text")
    assert list(got.history) == list(expected.history)
    assert got.lifted == expected.lifted
    assert list(got.texts) == list(expected.texts)
    assert got.facts == expected.facts
    if got.history is t:  # kept as it is: the general pass keeps it too
        assert expected.history is t


def test_a_plain_message_between_a_call_and_its_result_is_still_repaired():
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": "{}"}}]}  # fmt: skip
    t = freeze([{"role": "user", "content": "q"}, call, {"role": "user", "content": "hm"},
                {"role": "tool", "tool_call_id": "c1", "content": "4"}])  # fmt: skip
    got = loading.whole(t, "openai")
    assert got.history is not t
    assert [m["role"] for m in got.history] == ["user", "assistant", "tool", "user"]
    assert got.history[2]["tool_call_id"] == "c1"  # the synthesized "interrupted" result


def test_an_all_plain_transcript_is_kept_as_it_is_with_no_call_ids():
    t = freeze([{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
                for i in range(6)])  # fmt: skip
    for dialect in DIALECTS:
        got = loading.whole(t, dialect)
        assert got.history is t and got.facts == (dialect, frozenset())


@given(st.sampled_from([None, [], (), freeze([])]), st.sampled_from(tuple(DIALECTS)),
       st.booleans())  # fmt: skip
def test_no_history_is_made_ready_as_the_general_pass_makes_an_empty_one(loaded, dialect, encode):
    expected = loading.general(freeze([]), dialect, "error", encode)
    got = loading.whole(loaded, dialect, "error", encode)
    assert got == expected
    assert type(got.history) is type(expected.history)
