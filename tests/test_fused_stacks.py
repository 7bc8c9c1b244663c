"""A fused call never bypasses a decorator that replaced what it needs.

Random stacks of every store decorator the library ships (and a user's, built with
`derive`) over a recording store that declares every fused call, driven by real
exchanges (run, stream, with history=), forks, rewinds and forgets through a client.
Each scenario runs twice, over the store with its fused calls and over the same store
without them (but its "view"): what reaches the store (each get, save, lock and release, by id and
content), what each decorator saw, the message log and every answer must be the same.
And a fused call that the client or `fork` makes reaches the store only where no
decorator of the stack replaced what it needs (a user's decorator is on the call's path).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import partial

from cryptography.fernet import Fernet
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import close, create_in_process_client, forget, run, stream
from toolnexus.core.frozen import freeze
from toolnexus.core.transcript import freeze_transcript
from toolnexus.store import (
    capped_store,
    encrypted,
    fork,
    in_memory_store,
    local_lock,
    namespaced,
    observed,
    read_through,
    retention,
    rewind,
    sanitize_ids,
)
from toolnexus.store.fused import declared, derive, fuse, fused_call, stored_view, view

KEY = Fernet.generate_key()
IDS = ("a", "b", "c")


def _print(t) -> tuple:
    """What a transcript is, for comparing two runs (ciphertext differs run to run)."""
    if t is None:
        return None
    return tuple(
        (m.get("role"), "<cipher>" if m.get("role") == "toolnexus.encrypted" else
         str(m.get("content", m.get("saved_at"))))
        for m in t
    )  # fmt: skip


class World:
    """One run's recordings: what reached the store, what each decorator saw, the log,
    the fused calls the store was asked for (with the decorators on their path)."""

    def __init__(self, fused: bool):
        self.fused = fused
        self.events: list = []  # what reached the store, this action
        self.trace: list = []  # the actions' events, each action's sorted
        self.seen: list = []  # what decorators saw (observed callbacks, probes)
        self.log_rows: list = []
        self.used: list = []  # (fused call, the probes on its path)
        self.active: list = []  # the probes whose replaced op is running now
        self.backing: dict = {}
        self.caches: list[dict] = []  # each read_through's

    def mark(self, refused: bool) -> None:
        """End an action. One `fork` refused (an absent source, a cut inside a turn) may
        or may not have taken the destination's lock first (its fast path locks, then
        looks): its lock events are left out."""
        kept = [e for e in self.events if not refused or e[0] not in ("lock", "release")]
        self.trace.append(sorted(kept, key=repr))
        self.events = []


class _Held:
    def __init__(self, w: World, id: str):
        self.w, self.id = w, id

    def __enter__(self):
        self.w.events.append(("lock", self.id))
        return self

    def __exit__(self, *exc):
        self.w.events.append(("release", self.id))


def recording_store(w: World) -> dict:
    """A store over `w.backing` that records every operation; with `w.fused`, it declares
    every fused call, each recording the operations it stands for. Both declare the
    "view" (what get returns after save: a fact about the store, which read_through uses
    instead of a read; see the test of views below)."""
    b, ev = w.backing, w.events

    def get(id):
        ev.append(("get", id, _print(b.get(id))))
        return b.get(id)

    def save(id, t):
        b[id] = freeze_transcript(t)
        ev.append(("save", id, _print(b[id])))

    def delete(id):
        ev.append(("delete", id))
        b.pop(id, None)

    store = {"get": get, "save": save, "delete": delete, "ids": lambda: tuple(sorted(b)),
             "lock": partial(_Held, w), "desc": "recording",
             "fused": {"view": view(freeze_transcript)}}  # fmt: skip
    if not w.fused:
        return derive(store)  # a store's map is built through derive, which binds its calls

    def used(name):
        w.used.append((name, frozenset(w.active)))

    def lock_load(id):
        used("lock_load")
        held = _Held(w, id).__enter__()
        return held, get(id)

    def save_release(held, id, t):
        used("save_release")
        save(id, t)
        held.__exit__(None, None, None)

    def save_logged(id, t, rows, entries):
        used("save_logged")
        save(id, t)
        rows(entries)("head")  # the log's rows, in "the same statement"
        return True

    def save_logged_release(held, id, t, rows, entries):
        logged = save_logged(id, t, rows, entries)
        held.__exit__(None, None, None)
        return logged, None

    def fast_fork(src, dst, at, check):
        used("fork")
        t = get(src)
        if t is None:
            raise KeyError(src)
        n = len(t) if at is None else at
        if n > len(t):
            raise ValueError(f"at={at} is past the end")
        check(t[n] if n < len(t) else None)
        save(dst, t[:n])
        return n

    return derive(store, fused={
        "fork": fuse(fast_fork, "get", "save"),
        "lock_load": fuse(lock_load, "get", "lock"),
        "save_release": fuse(save_release, "save", "lock"),
        "save_logged": fuse(save_logged, "save", where="db"),
        "save_logged_release": fuse(save_logged_release, "save", "lock", where="db"),
    })  # fmt: skip


def recording_log(w: World) -> dict:
    """A message log recording its rows (as (conversation, text, direction)); with
    `w.fused`, it declares its "rows" in the recording store's database."""

    def record_many(entries):
        w.log_rows.extend((e["conversation_id"], e["text"], e["direction"]) for e in entries)

    log = {"record": lambda e: record_many([e]), "record_many": record_many,
           "query": lambda **kw: (), "clear": lambda **kw: 0, "desc": "recording log"}  # fmt: skip
    if w.fused:
        rows = lambda entries: lambda relation: record_many(entries)  # noqa: E731
        log = derive(log, fused={"rows": fuse(rows, "record", "record_many", where="db")})
    return log


