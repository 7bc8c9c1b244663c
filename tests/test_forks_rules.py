"""The rules of store/forks.py no other test asserts: each refusal's message, the bounds of
`at` and `turns` (1 is a count, True is not), the digest a fork keeps or gets, the store's
fused "fork" call and what it is handed, and decode_row naming the store and the id."""

from __future__ import annotations

import pytest

from toolnexus.store import StoreCorruptError, fork, in_memory_store, rewind
from toolnexus.store.forks import check_boundary, decode_row, forked_digest
from toolnexus.store.fused import derive, fuse

Q = {"role": "user", "content": "q"}
A = {"role": "assistant", "content": "a"}
T = [Q, A, {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]


def saved(t=T):
    store = in_memory_store()
    store["save"]("src", t)
    return store


def test_at_one_is_a_count_and_forks_the_first_message():
    led = [{"role": "system", "content": "s"}, *T]  # 1 is a turn boundary after a system message
    store = saved(led)
    assert fork(store, "src", "dst", at=1) == 1
    assert list(store["get"]("dst")) == led[:1]


@pytest.mark.parametrize("at", [0, -1, True, False, "2", 2.0])
def test_at_must_be_a_count_of_at_least_one(at):
    store = saved()
    with pytest.raises(ValueError, match=r"at must be a message count >= 1, got "):
        fork(store, "src", "dst", at=at)
    assert store["get"]("dst") is None


def test_the_refusals_name_what_is_wrong():
    store = saved()
    with pytest.raises(ValueError, match="^fork: src and dst are the same conversation$"):
        fork(store, "src", "src")
    with pytest.raises(KeyError, match="no conversation 'nobody' to fork"):
        fork(store, "nobody", "dst")
    with pytest.raises(ValueError, match=r"at=5 is past the end of 'src' \(4 messages\)"):
        fork(store, "src", "dst", at=5)
    with pytest.raises(ValueError, match="message 1 is a 'assistant' message inside a turn"):
        check_boundary(1, A)
    check_boundary(2, Q)  # a turn start, or the end: whole
    check_boundary(4, None)


@pytest.mark.parametrize("turns", [0, -1, True, "1", 1.0])
def test_turns_must_be_an_integer_of_at_least_one(turns):
    store = saved()
    with pytest.raises(ValueError, match=r"turns must be an integer >= 1, got "):
        rewind(store, "src", turns)
    assert list(store["get"]("src")) == T


def test_rewind_names_what_is_missing_or_short():
    store = saved()
    with pytest.raises(KeyError, match="no conversation 'nobody' to rewind"):
        rewind(store, "nobody")
    with pytest.raises(ValueError, match="'src' has 2 turns, cannot rewind 3"):
        rewind(store, "src", 3)
    assert list(rewind(store, "src", 2)) == []


def test_a_whole_fork_keeps_the_digest_and_a_prefix_gets_one_no_transcript_has():
    assert forked_digest("abc", 5, 5) == "abc"
    one, two = forked_digest("abc", 5, 3), forked_digest("abc", 5, 3)
    assert one.startswith("fork-") and two.startswith("fork-") and one != two != "abc"


def test_a_store_with_a_fused_fork_copies_through_it_under_dst_s_lock():
    calls, locked = [], []

    class Lock:
        def __init__(self, id):
            self.id = id

        def __enter__(self):
            locked.append(self.id)

        def __exit__(self, *exc):
            locked.append(f"/{self.id}")

    def fast(src, dst, at, check):
        calls.append((src, dst, at))
        check(A if at == 1 else Q)  # the message at index `at`, as the server read it
        return at

    base = in_memory_store()
    store = derive(base, lock=Lock, fused={"fork": fuse(fast, "get", "save")})
    assert fork(store, "src", "dst", at=2) == 2
    assert calls == [("src", "dst", 2)] and locked == ["dst", "/dst"]
    with pytest.raises(ValueError, match="at=1 is not a turn boundary: message 1 is a 'assistant'"):
        fork(store, "src", "dst", at=1)
    assert base["get"]("dst") is None  # never through get + save


def test_decode_row_names_the_store_and_the_id_of_a_corrupt_row():
    assert decode_row("sqlite", "c1", 1, '{"role":"user","content":"q"}') == Q
    with pytest.raises(StoreCorruptError) as err:
        decode_row("sqlite", "c1", 1, "{not json")
    assert "sqlite" in str(err.value) and "'c1'" in str(err.value)
