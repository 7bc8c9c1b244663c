"""Store decorators over real stores (in-memory dicts and real files): behaviour and errors."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import toolz
from cryptography.fernet import Fernet, MultiFernet
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core import transcript as tx
from toolnexus.store import (
    DecryptionError,
    StoreCorruptError,
    capped_store,
    encrypted,
    file_store,
    in_memory_store,
    namespaced,
    observed,
    read_through,
    retention,
    sanitize_ids,
    sanitized_file_store,
    sqlite_store,
)
from toolnexus.store.decorators import SAVED_AT, sanitize_id
from toolnexus.store.fused import derive, stored_view
from toolnexus.testing import conversation_ids, transcripts
from toolnexus.testing.strategies import COLLIDING_IDS, HOSTILE_IDS

HI = [{"role": "user", "content": "hi"}]


def msgs(n: int) -> list[dict]:
    return [{"role": "user", "content": str(i)} for i in range(n)]


class Clock:
    """A settable clock (seconds) for retention."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


# ---- composition --------------------------------------------------------------


def test_decorators_curry_compose_and_describe_themselves(tmp_path):
    key = Fernet.generate_key()
    s = toolz.pipe(
        sanitized_file_store(tmp_path),
        encrypted(key),
        namespaced("acme"),
        capped_store(3),
        observed(on_save=lambda id, t: None),
    )
    assert s["desc"] == (
        f"observed(capped(3, namespaced('acme', encrypted(sanitized(file({str(tmp_path)!r}))))))"
    )
    assert key.decode() not in s["desc"]
    s["save"]("u/1", msgs(5))
    assert [m["content"] for m in s["get"]("u/1")] == ["2", "3", "4"]
    assert s["ids"]() == ("u/1",)
    s["delete"]("u/1")
    assert s["get"]("u/1") is None and list(tmp_path.iterdir()) == []
    assert (
        capped_store(3, in_memory_store())["desc"]
        == toolz.compose(capped_store(3))(in_memory_store())["desc"]
    )


def test_decorators_pass_extra_keys_through():
    base = {**in_memory_store(), "close": lambda: "closed"}
    for deco in (capped_store(2), sanitize_ids, namespaced("t"), observed, retention(60)):
        assert deco(base)["close"]() == "closed"
    assert read_through(in_memory_store(), base)["close"]() == "closed"
    assert encrypted(Fernet.generate_key(), base)["close"]() == "closed"


@pytest.mark.parametrize(
    "make",
    [
        lambda s: capped_store(3, s),
        sanitize_ids,
        lambda s: namespaced("t", s),
        observed,
        lambda s: read_through(in_memory_store(), s),
        lambda s: retention(60, s),
        lambda s: encrypted(Fernet.generate_key(), s),
    ],
)
def test_a_non_store_is_a_clear_type_error(make):
    with pytest.raises(TypeError, match="expected a store"):
        make({"get": lambda id: None})


@pytest.mark.parametrize("n", [0, -1, 1.5, "3", True])
def test_capped_store_refuses_a_bad_size(n):
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        capped_store(n, in_memory_store())


# ---- capped ---------------------------------------------------------------------


@given(transcripts(), st.integers(1, 8))
def test_capped_store_stores_the_safe_trim(t, n):
    backing: dict = {}
    s = capped_store(n, in_memory_store(backing))
    s["save"]("c", t)
    assert backing.get("c") == tx.trim(t, n)
    d = tx.dangling(s["get"]("c"))
    assert not d["unanswered"] and not d["orphaned"]


# ---- sanitized ids ----------------------------------------------------------------

KEY = re.compile(r"[a-z0-9_-]{1,100}")


@given(st.lists(conversation_ids(), min_size=2, max_size=6, unique=True))
def test_sanitize_id_is_injective_and_safe_even_ignoring_case(ids):
    keys = [sanitize_id(i) for i in ids]
    assert len({k.lower() for k in keys}) == len(ids)
    assert all(KEY.fullmatch(k) and k not in (".", "..") for k in keys)