# ---- the decorators ---------------------------------------------------------------------


def probe(w: World, name: str, ops: frozenset, store: dict) -> dict:
    """A user's decorator, built with derive: it replaces `ops` by calls that say they ran."""

    @contextmanager
    def on_path(op, id):
        w.seen.append((name, op, id))
        w.active.append(name)
        try:
            yield
        finally:
            w.active.remove(name)

    def get(id):
        with on_path("get", id):
            return store["get"](id)

    def save(id, t):
        with on_path("save", id):
            store["save"](id, t)

    class Lock:
        def __init__(self, id):
            self.id = id
            with on_path("lock", id):
                self.inner = store["lock"](id)

        def __enter__(self):
            with on_path("lock", self.id):
                self.inner.__enter__()
            return self

        def __exit__(self, *exc):
            self.inner.__exit__(*exc)

    mine = {"get": get, "save": save, "lock": Lock}
    return derive(store, **{op: mine[op] for op in ops})


def decorate(w: World, spec: tuple, store: dict, at: int) -> dict:
    kind, *args = spec
    if kind == "capped":
        n, keep = args
        return capped_store(n, store, keep=max(1, n // 2) if keep else None)
    if kind == "namespaced":
        return namespaced(args[0], store)
    if kind == "sanitize":
        return sanitize_ids(store)
    if kind == "observed":
        return observed(store, on_get=lambda id, t: w.seen.append(("got", id, _print(t))),
                        on_save=lambda id, t: w.seen.append(("saved", id, _print(t))),
                        on_delete=lambda id: w.seen.append(("deleted", id)))  # fmt: skip
    if kind == "read_through":
        w.caches.append({})
        return read_through(in_memory_store(w.caches[-1]), store)
    if kind == "retention":
        return retention(3600, store, now=lambda: 1000.0)
    if kind == "encrypted":
        return encrypted(KEY, store)
    return probe(w, f"probe{at}", args[0], store)


SPECS = st.one_of(
    st.tuples(st.just("capped"), st.integers(1, 6), st.booleans()),
    st.tuples(st.just("namespaced"), st.sampled_from(["t1", "t2"])),
    st.just(("sanitize",)),
    st.just(("observed",)),
    st.just(("read_through",)),
    st.just(("retention",)),
    st.just(("encrypted",)),
    st.tuples(
        st.just("probe"), st.frozensets(st.sampled_from(["get", "save", "lock"]), min_size=1)
    ),  # fmt: skip
)
# One retention per stack: its side records' ids are reserved for it.
STACKS = st.lists(SPECS, max_size=4).filter(
    lambda specs: sum(s == ("retention",) for s in specs) < 2
)
ACTIONS = st.one_of(
    st.tuples(st.just("ask"), st.sampled_from(IDS), st.sampled_from(["run", "stream"])),
    st.tuples(st.just("history"), st.sampled_from(IDS)),
    st.tuples(
        st.just("fork"),
        st.sampled_from(IDS),
        st.sampled_from(IDS + ("d",)),
        st.one_of(st.none(), st.integers(1, 6)),
    ),  # fmt: skip
    st.tuples(st.just("rewind"), st.sampled_from(IDS)),
    st.tuples(st.just("forget"), st.sampled_from(IDS)),
)


def _echo(request):
    return {"content": "re: " + str(request["messages"][-1]["content"])}


def _act(client, stack, action, n: int):
    kind, id, *rest = action
    if kind == "ask" and rest[0] == "run":
        return run(client, f"q{n}", conversation_id=id)["text"]
    if kind == "ask":
        return [e.get("type") for e in stream(client, f"q{n}", conversation_id=id)][-1]
    if kind == "history":
        return run(client, f"h{n}", conversation_id=id,
                   history=[{"role": "user", "content": "given"}])["text"]  # fmt: skip
    if kind == "fork":
        return fork(stack, id, rest[0], at=rest[1])
    if kind == "rewind":
        return len(rewind(stack, id))
    return forget(client, id)["log_entries"]


def play(fused: bool, specs, actions, with_log: bool, own_lock: bool):
    """Run the scenario over the recording store (with or without its fused calls)."""
    w = World(fused)
    stack = recording_store(w)
    for at, spec in enumerate(specs):
        stack = decorate(w, spec, stack, at)
    log = recording_log(w) if with_log else None
    client = create_in_process_client(
        model="m", generate=_echo, store=stack, message_log=log, lookup_tool=False,
        lock=local_lock() if own_lock else None,
    )  # fmt: skip
    answers = []
    try:
        for n, action in enumerate(actions):
            try:
                answers.append(_act(client, stack, action, n))
                w.mark(False)
            except (KeyError, ValueError) as e:  # an absent src, a cut inside a turn
                answers.append(type(e).__name__)
                w.mark(True)
        reads = {id: _print(stack["get"](id)) for id in (*IDS, "d")}
    finally:
        close(client)
    return w, stack, answers, reads


@given(
    STACKS,
    st.lists(ACTIONS, min_size=1, max_size=6),
    st.booleans(),
    st.booleans(),
)
def test_a_fused_call_never_bypasses_a_decorator(specs, actions, with_log, own_lock):
    fast, fast_stack, fast_answers, fast_reads = play(True, specs, actions, with_log, own_lock)
    slow, _, slow_answers, slow_reads = play(False, specs, actions, with_log, own_lock)
    assert fast_answers == slow_answers
    assert fast.trace == slow.trace  # each get, save, lock and release, by id and content
    assert fast.seen == slow.seen  # what every decorator (and callback) saw
    assert fast.log_rows == slow.log_rows
    assert fast_reads == slow_reads
    assert {k: _print(v) for k, v in fast.backing.items()} == {
        k: _print(v) for k, v in slow.backing.items()
    }
    assert [{k: _print(v) for k, v in c.items()} for c in fast.caches] == [
        {k: _print(v) for k, v in c.items()} for c in slow.caches
    ]
    # A fused call the client or fork made reached the store with every user decorator
    # that replaced what it needs on its path (none such may exist, since derive drops it).
    needs = {name: f.needs for name, f in recording_store(World(True))["fused"].items()}
    probes = {f"probe{at}": s[1] for at, s in enumerate(specs) if s[0] == "probe"}
    replacing = {name: {p for p, ops in probes.items() if ops & needs[name]} for name in needs}
    for name, path in fast.used:
        assert replacing[name] <= path, (name, specs)
    assert all(fused_call(fast_stack, n) is None for n in needs if replacing[n])


@given(STACKS, st.integers(1, 8))
def test_a_declared_view_is_what_get_returns_after_save(specs, n):
    """A "view" that survives a stack is exactly what the stack's get gives after its save."""
    w = World(True)
    stack = recording_store(w)
    for at, spec in enumerate(specs):
        stack = decorate(w, spec, stack, at)
    t = freeze([{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
                for i in range(n)])  # fmt: skip
    see = stored_view(stack)
    stack["save"]("x", t)
    if see is not None:
        assert stack["get"]("x") == see(t)
    if any(s[0] == "retention" for s in specs) or any(
        s[0] == "probe" and s[1] & {"get", "save"} for s in specs
    ):
        assert see is None  # what get returns is not known from the transcript alone


def test_fused_calls_are_used_where_nothing_replaced_what_they_need():
    """The property is not empty: an undecorated store's exchange takes and loads, and
    saves, logs and releases in one call each; capped_store keeps only the take."""
    for specs, expected in (((), {"lock_load", "save_logged"}), ((("capped", 4, False),),
                                                                  {"lock_load"})):  # fmt: skip
        w, _, _, _ = play(True, specs, [("ask", "a", "run"), ("ask", "a", "run")], True, False)
        assert {name for name, _ in w.used} == expected, specs
    w, _, _, _ = play(True, (), [("ask", "a", "run"), ("ask", "a", "stream")], False, False)
    assert {name for name, _ in w.used} == {"lock_load", "save_release"}
    w, _, _, _ = play(True, (), [("ask", "a", "run")], True, True)  # lock=: none of them
    assert {name for name, _ in w.used} == {"save_logged"}


def test_a_hand_made_map_loses_what_it_replaced():
    """`derive` drops what a replacement invalidates; a map copied by hand with an
    operation replaced loses the fused calls bound to the old one, and keeps the rest."""
    w = World(True)
    base = recording_store(w)
    by_hand = {**base, "save": lambda id, t: None}
    assert declared(base, "save_release") is not None
    assert declared(by_hand, "save_release") is None
    assert declared(by_hand, "lock_load") is not None  # it still holds get and lock
    assert declared(derive(base, save=lambda id, t: None), "save_release") is None


def test_a_hand_made_decorator_is_never_bypassed():
    """A decorator written as a hand-made copy of a store's map (no derive) still sees
    every save of a real exchange: the store's fused save-and-release is not used."""
    w = World(True)
    base = recording_store(w)
    seen = []

    def save(id, t):
        seen.append(len(t))
        base["save"](id, t)

    c = create_in_process_client(model="m", generate=_echo, store={**base, "save": save})
    try:
        run(c, "a", id="x")
    finally:
        close(c)
    assert seen and "save_release" not in {name for name, _ in w.used}


ID_MAPPERS = ([("namespaced", "t1")], [("sanitize",)], [("sanitize",), ("namespaced", "t2")])


def test_a_decorator_that_only_maps_ids_keeps_the_fused_calls():
    """namespaced and sanitize_ids declare the store's fused calls again under their own
    ids: an exchange through them takes and loads, saves and releases (or saves and logs)
    in one call each, and reaches the store exactly as the separate calls do."""
    actions = [("ask", "a", "run"), ("ask", "a", "stream"), ("fork", "a", "d", 4),
               ("ask", "d", "run"), ("forget", "a")]  # fmt: skip
    for specs in ID_MAPPERS:
        for with_log in (False, True):
            fast, _, fast_answers, fast_reads = play(True, specs, actions, with_log, False)
            slow, _, slow_answers, slow_reads = play(False, specs, actions, with_log, False)
            assert (fast_answers, fast_reads) == (slow_answers, slow_reads), specs
            assert fast.trace == slow.trace and fast.log_rows == slow.log_rows, specs
            used = {name for name, _ in fast.used}
            saved = "save_logged" if with_log else "save_release"  # (its release records so)
            assert used == {"lock_load", saved, "fork"}, (specs, with_log)


def test_sanitize_ids_writes_a_hashed_ids_name_before_a_fused_save():
    """An id too long to encode keeps its name record (so `ids()` lists it) when the save
    is a fused one, and a fork to such an id too: the same records as separate calls."""
    long_id, other = "Long id " * 20, "Other " * 30
    backings = []
    for fused in (True, False):
        w = World(fused)
        stack = sanitize_ids(recording_store(w))
        c = create_in_process_client(model="m", generate=_echo, store=stack)
        try:
            run(c, "q", conversation_id=long_id)
            fork(stack, long_id, other, at=2)
        finally:
            close(c)
        assert sorted(stack["ids"]()) == sorted([long_id, other])
        assert ("fork" in {n for n, _ in w.used}) is fused
        backings.append({k: _print(v) for k, v in w.backing.items()})
    assert backings[0] == backings[1]
