"""The rules of store/_rows.py no other test asserts: ids, the memo's bounds and read paths
(read_past, read_list, read_joined) and decode_rows' messages for corrupt rows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from toolnexus.core.frozen import FrozenMap, freeze, thaw
from toolnexus.core.transcript import TranscriptFormatError
from toolnexus.store import _rows
from toolnexus.store.errors import StoreCorruptError
from toolnexus.testing import transcripts

T3 = freeze(
    [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
)


def _texts(t):
    return [_rows.encode_message(m) for m in t]


def _utf8s(t):
    """The rows' UTF-8: what the memo keeps of them."""
    return tuple(text.encode() for text in _texts(t))


def _rows_of(t, start=0):
    return list(enumerate(_texts(t)[start:], start))


def _head(t):
    return (1, len(t), _rows.digest_of(t))


def _memo_knowing(t, stamp="s1", id="c"):
    """A memo that saw `t` stored (exactly) with edit stamp `stamp`."""
    memo = _rows.Memo()
    memo.remember(id, t, _rows.digest_of(t), 0, _utf8s(t), stamp, True)
    return memo


_PREFIX = r"^db: conversation 'c' is not a valid transcript: "


# --- ids -------------------------------------------------------------------------------


def test_unknown_stamp_shows_as_its_name():
    assert repr(_rows.UNKNOWN) == "UNKNOWN"


@pytest.mark.parametrize("bad", ["", None, 5, b"c"])
def test_a_bad_conversation_id_is_refused_with_what_it_was(bad):
    with pytest.raises(ValueError, match=f"non-empty string, got {bad!r}"):
        _rows.check_id(bad)


def test_a_good_id_is_given_back():
    assert _rows.check_id("c") == "c"
    assert _rows.check_text_id("c", "db") == "c"
    assert _rows.check_text_id("café", "db") == "café"


def test_a_lone_surrogate_is_refused_by_a_text_store_naming_where():
    with pytest.raises(ValueError, match=r"^pg: .* \('\\udc80' at 2\), which this store"):
        _rows.check_text_id("ab\udc80", "pg")
    with pytest.raises(ValueError, match="non-empty string"):
        _rows.check_text_id("", "pg")


# --- encoding --------------------------------------------------------------------------


def test_a_pvector_is_taken_as_is_and_a_list_is_frozen():
    assert _rows.frozen(T3) is T3
    got = _rows.frozen(list(T3))
    assert isinstance(got, PVector) and got == T3


@pytest.mark.parametrize("bad", [["role", "user"], {"role": 1}, {"content": "x"}])
def test_a_value_that_is_not_a_message_is_not_encoded(bad):
    with pytest.raises(TranscriptFormatError, match="not a message"):
        _rows.encode_message(bad)


@given(transcripts())
def test_encode_rows_texts_are_the_messages_json_and_kept_only_where_they_read_back(t):
    t = freeze(t)
    texts, kept = _rows.encode_rows(t)
    assert texts == tuple(_texts(t))
    assert all(k is None or k == text for k, text in zip(kept, texts, strict=True))
    assert len(kept) == len(t)


def test_non_ascii_stays_readable_in_a_row():
    texts, kept = _rows.encode_rows([{"role": "user", "content": "é"}])
    assert texts == ('{"role":"user","content":"é"}',) and kept == texts


@given(st.lists(st.text(max_size=5), max_size=4))
def test_chain_over_nothing_is_the_digest_and_each_step_is_32_hex(texts):
    assert _rows.chain("d", []) == "d"
    digest = _rows.chain(_rows.GENESIS, texts)
    assert len(digest) == 32 and int(digest, 16) >= 0
    assert (digest == _rows.GENESIS) == (not texts)


# --- the memo's bounds -----------------------------------------------------------------


def test_the_memo_forgets_the_least_recently_used_id_past_its_size():
    memo = _rows.Memo(size=2)
    for id in ("a", "b"):
        memo.remember(id, T3, "d")
    memo.remember("a", T3, "d")  # "a" is now the most recent
    memo.remember("c", T3, "d")
    assert memo.prefix_of("b", T3, 3) is None
    assert memo.prefix_of("a", T3, 3) is not None and memo.prefix_of("c", T3, 3) is not None