def test_sanitize_id_keeps_hostile_pairs_apart():
    for a, b in COLLIDING_IDS:
        assert sanitize_id(a) != sanitize_id(b), (a, b)
    assert sanitize_id("con") != "con" and sanitize_id("LPT1") != "lpt1"
    with pytest.raises(ValueError, match="non-empty string"):
        sanitize_id("")


def test_sanitized_file_store_names_files_safely_and_lists_every_id(tmp_path):
    s = sanitized_file_store(tmp_path)
    for i in HOSTILE_IDS:
        s["save"](i, [{"role": "user", "content": i}])
    names = [p.name for p in tmp_path.iterdir()]
    assert all(re.fullmatch(r"[a-z0-9_-]{1,100}\.json", n) for n in names), names
    assert sorted(s["ids"]()) == sorted(HOSTILE_IDS)
    for i in HOSTILE_IDS:
        assert s["get"](i)[0]["content"] == i
    # A fresh store over the same directory (a restart) lists the long, hashed ids too.
    assert sorted(sanitized_file_store(tmp_path)["ids"]()) == sorted(HOSTILE_IDS)
    for i in HOSTILE_IDS:
        s["delete"](i)
    assert list(tmp_path.iterdir()) == []


def test_sanitize_ids_without_ids_writes_no_side_records():
    backing: dict = {}
    base = in_memory_store(backing)
    s = sanitize_ids({"get": base["get"], "save": base["save"]})
    s["save"]("x" * 300, HI)
    assert list(backing) == [sanitize_id("x" * 300)] and "ids" not in s


# ---- namespaced -----------------------------------------------------------------------


def test_namespaced_tenants_share_a_backend_without_clashes(tmp_path):
    shared = file_store(tmp_path)
    a, ab = namespaced("a", shared), namespaced("ab", shared)
    a["save"]("bx", [{"role": "user", "content": "tenant a"}])
    ab["save"]("x", [{"role": "user", "content": "tenant ab"}])
    assert a["get"]("bx")[0]["content"] == "tenant a"
    assert ab["get"]("x")[0]["content"] == "tenant ab"
    assert a["get"]("x") is None and ab["get"]("bx") is None
    assert a["ids"]() == ("bx",) and ab["ids"]() == ("x",)
    a["delete"]("bx")
    assert ab["get"]("x") is not None and a["ids"]() == ()


@pytest.mark.parametrize("prefix", ["", "a:b", None, 3])
def test_namespaced_refuses_a_bad_prefix(prefix):
    with pytest.raises(ValueError, match="prefix"):
        namespaced(prefix, in_memory_store())


# ---- observed ------------------------------------------------------------------------


def test_observed_reports_every_operation_after_it_succeeds():
    events = []
    s = observed(
        in_memory_store(),
        on_get=lambda id, t: events.append(("get", id, None if t is None else len(t))),
        on_save=lambda id, t: events.append(("save", id, len(t))),
        on_delete=lambda id: events.append(("delete", id)),
    )
    s["get"]("a")
    s["save"]("a", msgs(2))
    s["get"]("a")
    s["delete"]("a")
    assert events == [("get", "a", None), ("save", "a", 2), ("get", "a", 2), ("delete", "a")]


def test_observed_curries_with_keywords_only_and_lets_callback_errors_through():
    def boom(id, t):
        raise RuntimeError("audit down")

    backing: dict = {}
    s = observed(on_save=boom)(in_memory_store(backing))
    with pytest.raises(RuntimeError, match="audit down"):
        s["save"]("a", HI)
    assert "a" in backing  # the save itself happened before the callback


# ---- read-through cache -------------------------------------------------------------------


def test_read_through_serves_from_the_cache_and_refreshes_it_on_save(tmp_path):
    remote_reads = []
    remote = observed(file_store(tmp_path), on_get=lambda id, t: remote_reads.append(id))
    cache_backing: dict = {}
    s = read_through(in_memory_store(cache_backing), remote)
    s["save"]("a", msgs(1))
    assert s["get"]("a") == tx.freeze_transcript(msgs(1))
    assert remote_reads == []  # written through: the cache already had it
    s["save"]("a", msgs(2))
    assert len(s["get"]("a")) == 2 and len(cache_backing["a"]) == 2
    assert s["get"]("missing") is None and remote_reads == ["missing"]
    fresh = read_through(in_memory_store(), remote)  # a cold cache fills from the remote
    assert len(fresh["get"]("a")) == 2 and remote_reads == ["missing", "a"]
    s["delete"]("a")
    assert s["get"]("a") is None and "a" not in cache_backing


