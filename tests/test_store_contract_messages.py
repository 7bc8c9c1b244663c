"""The store contract kit's failure messages show transcripts readably: short JSON, bounded."""

from __future__ import annotations

import re

import pytest
from hypothesis import Phase
from hypothesis import strategies as st

from toolnexus.core import transcript as tx
from toolnexus.core.frozen import freeze
from toolnexus.testing import check_store_contract

FIND_FAST = {"database": None, "phases": [Phase.generate], "max_examples": 100, "derandomize": True}
LONG = [
    {"role": "user", "content": "x" * 3000},
    {"role": "assistant", "content": "sunny"},
    {"role": "user", "content": "and tomorrow?"},
]


def _kit_message(make, **kw) -> str:
    with pytest.raises(AssertionError) as e:
        check_store_contract(make, **{**FIND_FAST, **kw})
    return str(e.value)


def _frozen_store(desc: str, give=lambda t: t, absent=None) -> dict:
    backing: dict = {}
    return {
        "get": lambda id: give(backing[id]) if id in backing else absent,
        "save": lambda id, t: backing.__setitem__(id, tx.freeze_transcript(t)),
        "delete": lambda id: backing.pop(id, None),
        "desc": desc,
    }


def _bounded(text: str) -> None:
    """The kit's own words: no pyrsistent reprs, and lines of bounded length.

    Hypothesis's minimal example below them is left whole: it is what reproduces.
    """
    assert "pvector(" not in text and "FrozenMap(" not in text
    ours = re.split(r"Failing test case|Falsifying example", text)[0]
    longest = max(len(line) for line in ours.splitlines())
    assert longest < 500, longest  # a message (cut at 240 characters) and its words


def test_a_transcript_where_none_belongs_shows_as_short_json():
    """Fails on the old code: a never-saved id's answer printed as its whole pvector repr."""
    ghost = freeze(LONG)
    text = _kit_message(lambda: _frozen_store("ghost()", absent=ghost))
    assert re.search(
        r"ghost\(\): get\(.*\) (should be None, got|of a never-saved id returned)", text
    )
    assert '[{"role":"user","content":"xxxxxxxx' in text and "chars)" in text
    _bounded(text)


def test_a_dropped_message_is_named_with_both_sides():
    """Fails on the old code: it printed both transcripts' reprs, cut at 500 characters."""
    text = _kit_message(lambda: _frozen_store("dropper()", give=lambda t: t[:-1]))
    first = text.splitlines()[0]
    assert re.search(r"dropper\(\): get\(.*\) returned another transcript: got (\d+) messages?, "
                     r"expected \d+; first difference at message \1:", first)  # fmt: skip
    assert re.search(r"\n +got +\(none\)\n +expected \{\"role\":", text)
    _bounded(text)


def test_a_difference_past_the_first_characters_is_shown():
    """Fails on the old code: both reprs were cut at 500 characters, before the change."""
    changed = lambda t: t.set(-1, t[-1].set("content", "CHANGED")) if len(t) > 1 else t  # noqa: E731
    text = _kit_message(lambda: _frozen_store("changer()", give=changed), transcripts=st.just(LONG))
    assert "got 3 messages, as expected; first difference at message 2:" in text
    assert re.search(r'got +\{"role":"user","content":"CHANGED"\}', text)
    assert re.search(r'expected +\{"role":"user","content":"and tomorrow\?"\}', text)
    _bounded(text)


def test_a_store_that_modifies_its_input_shows_what_changed():
    def make():
        backing: dict = {}

        def save(id, t):
            if isinstance(t, list) and t:
                t[0] = {"role": "user", "content": "REWRITTEN"}
            backing[id] = tx.freeze_transcript(t)

        return {"get": backing.get, "save": save, "delete": lambda id: backing.pop(id, None)}

    text = _kit_message(make)
    assert re.search(r"save\(.*\) modified its input: got \d+ messages?, as expected; "
                     r"first difference at message 0:", text)  # fmt: skip
    assert re.search(r'got +\{"role":"user","content":"REWRITTEN"\}', text)
    _bounded(text)