def test_the_memo_keeps_per_id_the_last_transcripts_once_each():
    memo = _rows.Memo(per_id=2)
    one, two, three = T3[:1], T3[:2], T3
    for t in (one, two, three, three):
        memo.remember("c", t, _rows.digest_of(t))
    assert [len(s.transcript) for s in memo._seen("c")] == [3, 2]


def test_only_fully_frozen_transcripts_are_remembered():
    memo = _rows.Memo()
    memo.remember("c", list(T3), "d")
    memo.remember("c", pvector([*T3, {"role": "user", "content": "x"}]), "d")
    assert memo._seen("c") == ()
    memo.remember("c", T3, "d", frozen_upto=3)
    assert memo._seen("c")[0].transcript is T3


def test_remembered_texts_are_immutable_and_exact_needs_texts():
    memo = _rows.Memo()
    given = list(_utf8s(T3))
    memo.remember("c", T3, "d", 0, given, "s", True)
    seen = memo._seen("c")[0]
    assert isinstance(seen.texts, PVector | tuple) and seen.exact and seen.stamp == "s"
    given[0] = b"changed by its caller"
    assert tuple(seen.texts) == _utf8s(T3)
    memo.remember("c", T3[:1], "d", 0, None, "s", True)
    assert memo._seen("c")[0].exact is False


def test_forget_drops_an_id_and_its_unchecked_reads():
    memo = _memo_knowing(T3)
    memo._unchecked["c"] = 3
    memo.forget("c")
    assert memo._seen("c") == () and "c" not in memo._unchecked


def test_evicting_an_id_drops_its_unchecked_reads():
    memo = _rows.Memo(size=1)
    memo.remember("a", T3, "d")
    memo._unchecked["a"] = 1
    memo.remember("b", T3, "d")
    assert "a" not in memo._unchecked


def test_known_is_the_longest_exact_transcript_with_a_known_stamp():
    memo = _rows.Memo()
    assert memo.known("c") is None
    memo.remember("c", T3, "d", 0, _utf8s(T3), _rows.UNKNOWN, True)
    assert memo.known("c") is None  # no stamp vouches for it
    memo.remember("c", T3[:1], "d1", 0, _utf8s(T3[:1]), "s", True)
    memo.remember("c", T3[:2], "d2", 0, _utf8s(T3[:2]), "s", True)
    assert memo.known("c").transcript is memo._seen("c")[0].transcript
    assert len(memo.known("c").transcript) == 2
    memo2 = _rows.Memo()
    memo2.remember("c", T3[:2], "d2", 0, _utf8s(T3[:2]), "s", True)
    memo2.remember("c", T3[:1], "d1", 0, _utf8s(T3[:1]), "s", True)
    assert len(memo2.known("c").transcript) == 2  # the longer one, though older
    memo2.remember("c", T3, "d", 0, _utf8s(T3), "s", False)
    assert len(memo2.known("c").transcript) == 1  # not exact: never extended blindly


def test_known_prefix_skips_longer_transcripts_and_other_objects():
    memo = _rows.Memo(per_id=3)
    memo.remember("c", T3, "d")
    memo.remember("c", T3[:1], "d1")
    assert memo.known_prefix("c", T3[:2]).transcript == T3[:1]
    assert memo.known_prefix("c", freeze(thaw(T3))) is None  # equal, not the same objects
    assert memo.prefix_of("c", T3[:2], 2) is None


def test_starts_compares_the_very_objects():
    a, b = T3, freeze(thaw(T3))
    assert _rows._starts(a, a[:2]) and _rows._starts(a, ())
    assert not _rows._starts(a, b[:2])
    assert not _rows._starts(a, pvector([a[0], b[1]]))
    assert not _rows._starts(a, pvector([b[0], a[1]]))


# --- read_past: extending what the memo knows by the head alone ------------------------


def _past(memo, t, known, stamp="s1", head=None, rows=None, recheck=None):
    k = len(known.transcript)
    return memo.read_past(
        "c", known, head or _head(t), stamp, _rows_of(t, k) if rows is None else rows, recheck
    )


def test_read_past_extends_the_known_transcript_with_its_own_objects():
    memo = _memo_knowing(T3[:1])
    got = _past(memo, T3, memo.known("c"))
    assert got == T3 and got[0] is T3[0] and isinstance(got[2], FrozenMap)
    again = memo.known("c")
    assert again.transcript is got and again.digest == _rows.digest_of(T3)
    assert tuple(again.texts) == _utf8s(T3) and again.stamp == "s1" and again.exact
    assert memo._unchecked["c"] == 1