def test_read_through_leaves_no_stale_copy_when_the_remote_save_fails():
    cache_backing: dict = {}
    remote = in_memory_store()

    def failing_save(id, t):
        raise ConnectionError("remote down")

    s = read_through(in_memory_store(cache_backing), remote)
    s["save"]("a", msgs(1))
    broken = read_through(in_memory_store(cache_backing), {**remote, "save": failing_save})
    with pytest.raises(ConnectionError):
        broken["save"]("a", msgs(2))
    assert "a" not in cache_backing
    assert len(broken["get"]("a")) == 1  # what the remote really holds


def test_read_through_returns_what_the_capped_store_behind_it_returns(tmp_path):
    """Fails on the old code: a warm cache returned all 6 messages, a cold one 2."""
    backing = capped_store(2, sqlite_store(tmp_path / "c.db"))
    s = read_through(in_memory_store(), backing)
    s["save"]("a", msgs(6))
    assert s["get"]("a") == backing["get"]("a") == tx.freeze_transcript(msgs(6)[-2:])
    cold = read_through(in_memory_store(), backing)
    assert cold["get"]("a") == s["get"]("a")


def test_read_through_reads_back_what_an_undeclared_transform_stored():
    """A user's decorator that changes what is saved, without declaring a stored view:
    read_through reads the store back after each save instead of guessing."""
    inner = in_memory_store()

    def shouting(store):  # a user's decorator, built with derive as the docs say
        return derive(
            store,
            save=lambda id, t: store["save"](
                id, [{**m, "content": str(m["content"]).upper()} for m in t]
            ),
        )

    loud = shouting(inner)
    assert stored_view(loud) is None  # the replaced save dropped the inner declaration
    s = read_through(in_memory_store(), loud)
    s["save"]("a", [{"role": "user", "content": "hi"}])
    assert s["get"]("a") == inner["get"]("a") and s["get"]("a")[0]["content"] == "HI"


def test_stored_views_compose_and_are_dropped_where_unknown(tmp_path):
    t = msgs(5)
    key = Fernet.generate_key()
    base = sanitized_file_store(tmp_path)
    composed = toolz.pipe(base, encrypted(key), namespaced("acme"), capped_store(3), observed)
    assert stored_view(composed)(t) == tx.freeze_transcript(t[-3:])
    composed["save"]("x", t)
    assert composed["get"]("x") == stored_view(composed)(t)
    assert stored_view(retention(60, base)) is None  # what it returns depends on the clock
    assert stored_view({"get": lambda id: None, "save": lambda id, t: None}) is None


def test_read_through_needs_a_cache_that_can_delete():
    with pytest.raises(ValueError, match="needs 'delete'"):
        read_through({"get": lambda id: None, "save": lambda id, t: None}, in_memory_store())


# ---- retention ------------------------------------------------------------------------------


def test_retention_expires_conversations_not_saved_within_max_age():
    clock, backing = Clock(), {}
    s = retention(timedelta(minutes=1), in_memory_store(backing), now=clock)
    s["save"]("old", HI)
    clock.t += 30
    s["save"]("new", HI)
    clock.t += 30
    assert s["get"]("old") is not None  # exactly max_age: still there
    assert sorted(s["ids"]()) == ["new", "old"]
    clock.t += 1
    assert s["ids"]() == ("new",)
    assert s["get"]("old") is None
    assert "old" not in backing and SAVED_AT + "old" not in backing  # deleted on read
    assert s["get"]("new") is not None
    s["save"]("old", HI)  # saved again: a new life
    assert s["get"]("old") is not None


def test_retention_without_delete_reads_expired_as_absent_and_keeps_the_data():
    clock, backing = Clock(), {}
    base = in_memory_store(backing)
    s = retention(10, {"get": base["get"], "save": base["save"]}, now=clock)
    s["save"]("a", HI)
    clock.t += 11
    assert s["get"]("a") is None and "a" in backing


