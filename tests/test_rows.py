"""The row-store algebra (store/_rows.py): plans to append or replace, and the memo."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import freeze, pvector

from toolnexus.store import _rows
from toolnexus.testing import transcripts


@given(transcripts(), st.data())
def test_extending_what_was_seen_plans_like_a_save_over_its_head(t, data):
    """plan_extend over a remembered prefix = plan_save over that prefix's stored head."""
    t = freeze(t)
    k = data.draw(st.integers(0, len(t)))
    seen = pvector(t[:k])
    memo = _rows.Memo()
    memo.remember("c", seen, _rows.digest_of(seen))
    expected, plan = _rows.plan_extend("c", t, memo)
    assert expected == _rows.Head(1, k, _rows.digest_of(seen))
    general = _rows.plan_save("c", expected, t, _rows.Memo())
    assert (plan.append, plan.start, plan.encoded, plan.head) == (
        general.append,
        general.start,
        general.encoded,
        general.head,
    )
    assert plan.head.digest == _rows.digest_of(t)


@given(transcripts(), st.data())
def test_extend_takes_the_longest_prefix_seen_by_identity(t, data):
    t = freeze(t)
    i, j = sorted(data.draw(st.lists(st.integers(0, len(t)), min_size=2, max_size=2)))
    memo = _rows.Memo()
    for n in (i, j):
        memo.remember("c", pvector(t[:n]), _rows.digest_of(t[:n]))
    expected, _ = _rows.plan_extend("c", t, memo)
    assert expected.count == j


@given(transcripts().filter(bool))
def test_equal_but_not_the_same_values_are_not_a_known_prefix(t):
    """The memo vouches only for objects it saw: an equal copy is planned the general way."""
    memo = _rows.Memo()
    memo.remember("c", freeze(t), _rows.digest_of(freeze(t)))
    assert _rows.plan_extend("c", freeze(t), memo) is None
    assert _rows.plan_extend("other", freeze(t), memo) is None