def test_read_past_with_no_new_rows_is_the_known_transcript_itself():
    memo = _memo_knowing(T3)
    assert _past(memo, T3, memo.known("c")) is T3


@pytest.mark.parametrize(
    "change",
    [
        {"head": (2, 3, _rows.digest_of(T3))},  # another format version
        {"stamp": "s2"},  # a row changed behind the stores' back
        {"head": (1, 4, _rows.digest_of(T3))},  # a count the rows do not make
        {"head": (1, 3.0, _rows.digest_of(T3))},  # a count that is not an int
        {"head": (1, 3, _rows.GENESIS)},  # history rewritten
        {"rows": [(1, _texts(T3)[1]), (3, _texts(T3)[2])]},  # numbered wrong
        {"rows": [(1, _texts(T3)[1]), (2, b"\xff")]},  # not UTF-8
    ],
)
def test_read_past_refuses_what_the_head_does_not_vouch_for(change):
    memo = _memo_knowing(T3[:1])
    assert _past(memo, T3, memo.known("c"), **change) is None


def test_read_past_refuses_an_unreadable_row_whose_digest_matches():
    memo = _memo_knowing(T3[:1])
    rows = [(1, "[1]"), (2, "{")]
    head = (1, 3, _rows.chain(_rows.digest_of(T3[:1]), ["[1]", "{"]))
    assert _past(memo, T3, memo.known("c"), head=head, rows=rows) is None


def test_read_past_refuses_a_known_transcript_without_texts():
    memo = _memo_knowing(T3[:1])
    known = memo.known("c")._replace(texts=None)
    assert _past(memo, T3, known) is None


def test_read_past_takes_rows_given_as_bytes():
    memo = _memo_knowing(T3[:1])
    rows = [(seq, text.encode()) for seq, text in _rows_of(T3, 1)]
    assert _past(memo, T3, memo.known("c"), rows=rows) == T3


def test_without_stamps_a_full_read_comes_after_recheck_reads_by_the_head():
    memo = _memo_knowing(T3)
    for _ in range(2):
        assert _past(memo, T3, memo.known("c"), recheck=2) is T3
    assert _past(memo, T3, memo.known("c"), recheck=2) is None
    rows, (version, count, digest) = _rows_of(T3), _head(T3)
    memo.read("test", "c", version, count, digest, rows, "s1")  # compares every row
    assert _past(memo, T3, memo.known("c"), recheck=2) is T3


# --- Memo.read and read_list -----------------------------------------------------------


def _saved(t, stamp="s1"):
    memo = _rows.Memo()
    memo.saved("c", t, _rows.plan_save("c", None, t, memo)._replace(stamp=stamp))
    return memo


def test_a_read_of_the_rows_saved_gives_the_saved_value_and_keeps_the_new_stamp():
    memo = _saved(T3)
    assert memo.read("test", "c", *_head(T3), _rows_of(T3), "s2") is T3
    assert memo.known("c").stamp == "s2"


def test_a_read_under_another_version_or_digest_is_decoded_not_matched():
    memo = _saved(T3)
    with pytest.raises(StoreCorruptError, match="unknown format version 2"):
        memo.read("test", "c", 2, 3, _rows.digest_of(T3), _rows_of(T3))
    # Another digest over the same texts: the rows are the truth, read as the texts say.
    got = _saved(T3).read("test", "c", 1, 3, _rows.GENESIS, _rows_of(T3))
    assert got == T3 and got[0] is T3[0]


def test_a_read_of_rows_past_the_saved_ones_extends_the_saved_value():
    memo = _saved(T3[:2])
    got = memo.read("test", "c", *_head(T3), _rows_of(T3), "s2")
    assert got == T3 and got[0] is T3[0] and got[1] is T3[1]
    seen = memo.known("c")
    assert seen.transcript is got and seen.stamp == "s2" and seen.digest == _rows.digest_of(T3)


def test_a_read_of_rows_misnumbered_past_the_saved_ones_is_corrupt():
    memo = _saved(T3[:2])
    rows = [*_rows_of(T3)[:2], (5, _texts(T3)[2])]
    with pytest.raises(StoreCorruptError, match="row 2 is missing"):
        memo.read("test", "c", *_head(T3), rows)


