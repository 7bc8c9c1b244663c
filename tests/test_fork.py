"""fork and rewind on every shipped store (real files, the real Redis and PostgreSQL), the
server-side fast path, decorators never bypassed, and the CLI."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from durable_store_cases import store_maker

from toolnexus.cli import main
from toolnexus.store import (
    _rows,
    capped_store,
    encrypted,
    fork,
    namespaced,
    rewind,
    sqlite_store,
    turn_boundaries,
)
from toolnexus.store.fused import fused_call

Q = {"role": "user", "content": "weather?"}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
A = {"role": "assistant", "content": "It is sunny."}
THANKS = {"role": "user", "content": "thanks"}
T = [{"role": "system", "content": "s"}, Q, CALL, RESULT, A, THANKS,
     {"role": "assistant", "content": "welcome"}]  # fmt: skip


@pytest.fixture(params=["memory", "file", "sqlite", "redis", "postgres"])
def make_store(request, tmp_path, unique):
    """Return make_store() for each shipped store: a new object on the same backing."""
    yield from store_maker(request.param, request, tmp_path, unique, "fork")


def test_fork_copies_whole_or_at_a_boundary_and_never_changes_src(make_store):
    s = make_store()
    s["save"]("src", T)
    s["save"]("dst", [{"role": "user", "content": "old"}])
    assert turn_boundaries(T) == (1, 5, 7)
    assert fork(s, "src", "dst") in (7, None)
    assert s["get"]("dst") == s["get"]("src") == T[:]
    assert fork(s, "src", "dst", at=5) == 5
    assert list(s["get"]("dst")) == T[:5] and list(s["get"]("src")) == T
    for inside in (2, 3, 4, 6):  # a cut inside a turn orphans a result or loses the answer
        with pytest.raises(ValueError, match=f"at={inside} is not a turn boundary"):
            fork(s, "src", "other", at=inside)
    assert s["get"]("other") is None
    with pytest.raises(ValueError, match="past the end"):
        fork(s, "src", "other", at=8)
    with pytest.raises(KeyError):
        fork(s, "nobody", "other")
    with pytest.raises(ValueError):
        fork(s, "src", "src")
    with pytest.raises(ValueError):
        fork(s, "src", "other", at=0)


def test_a_fork_goes_on_like_any_conversation_after_a_restart(make_store):
    """The fork's head (its digest unknown for a prefix) must not break later appends."""
    s = make_store()
    s["save"]("src", T)
    fork(s, "src", "dst", at=5)
    more = [*s["get"]("dst"), {"role": "user", "content": "and tomorrow?"}]
    s["save"]("dst", more)
    assert list(s["get"]("dst")) == more
    again = make_store()  # a restart: no memo of what was read or saved
    more2 = [*again["get"]("dst"), {"role": "assistant", "content": "rain"}]
    again["save"]("dst", more2)
    assert list(make_store()["get"]("dst")) == more2
    assert list(make_store()["get"]("src")) == T
    fork(again, "src", "whole")
    again["save"]("whole", [*T, Q])
    assert list(make_store()["get"]("whole")) == [*T, Q]


def test_rewind_drops_whole_turns(make_store):
    s = make_store()
    s["save"]("c", T)
    assert list(rewind(s, "c")) == T[:5] and list(s["get"]("c")) == T[:5]
    assert list(rewind(s, "c")) == T[:1]  # the system message stays
    with pytest.raises(ValueError, match="has 0 turns"):
        rewind(s, "c")
    with pytest.raises(KeyError):
        rewind(s, "nobody")


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_durable_stores_fork_without_reading_the_conversation(
    request, kind, monkeypatch, tmp_path, unique
):
    if kind == "sqlite":
        s = sqlite_store(tmp_path / "fast.db")
    elif kind == "redis":
        from toolnexus.store import redis_store

        s = redis_store(request.getfixturevalue("redis_url"), prefix=f"tnx-fast:{unique}:")
    else:
        from toolnexus.store import postgres_store

        s = postgres_store(request.getfixturevalue("postgres_dsn"), f"tnx_{unique}")
    long = [m for _ in range(200) for m in (Q, A)]
    s["save"]("src", long)
    decoded: list[int] = []
    real = _rows.decode_rows

    def spy(backend, id, version, count, rows):
        decoded.append(count)
        return real(backend, id, version, count, rows)

    monkeypatch.setattr(_rows, "decode_rows", spy)
    monkeypatch.setattr(_rows, "decode_joined", lambda *a: pytest.fail("a whole get"))
    assert fused_call(s, "fork") is not None
    assert fork(s, "src", "dst") == 400 and decoded == []
    assert fork(s, "src", "half", at=200) == 200 and decoded == [1]  # the one message at the cut
    monkeypatch.undo()
    assert list(s["get"]("half")) == long[:200] and list(s["get"]("dst")) == long
    for id in ("src", "dst", "half"):
        s["delete"](id)
    if kind == "postgres":
        s["close"]()
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_dsn"), autocommit=True) as c:
            c.execute(f"DROP TABLE tnx_{unique}, tnx_{unique}_heads")


