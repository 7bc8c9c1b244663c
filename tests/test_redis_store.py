"""The Redis store against the real test server: append vs replace, restart, corruption, outage."""

from __future__ import annotations

import durable_store_cases as cases
import pytest

from toolnexus.backends.redis.store import RECHECK, redis_store
from toolnexus.core.frozen import freeze, thaw
from toolnexus.store import StoreCorruptError, StoreUnavailableError


@pytest.fixture
def client(redis_url):
    import redis

    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def prefix(client, unique):
    p = f"tnx-test:{unique}:"
    yield p
    keys = list(client.scan_iter(match=p.replace("[", "\\[") + "*", count=1000))
    if keys:
        client.delete(*keys)


def raw_for(client, prefix) -> dict:
    """Reach past the store into its Redis keys."""
    m, c = prefix + "m:", prefix + "c:"
    return {
        "set_body": lambda id, seq, text: client.lset(m + id, seq, text),
        "drop_row": lambda id, seq: client.lrem(m + id, 1, client.lindex(m + id, seq)),
        "set_version": lambda id, v: client.hset(c + id, "version", v),
        "set_count": lambda id, n: client.hset(c + id, "count", n),
        "rows": lambda id: [b.decode() for b in client.lrange(m + id, 0, -1)],
    }


def test_round_trip_and_restart(redis_url, prefix):
    cases.check_round_trip_and_restart(lambda: redis_store(redis_url, prefix=prefix))


def test_empty_transcript(redis_url, prefix):
    cases.check_empty_transcript(lambda: redis_store(redis_url, prefix=prefix))


def test_hostile_ids(redis_url, prefix):
    cases.check_hostile_ids(lambda: redis_store(redis_url, prefix=prefix))


def test_extend_appends_only_new_rows(redis_url, client, prefix):
    cases.check_extend_appends(
        lambda: redis_store(redis_url, prefix=prefix), raw_for(client, prefix)
    )


def test_rewrite_replaces(redis_url, client, prefix):
    cases.check_rewrite_replaces(
        lambda: redis_store(redis_url, prefix=prefix), raw_for(client, prefix)
    )


def test_interleaved_writers(redis_url, prefix):
    cases.check_interleaved_writers(lambda: redis_store(redis_url, prefix=prefix))


def test_corruption_is_an_error_naming_the_id(redis_url, client, prefix):
    cases.check_corruption(lambda: redis_store(redis_url, prefix=prefix), raw_for(client, prefix))


def test_large_transcript(redis_url, prefix):
    cases.check_large_transcript(lambda: redis_store(redis_url, prefix=prefix))


def test_wrong_key_types_are_corrupt_and_left_alone(client, prefix):
    s = redis_store(client, prefix=prefix)
    client.set(prefix + "m:a", "a string, not a list")
    client.hset(prefix + "c:a", mapping={"version": 1, "count": 0, "digest": "x"})
    with pytest.raises(StoreCorruptError, match="'a'"):
        s["get"]("a")
    with pytest.raises(StoreCorruptError, match="'a'"):
        s["save"]("a", cases.turns(2))
    assert client.get(prefix + "m:a") == b"a string, not a list"  # no half-done write


def test_rows_without_a_head_are_corrupt(client, prefix):
    s = redis_store(client, prefix=prefix)
    s["save"]("a", cases.turns(2))
    client.delete(prefix + "c:a")
    with pytest.raises(StoreCorruptError, match="'a'"):
        s["get"]("a")


def test_accepts_a_client_and_a_url_alike(redis_url, client, prefix):
    redis_store(client, prefix=prefix)["save"]("a", cases.turns(3))
    assert thaw(redis_store(redis_url, prefix=prefix)["get"]("a")) == cases.turns(3)
    assert redis_store(client, prefix=prefix)["desc"].startswith("redis(")


def test_prefixes_isolate_tenants(client, prefix):
    a, b = redis_store(client, prefix=prefix + "a:"), redis_store(client, prefix=prefix + "b:")
    a["save"]("x", cases.turns(1))
    assert b["get"]("x") is None and b["ids"]() == ()