def test_a_read_of_a_changed_prefix_reuses_only_unchanged_rows():
    memo = _saved(T3[:2])
    other = T3.set(0, freeze({"role": "system", "content": "be long"}))
    got = memo.read("test", "c", *_head(other), _rows_of(other))
    assert got == other and got[0] is not T3[0] and got[1] is T3[1]


def test_a_read_remembers_what_it_decoded_as_exact_with_its_stamp():
    memo = _rows.Memo()
    got = memo.read("test", "c", *_head(T3), _rows_of(T3), "s3")
    seen = memo.known("c")
    assert seen.transcript is got and seen.stamp == "s3" and seen.exact
    assert tuple(seen.texts) == _utf8s(T3) and seen.digest == _rows.digest_of(T3)
    assert memo.read("test", "c", *_head(T3), _rows_of(T3), "s3") is got


def test_rows_not_utf8_are_decoded_and_named_corrupt():
    memo = _saved(T3)
    rows = [*_rows_of(T3)[:2], (2, b"\xff")]
    with pytest.raises(StoreCorruptError, match="message row 2"):
        memo.read("test", "c", *_head(T3), rows)
    with pytest.raises(StoreCorruptError, match="message row 2"):
        memo.read_list("test", "c", *_head(T3), [t.encode() for t in _texts(T3)[:2]] + [b"\xff"])


@pytest.mark.parametrize("as_bytes", [True, False])
def test_read_list_gives_the_saved_value_back_from_bytes_or_str(as_bytes):
    bodies = [t.encode() if as_bytes else t for t in _texts(T3)]
    assert _saved(T3).read_list("test", "c", *_head(T3), bodies) is T3
    assert _rows.Memo().read_list("test", "c", *_head(T3), bodies) == T3
    got = _saved(T3[:2]).read_list("test", "c", *_head(T3), bodies)
    assert got == T3 and got[0] is T3[0]


def test_read_list_with_a_count_its_bodies_do_not_make_is_corrupt():
    bodies = _texts(T3)
    for memo in (_saved(T3), _saved(T3[:2]), _rows.Memo()):
        with pytest.raises(StoreCorruptError, match="the head says 4 messages but 3 rows"):
            memo.read_list("test", "c", 1, 4, _rows.digest_of(T3), bodies)


# --- decode_rows' messages -------------------------------------------------------------


def test_decode_names_an_unknown_version_and_the_versions_it_reads():
    with pytest.raises(StoreCorruptError, match=r"^db: conversation 'c' is not a valid") as e:
        _rows.decode_rows("db", "c", 7, 0, [])
    assert str(e.value).endswith("unknown format version 7 (this toolnexus reads [1])")


def test_decode_names_the_missing_row_and_the_one_found():
    with pytest.raises(StoreCorruptError, match=r"message row 1 is missing \(found row 2\)"):
        _rows.decode_rows("db", "c", 1, 3, [(0, _texts(T3)[0]), (2, _texts(T3)[2])])
    with pytest.raises(StoreCorruptError, match=r"message row 4 is missing \(found row 5\)"):
        _rows.decode_rows("db", "c", 1, 2, [(3, _texts(T3)[0]), (5, "x")], start=3)


def test_decode_names_a_row_that_is_not_a_message():
    for text, why in (("[1, 2]", "not a message"), ("{", ""), ('{"role": 5}', "")):
        with pytest.raises(StoreCorruptError, match=f"message row 0: {why}"):
            _rows.decode_rows("db", "c", 1, 1, [(0, text)])


def test_decode_counts_past_the_start_in_its_message():
    rows = _rows_of(T3, 1)
    assert _rows.decode_rows("db", "c", 1, 2, rows, start=1) == T3[1:]
    with pytest.raises(StoreCorruptError, match="the head says 4 messages but 3 rows exist"):
        _rows.decode_rows("db", "c", 1, 3, rows, start=1)
    with pytest.raises(StoreCorruptError, match="the head says '3' messages but 3 rows exist"):
        _rows.decode_rows("db", "c", 1, "3", rows, start=1)


