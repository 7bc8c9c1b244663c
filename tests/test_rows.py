"""The row-store algebra (store/_rows.py): plans to append or replace, and the memo."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from toolnexus.core.frozen import freeze
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


def _stored(t):
    """The rows and head a backend would hold for transcript `t`."""
    texts = [_rows.encode_message(m) for m in t]
    return list(enumerate(texts)), _rows.chain(_rows.GENESIS, texts)


@given(transcripts().filter(bool), st.data())
def test_a_read_gives_back_what_was_saved_and_never_hides_a_changed_row(t, data):
    """Memo.read: the rows of the last save give that very value back; a row changed
    since (same head, say, by hand) is read as it now is, never the memo's."""
    t = freeze(t)
    memo = _rows.Memo()
    plan = _rows.plan_save("c", None, t, memo)
    memo.saved("c", t, plan)
    rows, digest = _stored(t)
    assert memo.read("test", "c", 1, len(t), digest, rows) is t
    k = data.draw(st.integers(0, len(t) - 1))
    edited = freeze({"role": "user", "content": data.draw(st.text())})
    changed = [*rows[:k], (k, _rows.encode_message(edited)), *rows[k + 1 :]]
    got = memo.read("test", "c", 1, len(t), digest, changed)  # the head still says `digest`
    assert got == t.set(k, edited)
    assert got[k] == edited and all(got[i] is t[i] for i in range(len(t)) if i != k)


@given(transcripts().filter(bool))
def test_a_read_of_rows_this_memo_never_saw_decodes_them(t):
    t = freeze(t)
    rows, digest = _stored(t)
    fresh = _rows.Memo().read("test", "c", 1, len(t), digest, rows)
    assert fresh == t
    as_bytes = [(seq, body.encode()) for seq, body in rows]  # a driver may give bytes
    assert _rows.Memo().read("test", "c", 1, len(t), digest, as_bytes) == t


def test_a_stored_row_whose_tool_calls_is_not_a_list_is_corrupt():
    import pytest

    from toolnexus.store import StoreCorruptError

    row = '{"content":null,"role":"assistant","tool_calls":5}'
    with pytest.raises(StoreCorruptError, match="row 0: a message's tool_calls must be a list"):
        _rows.decode_rows("test", "c", 1, 1, [(0, row)])


def test_a_saved_value_json_would_change_reads_back_as_any_process_reads_it():
    """Fails before the fix: a read matching the rows of the last save gave back the saved
    value itself, though JSON changed it (a number key became a string, a tuple a list),
    so this process saw another value than every other process reading the same rows."""
    for odd in ({1: "one"}, ("a", "b")):
        t = freeze([{"role": "user", "content": "q"}, {"role": "user", "content": "r", "x": odd}])
        memo = _rows.Memo()
        memo.saved("c", t, _rows.plan_save("c", None, t, memo))
        rows, digest = _stored(t)
        here = memo.read("test", "c", 1, len(t), digest, rows)
        elsewhere = _rows.Memo().read("test", "c", 1, len(t), digest, rows)
        assert _rows.encode_message(here[1]) == _rows.encode_message(elsewhere[1])
        assert type(here[1]["x"]) is type(elsewhere[1]["x"]) and here[1] is not t[1]
        assert here[0] is t[0]  # what JSON keeps is still the saved value itself


def test_a_message_no_reader_could_take_back_is_refused_when_saved():
    import pytest

    from toolnexus.core.transcript import TranscriptFormatError

    for number in (float("nan"), float("inf")):
        t = freeze([{"role": "user", "content": "q", "score": number}])
        with pytest.raises(TranscriptFormatError, match="not JSON"):
            _rows.plan_save("c", None, t, _rows.Memo())