def test_a_server_that_is_down_is_a_clear_error_without_the_password():
    s = redis_store("redis://:hunter2@127.0.0.1:1/0")
    for call in (lambda: s["get"]("a"), lambda: s["save"]("a", []), s["ids"]):
        with pytest.raises(StoreUnavailableError) as e:
            call()
        assert "127.0.0.1:1" in str(e.value) and "hunter2" not in str(e.value)
    assert "hunter2" not in s["desc"]


def test_a_refused_save_leaves_the_stored_transcript_unchanged(client, prefix):
    s = redis_store(client, prefix=prefix)
    s["save"]("a", cases.turns(2))
    client.set(prefix + "ids", "not a set")  # the script refuses before writing anything
    with pytest.raises(StoreCorruptError):
        s["save"]("a", cases.turns(2) + cases.turns(2, tag="x"))
    client.delete(prefix + "ids")
    assert thaw(s["get"]("a")) == cases.turns(2)


def test_concurrent_appends_from_threads_lose_nothing_per_id(client, prefix):
    cases.check_threads_share_one_store(lambda: redis_store(client, prefix=prefix))


def test_property_against_a_dict(redis_url, prefix):
    cases.property_against_a_dict(lambda: redis_store(redis_url, prefix=prefix), 30)()


def test_store_contract(redis_url, prefix):
    from toolnexus.testing import check_store_contract

    check_store_contract(lambda: redis_store(redis_url, prefix=prefix))


def test_racing_savers_never_tear_a_transcript(redis_url, prefix):
    cases.check_racing_savers(lambda: redis_store(redis_url, prefix=prefix))


class _Counted:
    """A redis client that counts the commands the store sends itself (scripts aside)."""

    def __init__(self, client):
        self._client, self.sent = client, []

    def __getattr__(self, name):
        attr = getattr(self._client, name)
        if name in ("hmget", "pipeline"):
            self.sent.append(name)
        return attr


def test_an_append_to_what_was_read_is_one_script_call(client, prefix):
    """A service's save (what it just read, plus new messages) sends no head read first."""
    counted = _Counted(client)
    store, cid = redis_store(counted, prefix=prefix), cases.new_id()
    store["save"](cid, cases.turns(2))
    read = store["get"](cid)
    del counted.sent[:]
    store["save"](cid, read.append(freeze(cases.msg("user", "more"))))
    assert counted.sent == []
    assert thaw(redis_store(client, prefix=prefix)["get"](cid)) == cases.turns(2) + [
        cases.msg("user", "more")
    ]


def test_an_append_over_a_moved_head_saves_whole(client, prefix):
    counted = _Counted(client)
    mine, theirs = redis_store(counted, prefix=prefix), redis_store(client, prefix=prefix)
    cid = cases.new_id()
    mine["save"](cid, cases.turns(2))
    read = mine["get"](cid)
    theirs["save"](cid, cases.turns(3, "theirs"))
    del counted.sent[:]
    mine["save"](cid, read.append(freeze(cases.msg("user", "mine"))))
    assert counted.sent == ["hmget"]  # the expected head was stale: read it, then save
    expected = cases.turns(2) + [cases.msg("user", "mine")]
    assert thaw(theirs["get"](cid)) == expected
    assert len(raw_for(client, prefix)["rows"](cid)) == len(expected)


def test_a_get_after_a_save_hands_back_the_value_saved(redis_url, client, prefix):
    # Redis keeps no stamp of rows changed by hand: a process that read the conversation
    # sees such a change within RECHECK reads (a new one at once).
    cases.check_get_hands_back_the_value_saved(
        lambda: redis_store(redis_url, prefix=prefix), raw_for(client, prefix), RECHECK + 1
    )


def test_a_get_reads_past_what_it_knows_and_hides_nothing(redis_url, client, prefix):
    cases.check_reads_past_what_it_knows_and_hides_nothing(
        lambda: redis_store(redis_url, prefix=prefix), raw_for(client, prefix), RECHECK + 1
    )