def test_decode_reuses_the_known_message_only_where_its_row_is_unchanged():
    other = T3.set(1, freeze({"role": "user", "content": "yo"}))
    got = _rows.decode_rows("db", "c", 1, 3, _rows_of(other), (T3, _utf8s(T3)))
    assert got == other and got[0] is T3[0] and got[2] is T3[2] and got[1] is not T3[1]
    short = _rows.decode_rows("db", "c", 1, 3, _rows_of(T3), (T3[:1], _utf8s(T3)[:1]))
    assert short == T3 and short[0] is T3[0]


def test_decoded_messages_are_pmaps_and_pvectors_all_the_way_down():
    row = '{"content":[{"text":"a","type":"text"}],"role":"user","x":{"y":[1]}}'
    (m,) = _rows.decode_rows("db", "c", 1, 1, [(0, row)])
    assert isinstance(m, FrozenMap) and isinstance(m["content"], PVector)
    assert isinstance(m["content"][0], FrozenMap) and isinstance(m["x"]["y"], PVector)


# --- plans -----------------------------------------------------------------------------


def test_a_save_over_a_longer_or_other_version_or_other_history_replaces():
    memo = _rows.Memo()
    for stored in (
        _rows.Head(1, 4, _rows.digest_of(T3)),
        _rows.Head(2, 2, _rows.digest_of(T3[:2])),
        _rows.Head(1, 2, _rows.GENESIS),
    ):
        plan = _rows.plan_save("c", stored, T3, memo)
        assert (plan.append, plan.start, plan.encoded) == (False, 0, tuple(_texts(T3)))
        assert plan.stamp is _rows.UNKNOWN and plan.exact and plan.texts == _utf8s(T3)


def test_a_save_over_its_own_head_appends_and_keeps_the_stamp_it_knew():
    memo = _saved(T3[:2], stamp="s1")
    plan = _rows.plan_save("c", _rows.Head(*_head(T3[:2])), T3, memo)
    assert (plan.append, plan.start, plan.frozen_upto, plan.stamp) == (True, 2, 2, "s1")
    assert tuple(plan.texts) == _utf8s(T3) and plan.exact
    blind = _rows.plan_save("c", _rows.Head(*_head(T3[:2])), T3, _rows.Memo())
    assert (blind.append, blind.start, blind.frozen_upto, blind.texts) == (True, 2, 0, None)
    assert blind.head == _rows.Head(*_head(T3))


def test_a_plan_with_a_row_json_changes_is_not_exact():
    odd = T3.append(freeze({"role": "user", "content": "q", "x": (1,)}))
    memo = _saved(T3)
    plan = _rows.plan_save("c", _rows.Head(*_head(T3)), odd, memo)
    assert plan.append and not plan.exact and plan.texts[3] is None
    _, ext = _rows.plan_extend("c", odd, memo)
    assert not ext.exact and ext.stamp == "s1" and ext.texts[3] is None
    assert _rows.plan_save("c", None, odd, memo).exact is False


# --- the joined reads of the SQL stores ------------------------------------------------


def _joined(t, stamp="s1", start=0):
    """The rows of a key-first outer join over the head and the message rows from `start`."""
    head = _head(t)
    rows = [(*head, stamp, seq, body) for seq, body in _rows_of(t, start)]
    return rows or [(*head, stamp, None, None)]


def test_split_joined_reads_head_rows_and_stamp():
    assert _rows.split_joined([]) == ((None, None, None), [], None)
    assert _rows.split_joined(_joined(T3, start=3)) == (_head(T3), [], "s1")
    assert _rows.split_joined(_joined(T3, start=1)) == (_head(T3), _rows_of(T3, 1), "s1")


class _Db:
    """A query over one stored transcript that records the `k` it was asked for."""

    def __init__(self, t, stamp="s1"):
        self.t, self.stamp, self.asked = t, stamp, []

    def __call__(self, k):
        self.asked.append(k)
        return _joined(self.t, self.stamp, k) if self.t is not None else []


def test_a_joined_read_reads_only_the_rows_past_what_the_stamp_vouches_for():
    db, memo = _Db(T3[:2]), _rows.Memo()
    first = _rows.read_joined("db", "c", db, memo)
    db.t = T3
    got = _rows.read_joined("db", "c", db, memo)
    assert db.asked == [0, 2] and got == T3 and got[0] is first[0]
    assert _rows.read_joined("db", "c", db, memo) is got and db.asked[-1] == 3