def test_decorators_are_never_bypassed(tmp_path):
    inner = sqlite_store(tmp_path / "d.db")
    tenant = namespaced("acme", inner)
    tenant["save"]("src", T)
    assert fused_call(tenant, "fork") is not None  # namespaced only maps ids: kept, on its ids
    assert fork(tenant, "src", "dst", at=5) == 5
    assert list(tenant["get"]("dst")) == T[:5] and inner["get"]("dst") is None
    assert set(inner["ids"]()) == {"acme:src", "acme:dst"}
    capped = capped_store(3, inner)
    capped["save"]("c", T)
    fork(capped, "c", "c2")
    assert len(inner["get"]("c2")) == len(capped["get"]("c"))
    key = Fernet.generate_key()
    secret = encrypted(key, sqlite_store(tmp_path / "e.db"))
    secret["save"]("c", T)
    fork(secret, "c", "c2", at=5)
    assert list(secret["get"]("c2")) == T[:5]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_shows_turns_forks_and_rewinds(tmp_path, capsys):
    spec = f"sqlite:{tmp_path / 'cli.db'}"
    sqlite_store(tmp_path / "cli.db")["save"]("work", T)
    code, out, _ = run_cli(capsys, "show", "work", "--store", spec)
    assert code == 0 and out.splitlines()[:3] == ["system: s", "-- turn 1 --", "user: weather?"]
    assert "-- turn 2 (--at 5 keeps the turns before it) --" in out.splitlines()
    assert run_cli(capsys, "fork", "work", "alt", "--at", "5", "--store", spec)[:2] == (
        0, "forked work -> alt (5 messages)\n")  # fmt: skip
    code, _, err = run_cli(capsys, "fork", "work", "bad", "--at", "3", "--store", spec)
    assert code == 1 and "at=3 is not a turn boundary" in err and len(err.splitlines()) == 1
    code, _, err = run_cli(capsys, "fork", "nobody", "x", "--store", spec)
    assert code == 1 and "no conversation 'nobody'" in err
    assert run_cli(capsys, "rewind", "work", "--store", spec)[:2] == (
        0, "rewound work by 1 turn(s): 5 messages kept\n")  # fmt: skip
    assert list(sqlite_store(tmp_path / "cli.db")["get"]("alt")) == T[:5]


def test_a_fork_into_an_id_whose_exchange_is_in_flight_waits_for_it(make_store):
    """The fork takes dst's lock: it lands after the exchange's save, never under it."""
    import threading

    from toolnexus import ask, create_in_process_client
    from toolnexus.core.frozen import thaw

    store = make_store()
    store["save"]("src", T)
    store["save"]("dst", [Q, A])
    inside, go = threading.Event(), threading.Event()

    def generate(request):
        inside.set()
        go.wait(timeout=30)
        return {"content": "late"}

    client = create_in_process_client(model="m", generate=generate, store=store)
    asking = threading.Thread(target=ask, args=(client, "more"), kwargs={"id": "dst"})
    asking.start()
    try:
        assert inside.wait(timeout=30)
        forking = threading.Thread(target=fork, args=(store, "src", "dst"))
        forking.start()
        forking.join(timeout=0.3)
        assert forking.is_alive(), "the fork went on while dst's exchange held its lock"
    finally:
        go.set()
        asking.join(timeout=30)
    forking.join(timeout=30)
    assert thaw(make_store()["get"]("dst")) == T  # the fork came last and stands whole