def test_retention_starts_the_clock_of_older_conversations_at_first_read():
    clock, backing = Clock(), {}
    in_memory_store(backing)["save"]("legacy", HI)
    s = retention(10, in_memory_store(backing), now=clock)
    assert s["get"]("legacy") is not None
    clock.t += 11
    assert s["get"]("legacy") is None


def test_retention_survives_a_restart_over_a_file_store(tmp_path):
    clock = Clock()
    retention(10, file_store(tmp_path), now=clock)["save"]("a", HI)
    clock.t += 5
    assert retention(10, file_store(tmp_path), now=clock)["get"]("a") is not None
    clock.t += 6
    assert retention(10, file_store(tmp_path), now=clock)["get"]("a") is None
    assert list(tmp_path.glob("*.json")) == []


def test_retention_errors():
    for bad in (-1, "1h", float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="max_age"):
            retention(bad, in_memory_store())
    s = retention(10, in_memory_store())
    with pytest.raises(ValueError, match="reserved"):
        s["save"](SAVED_AT + "x", HI)
    backing: dict = {"a": tx.freeze_transcript(HI), SAVED_AT + "a": tx.freeze_transcript(HI)}
    with pytest.raises(StoreCorruptError, match="'a'"):
        retention(10, in_memory_store(backing))["get"]("a")


# ---- encrypted ----------------------------------------------------------------------------------


def test_encrypted_store_holds_only_ciphertext_on_disk(tmp_path):
    key = Fernet.generate_key()
    s = encrypted(key, file_store(tmp_path))
    secret = [{"role": "user", "content": "my password is hunter2"}]
    s["save"]("a", secret)
    raw = (tmp_path / "a.json").read_text()
    assert "hunter2" not in raw and '"user"' not in raw and "toolnexus.encrypted" in raw
    assert s["get"]("a") == tx.freeze_transcript(secret)
    assert encrypted(key, file_store(tmp_path))["get"]("a") == tx.freeze_transcript(secret)
    assert s["get"]("b") is None


def test_encrypted_with_the_wrong_key_is_a_clear_error_never_no_history(tmp_path):
    encrypted(Fernet.generate_key(), file_store(tmp_path))["save"]("a", HI)
    other = Fernet.generate_key()
    with pytest.raises(DecryptionError, match="wrong key") as e:
        encrypted(other, file_store(tmp_path))["get"]("a")
    assert other.decode() not in str(e.value)


def test_encrypted_rotates_keys_with_multifernet():
    backing: dict = {}
    old, new = Fernet(Fernet.generate_key()), Fernet(Fernet.generate_key())
    encrypted(old, in_memory_store(backing))["save"]("a", HI)
    rotated = encrypted(MultiFernet([new, old]), in_memory_store(backing))
    assert rotated["get"]("a")[0]["content"] == "hi"
    rotated["save"]("a", HI)  # re-encrypted with the new key
    assert encrypted(new, in_memory_store(backing))["get"]("a")[0]["content"] == "hi"


def test_encrypted_refuses_plaintext_and_bad_keys():
    backing: dict = {}
    in_memory_store(backing)["save"]("plain", HI)
    with pytest.raises(StoreCorruptError, match="not encrypted"):
        encrypted(Fernet.generate_key(), in_memory_store(backing))["get"]("plain")
    with pytest.raises(ValueError, match="Fernet key") as e:
        encrypted("not-a-key-s3cret", in_memory_store())
    assert "s3cret" not in str(e.value)


@pytest.mark.parametrize("plain", [b'{"version": 1}', b'{"version": 1, "messages": null}'])
def test_encrypted_data_without_messages_is_corrupt_never_empty(plain):
    """Fails on the old code: it decrypted to an empty transcript."""
    key, backing = Fernet.generate_key(), {}
    token = Fernet(key).encrypt(plain).decode("ascii")
    in_memory_store(backing)["save"]("x", [{"role": "toolnexus.encrypted", "content": token}])
    with pytest.raises(StoreCorruptError, match="not a transcript"):
        encrypted(key, in_memory_store(backing))["get"]("x")