def test_a_joined_read_of_rewritten_history_reads_every_row_again():
    db, memo = _Db(T3), _rows.Memo()
    _rows.read_joined("db", "c", db, memo)
    db.t = T3.set(0, freeze({"role": "system", "content": "be long"}))
    got = _rows.read_joined("db", "c", db, memo)
    assert db.asked == [0, 3, 0] and got == db.t
    db.stamp = "s2"  # a row changed by hand: same head, a new stamp
    assert _rows.read_joined("db", "c", db, memo) == db.t and db.asked[-2:] == [3, 0]


def test_a_joined_read_without_stamps_always_reads_every_row():
    db, memo = _Db(T3), _rows.Memo()
    got = _rows.read_joined("db", "c", db, memo, stamped=False)
    assert _rows.read_joined("db", "c", db, memo, stamped=False) is got
    assert db.asked == [0, 0] and memo.known("c") is None  # no stamp vouches


def test_an_absent_conversation_reads_as_none_and_is_known_empty():
    db, memo = _Db(None), _rows.Memo()
    assert _rows.read_joined("db", "c", db, memo) is None
    seen = memo._seen("c")[0]
    assert (seen.transcript, seen.digest, tuple(seen.texts), seen.exact) == (
        pvector(),
        _rows.GENESIS,
        (),
        True,
    )
    assert _rows.read_joined("db", "c", db, memo) is None and db.asked == [0, 0]
    assert _rows.read_joined("db", "c", db, memo, stamped=False) is None


def test_message_rows_without_a_head_are_corrupt():
    with pytest.raises(StoreCorruptError, match=_PREFIX + "it has message rows but no head$"):
        _rows.decode_joined("db", "c", (None, None, None), [(0, "x")], _rows.Memo())


def test_a_joined_read_without_stamps_remembers_under_its_id():
    db, memo = _Db(T3), _rows.Memo()
    got = _rows.read_joined("db", "c", db, memo, stamped=False)
    assert memo._seen("c")[0].transcript is got


def test_an_absent_conversation_is_known_with_the_stamp_read():
    memo = _rows.Memo()
    assert _rows.decode_joined("db", "c", (None, None, None), [], memo, "s1") is None
    assert memo.known("c").stamp == "s1"


def test_a_half_head_is_corrupt_not_absent():
    """Only a head with neither version nor count is absent: half of one is corrupt."""
    with pytest.raises(StoreCorruptError, match="the head says None messages but 1 rows"):
        _rows.decode_joined("db", "c", (1, None, "d"), [(0, _texts(T3)[0])], _rows.Memo())
    with pytest.raises(StoreCorruptError, match="unknown format version None"):
        _rows.decode_joined("db", "c", (None, 0, "d"), [], _rows.Memo())


# --- every corrupt read names the store and the conversation ---------------------------


@pytest.mark.parametrize(
    "read",
    [
        lambda: _rows.decode_rows("db", "c", 1, 2, [(0, _texts(T3)[0]), (2, "x")]),
        lambda: _rows.decode_rows("db", "c", 1, 1, [(0, "{")]),
        lambda: _rows.decode_rows("db", "c", 1, 2, [(0, _texts(T3)[0])]),
        lambda: _rows.decode_joined("db", "c", (None, None, None), [(0, "x")], _rows.Memo()),
        lambda: _rows.decode_joined("db", "c", (1, 2, "d"), [(0, "{")], _rows.Memo()),
        lambda: _saved(T3).read("db", "c", 1, 3, "d", [*_rows_of(T3)[:2], (2, "{")]),
        lambda: _saved(T3[:2]).read("db", "c", 1, 3, "d", [*_rows_of(T3)[:2], (2, "{")]),
        lambda: _rows.read_joined("db", "c", lambda k: [(1, 1, "d", "s", 0, "{")], _rows.Memo()),
        lambda: _rows.Memo().read_list("db", "c", 1, 1, "d", [b"{"]),
    ],
)
def test_a_corrupt_read_names_the_store_and_the_conversation(read):
    with pytest.raises(StoreCorruptError, match=_PREFIX):
        read()


# --- which remembered transcript a read starts from ------------------------------------


def test_a_read_skips_a_remembered_transcript_whose_texts_are_unknown():
    memo = _saved(T3)
    memo.remember("c", T3[:1], "d")  # newer, but without texts: no match for a read
    assert memo.read("test", "c", *_head(T3), _rows_of(T3)) is T3


def test_of_equally_long_known_transcripts_the_latest_seen_is_extended():
    other = T3.set(2, freeze({"role": "assistant", "content": "hey"}))
    memo = _memo_knowing(T3)
    memo.remember("c", other, _rows.digest_of(other), 0, _utf8s(other), "s1", True)
    assert memo.known("c").transcript is other


def test_plan_extend_appends_after_the_known_prefix_with_its_stamp_and_texts():
    memo = _saved(T3[:2], stamp="s1")
    expected, plan = _rows.plan_extend("c", T3, memo)
    assert expected == _rows.Head(*_head(T3[:2]))
    assert (plan.append, plan.start, plan.frozen_upto, plan.stamp, plan.exact) == (
        True,
        2,
        2,
        "s1",
        True,
    )
    assert plan.encoded == tuple(_texts(T3)[2:]) and tuple(plan.texts) == _utf8s(T3)
    assert plan.head == _rows.Head(*_head(T3))


def test_with_recheck_1_one_read_by_the_head_then_a_full_one():
    memo = _memo_knowing(T3)
    assert _past(memo, T3, memo.known("c"), recheck=1) is T3
    assert _past(memo, T3, memo.known("c"), recheck=1) is None


def test_read_list_remembers_the_stamp_read_with_its_rows():
    memo = _rows.Memo()
    memo.read_list("test", "c", *_head(T3), _texts(T3), "s7")
    assert memo.known("c").stamp == "s7"


@given(transcripts(), st.data())
def test_saved_rows_are_the_rows_utf8_sharing_a_message_json_that_is_its_row(t, data):
    """What a save leaves the memo: each kept row's UTF-8 (None stays None), the very
    object a message keeps as its JSON where that is the row (a row held once)."""
    from toolnexus.core.frozen import keep_json, known_json

    t = freeze(t)
    _, kept = _rows.encode_rows(t)
    for m, k in zip(t, kept, strict=True):
        how = data.draw(st.sampled_from(["none", "row", "other"]))
        if how == "row" and k is not None:
            keep_json(m, bytes(bytearray(k.encode())))  # equal, another object
        elif how == "other":
            keep_json(m, b'{"role":"other"}')
    got = _rows._saved_rows(t, kept)
    assert got == tuple(None if k is None else k.encode() for k in kept)
    for m, row in zip(t, got, strict=True):
        own = known_json(m)
        assert (row is own) == (row is not None and own == row)


@given(transcripts(), st.booleans())
def test_row_bytes_are_the_messages_own_json_exactly_when_each_is_its_row(t, alter):
    from toolnexus.core.frozen import keep_json, known_json

    t = freeze(t)
    rows = tuple(text.encode() for text in _texts(t))
    for m, row in zip(t, rows, strict=True):
        keep_json(m, bytes(bytearray(row)))
    if alter and rows:
        keep_json(t[0], b"another text")
    got = _rows._row_bytes(t, rows)
    assert tuple(got) == rows
    shared = all(g is known_json(m) for g, m in zip(got, t, strict=True))
    assert shared == (not (alter and rows)) or not rows


@given(transcripts(), st.integers(0, 12), st.data())
def test_the_memo_keeps_rows_utf8_and_a_changed_row_is_never_hidden(t, cut, data):
    """A cold read, then a save of more, then reads of the stored rows: the memo holds
    the rows' UTF-8, gives its own value back for unchanged rows and never for a row
    changed behind its back."""
    t = freeze(t)
    cut = min(cut, len(t))
    memo = _rows.Memo()
    first = memo.read("db", "c", *_head(t[:cut]), _rows_of(t[:cut]), "s")
    assert first == t[:cut]
    plan = _rows.plan_save("c", _rows.Head(*_head(t[:cut])), t, memo)
    memo.saved("c", t, plan)
    for seen in memo._seen("c"):
        rows = _utf8s(seen.transcript)
        assert seen.texts is None or all(
            k is None or k == r for k, r in zip(seen.texts, rows, strict=True)
        )
    again = memo.read("db", "c", *_head(t), _rows_of(t), "s")
    assert again == t and (again is t or not plan.exact)
    if t:
        i = data.draw(st.integers(0, len(t) - 1))
        changed = t.set(i, freeze({"role": "user", "content": "changed by hand"}))
        rows = list(enumerate(_texts(changed)))
        assert memo.read("db", "c", *_head(t), rows, "s") == changed
