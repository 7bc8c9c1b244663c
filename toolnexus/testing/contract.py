"""The store contract: a hypothesis state machine that runs any store against a dict.

    from toolnexus.testing import check_store_contract
    def test_my_store(tmp_path):
        check_store_contract(lambda: my_store(tmp_path / "chat.db"))

`make_store()` must return a store over the SAME backing on every call: calling it
again is a "restart", and the new store must see everything saved before.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pyrsistent import PVector

from ..core.frozen import freeze
from ..display import plain
from .strategies import conversation_ids, id_pools
from .strategies import transcripts as transcript_strategy

__all__ = [
    "check_store_contract",
    "contract_failure_message",
    "store_contract_machine",
    "DEFAULT_SETTINGS",
]

# Modest by default (stores do real I/O); callers pass more through **settings.
DEFAULT_SETTINGS = {
    "max_examples": 20,
    "stateful_step_count": 15,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow],
}


def _plain(value: Any) -> Any:
    """Return a value as plain lists and dicts, for value-equal comparison."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


# A failure shows values as one line of JSON each, cut here: a transcript's
# pvector(...) repr ran to walls of text, and a cut repr hid where two values differ.
SHOW_LIMIT = 240


def _show(value: Any, limit: int = SHOW_LIMIT) -> str:
    """Return `value` as compact one-line JSON, cut to about `limit` characters.

    >>> from toolnexus.core.frozen import freeze
    >>> _show(freeze([{"role": "user", "content": "hi"}]))
    '[{"role":"user","content":"hi"}]'
    >>> _show("x" * 50, limit=10)
    '"xxxxxxxxx… (+42 chars)'
    """
    text = json.dumps(_role_first(plain(value)), ensure_ascii=False, default=repr,
                      separators=(",", ":"))  # fmt: skip
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit} chars)"


def _messages(n: int) -> str:
    return f"{n} message{'s' * (n != 1)}"


def _role_first(x: Any) -> Any:
    """Return plain data with each dict's keys in a stable order, "role" first.

    A pmap iterates in hash order, so a frozen message would print its role anywhere.
    """
    if isinstance(x, dict):
        keys = sorted(x, key=lambda k: (k != "role", k))
        return {k: _role_first(x[k]) for k in keys}
    if isinstance(x, list):
        return [_role_first(v) for v in x]
    return x


def _difference(got: Any, want: Any) -> str:
    """Return where `got` first differs from `want`, readably: lengths, then that message.

    >>> print(_difference([{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]))
    got 1 message, as expected; first difference at message 0:
      got      {"role":"user","content":"a"}
      expected {"role":"user","content":"b"}
    """
    got, want = _plain(got), _plain(want)
    if not (isinstance(got, list) and isinstance(want, list)):
        return f"\n  got      {_show(got)}\n  expected {_show(want)}"
    n = min(len(got), len(want))
    at = next((i for i in range(n) if got[i] != want[i]), n)
    expected = "as expected" if len(got) == len(want) else f"expected {len(want)}"
    return (
        f"got {_messages(len(got))}, {expected}; first difference at message {at}:\n"
        f"  got      {_show(got[at]) if at < len(got) else '(none)'}\n"
        f"  expected {_show(want[at]) if at < len(want) else '(none)'}"
    )


def _vandalize(value: Any) -> None:
    """Mutate a plain transcript in place, deeply (a no-op on frozen values)."""
    if not isinstance(value, list):
        return
    for m in value:
        if isinstance(m, dict):
            content = m.get("content")
            if isinstance(content, list):
                content.append({"type": "text", "text": "VANDALIZED"})
            m["content"] = content if isinstance(content, list) else "VANDALIZED"
            m["vandalized"] = True
    value.append({"role": "user", "content": "VANDALIZED"})


# ---- the machine's state and its rules: top-level functions over one small record ----


class _Contract(RuleBasedStateMachine):
    """The state the rules share: the store, the dict model of it, the ids in play.

    `make_store` and `expect` are set per machine by `store_contract_machine`.
    """

    make_store: Callable[[], Mapping]
    expect: Callable[[PVector], Any]

    def __init__(self) -> None:
        super().__init__()
        self.store = self.make_store()
        self.saved: dict[str, PVector] = {}
        self.touched: set[str] = set()
        # Without "delete" the kit cannot clean up between examples, so it salts ids.
        self.salt = "" if callable(self.store.get("delete")) else "#" + uuid.uuid4().hex[:8]
        self.pool: list[str] = []

    @property
    def desc(self) -> str:
        return self.store.get("desc") or "store"

    def teardown(self) -> None:
        delete = self.store.get("delete")
        if callable(delete):
            for id in self.touched:
                delete(id)


def _id(m: _Contract, i: int) -> str:
    id = m.pool[i % len(m.pool)]
    m.touched.add(id)
    note(f"id = {id!r}")
    return id


def _expected(m: _Contract, id: str) -> Any:
    return m.expect(m.saved[id]) if id in m.saved else None


def _check_get(m: _Contract, id: str) -> Any:
    got = m.store["get"](id)
    want = _expected(m, id)
    if want is None:
        assert got is None, f"{m.desc}: get({id!r}) should be None, got {_show(got)}"
    else:
        assert got is not None, f"{m.desc}: get({id!r}) lost the saved transcript"
        assert _plain(got) == _plain(want), (
            f"{m.desc}: get({id!r}) returned another transcript: " + _difference(got, want)
        )
    return got


def _check_others(m: _Contract, id: str) -> None:
    # Distinct ids are isolated: a write to one never shows through another
    # (catches ids that sanitize or encode to the same key whenever a pool has both).
    for other in m.pool:
        if other != id:
            _check_get(m, other)


def _check_get_twice(m: _Contract, id: str) -> None:
    got = _check_get(m, id)
    _vandalize(got)  # nor what it does with the list it was given
    _check_get(m, id)


def _choose_ids(m: _Contract, pool: list[str]) -> None:
    m.pool = [i + m.salt for i in pool]
    assert isinstance(m.store.get("desc", ""), str), "a store's 'desc' is a string"


def _save(m: _Contract, i: int, transcript: list, frozen: bool) -> None:
    id = _id(m, i)
    before = _plain(transcript)  # a private copy: the drawn value stays printable
    given = freeze(before) if frozen else _plain(before)
    m.store["save"](id, given)
    assert _plain(given) == before, f"{m.desc}: save({id!r}) modified its input: " + _difference(
        given, before
    )
    m.saved[id] = freeze(before)
    _vandalize(given)  # what the caller does with its list later is not the store's
    _check_get_twice(m, id)
    _check_others(m, id)


def _get(m: _Contract, i: int) -> None:
    _check_get_twice(m, _id(m, i))


def _get_unknown(m: _Contract, id: str) -> None:
    id = id + m.salt
    if id not in m.saved:
        got = m.store["get"](id)
        assert got is None, f"{m.desc}: get({id!r}) of a never-saved id returned {_show(got)}"


def _delete(m: _Contract, i: int) -> None:
    id = _id(m, i)
    m.store["delete"](id)
    m.saved.pop(id, None)
    _check_get(m, id)
    _check_others(m, id)


def _fork_absent(m: _Contract, src: str, dst: str) -> None:
    """A fork of an absent conversation is a KeyError and writes nothing."""
    from ..store.forks import fork

    try:
        fork(m.store, src, dst)
    except KeyError:
        _check_get(m, dst)
        return
    raise AssertionError(f"{m.desc}: fork of absent {src!r} did not raise KeyError")


def _fork_inside_a_turn(m: _Contract, src: str, dst: str, cut: int) -> None:
    """A fork cut inside a turn is a ValueError and changes neither id."""
    from ..store.forks import fork

    try:
        fork(m.store, src, dst, at=cut)
    except ValueError:
        _check_get(m, dst)  # unchanged
        _check_get(m, src)
        return
    raise AssertionError(f"{m.desc}: fork at={cut} inside a turn did not raise")


def _fork_cut(want: Any, pick: int) -> tuple[int | None, bool]:
    """Return where a fork cuts and whether that is inside a turn: half the draws cut at
    a boundary (or copy whole), half anywhere else."""
    from ..store.forks import turn_boundaries

    good = [None, *turn_boundaries(want)]
    bad = [n for n in range(1, len(want) + 2) if n not in good]
    cut = (good + bad)[pick % len(good + bad)] if pick % 2 or not good else good[
        (pick // 2) % len(good)]  # fmt: skip
    return cut, cut in bad


def _fork(m: _Contract, i: int, j: int, pick: int) -> None:
    # Fork rules: a fork copies src (or a prefix at a turn boundary) to dst, never
    # changes src, refuses a cut inside a turn, and is KeyError for an absent src.
    from ..store.forks import fork

    stored = [n for n, id in enumerate(m.pool) if _expected(m, id) is not None]
    if stored and i % 4:  # mostly a conversation that exists
        i = stored[i % len(stored)]
    src = _id(m, i)
    dst = _id(m, i + j)  # another id of the pool (the same one in a pool of one)
    if src == dst:
        return
    want = _expected(m, src)
    if want is None:
        return _fork_absent(m, src, dst)
    cut, inside = _fork_cut(want, pick)
    if inside:
        return _fork_inside_a_turn(m, src, dst, cut)  # type: ignore[arg-type]
    n = len(want) if cut is None else cut
    copied = fork(m.store, src, dst, at=cut)
    assert copied in (n, None), f"{m.desc}: fork copied {copied}, expected {n}"
    m.saved[dst] = freeze(_plain(want)[:n])
    _check_get_twice(m, dst)
    _check_get(m, src)
    _check_others(m, dst)


def _rewind(m: _Contract, i: int, turns: int) -> None:
    from ..core.transcript import safe_cuts
    from ..store.forks import rewind

    id = _id(m, i)
    want = _expected(m, id)
    if want is None or turns > len(safe_cuts(want)):
        try:
            rewind(m.store, id, turns)
        except (KeyError, ValueError):
            _check_get(m, id)
            return
        raise AssertionError(f"{m.desc}: rewind({id!r}, {turns}) did not raise")
    kept = rewind(m.store, id, turns)
    cut = _plain(want)[: safe_cuts(want)[-turns]]
    assert _plain(kept) == cut, (
        f"{m.desc}: rewind({id!r}, {turns}) returned another transcript: " + _difference(kept, cut)
    )
    m.saved[id] = freeze(_plain(kept))
    _check_get(m, id)
    _check_others(m, id)


def _restart(m: _Contract) -> None:
    m.store = m.make_store()
    for id in m.pool:
        _check_get(m, id)


def _list_ids(m: _Contract) -> None:
    listed = list(m.store["ids"]())
    assert all(isinstance(i, str) for i in listed), f"{m.desc}: ids() are strings"
    assert len(listed) == len(set(listed)), f"{m.desc}: ids() repeats an id"
    want = {i for i in m.saved if _expected(m, i) is not None}
    # Salted runs share the backing with earlier examples: look at ours only.
    seen = set(listed) & set(m.pool) if m.salt else set(listed)
    assert seen == want, f"{m.desc}: ids() listed {sorted(seen)!r}, saved {sorted(want)!r}"


def _as(name: str, fn: Callable[..., None]) -> Callable[..., None]:
    """Return `fn` as a method called `name` (hypothesis prints steps by that name)."""

    def method(self: _Contract, **drawn: Any) -> None:
        fn(self, **drawn)

    method.__name__ = method.__qualname__ = name
    return method


def _has(key: str) -> Callable[[_Contract], bool]:
    return lambda m: callable(m.store.get(key))


def store_contract_machine(
    make_store: Callable[[], Mapping],
    *,
    model: Callable[[PVector], Any] | None = None,
    ids: st.SearchStrategy[str] | None = None,
    transcripts: st.SearchStrategy | None = None,
) -> type[RuleBasedStateMachine]:
    """Return a RuleBasedStateMachine class checking `make_store()` against a dict.

    `model(saved)` maps the last saved transcript (frozen) to what `get` must return
    (default: the transcript itself; None means "reads as absent"); `ids` and
    `transcripts` are hypothesis strategies replacing the defaults. Use `.TestCase`
    of the result to run it under unittest or pytest.
    """
    values = transcripts if transcripts is not None else transcript_strategy(max_turns=3)
    index = st.integers(0, 7)
    members = {
        "make_store": staticmethod(make_store),
        "expect": staticmethod(model if model is not None else (lambda t: t)),
        "choose_ids": initialize(pool=id_pools(ids))(_as("choose_ids", _choose_ids)),
        "save": rule(i=index, transcript=values, frozen=st.booleans())(_as("save", _save)),
        "get": rule(i=index)(_as("get", _get)),
        "get_unknown": rule(id=ids if ids is not None else conversation_ids())(
            _as("get_unknown", _get_unknown)
        ),
        "delete": precondition(_has("delete"))(rule(i=index)(_as("delete", _delete))),
        "fork": rule(i=index, j=st.integers(1, 7), pick=st.integers(0, 63))(_as("fork", _fork)),
        "rewind": rule(i=index, turns=st.integers(1, 2))(_as("rewind", _rewind)),
        "restart": rule()(_as("restart", _restart)),
        "list_ids": precondition(_has("ids"))(rule()(_as("list_ids", _list_ids))),
    }
    return type("StoreContract", (_Contract,), members)


def check_store_contract(
    make_store: Callable[[], Mapping],
    *,
    model: Callable[[PVector], Any] | None = None,
    ids: st.SearchStrategy[str] | None = None,
    transcripts: st.SearchStrategy | None = None,
    **hypothesis_settings: Any,
) -> None:
    """Check that `make_store()` honours the store contract; raise AssertionError if not.

    However many rules the store breaks, and whatever it raises, the failure is one
    AssertionError listing each failure with hypothesis's minimal example.

    Runs random get/save/delete/restart/ids sequences against a dict model and checks:
    an unknown id reads None; get returns exactly the last saved transcript (value-equal),
    and mutating what was passed to save or returned by get later changes nothing stored;
    save never modifies its input; distinct ids (hostile ones too) are isolated; `fork`
    copies a conversation or its prefix at a turn boundary, never changes its source and
    refuses a cut inside a turn, `rewind` drops whole turns (store.forks); a fresh
    `make_store()` on the same backing sees what was saved; `ids()` lists what is stored.
    `model(saved)` maps a saved transcript to what get must return (e.g. a trim, for
    capped stores). The backing must start empty; the kit deletes what it saved after each
    example (a store without "delete" gets ids salted per example instead). Extra keyword
    arguments are hypothesis settings (max_examples, stateful_step_count, ...).
    """
    machine = store_contract_machine(make_store, model=model, ids=ids, transcripts=transcripts)
    try:
        run_state_machine_as_test(
            machine, settings=settings(**{**DEFAULT_SETTINGS, **hypothesis_settings})
        )
    except Exception as e:
        # Hypothesis raises an ExceptionGroup when it finds several distinct failures, and
        # a store's own exception as is: the kit's answer is always one AssertionError.
        if isinstance(e, HypothesisException) and not isinstance(e, BaseExceptionGroup):
            raise  # the kit's own misuse (bad settings, a health check), not the store's
        raise AssertionError(contract_failure_message(e)) from e


def _leaves(e: BaseException) -> list[BaseException]:
    if isinstance(e, BaseExceptionGroup):
        return [leaf for inner in e.exceptions for leaf in _leaves(inner)]
    return [e]


def _described(e: BaseException) -> str:
    """An AssertionError's own message (the kit's words); any other error with its type."""
    return str(e) if isinstance(e, AssertionError) else f"{type(e).__name__}: {e}"


def contract_failure_message(e: BaseException) -> str:
    """Return one message for what the kit found: each failure with its minimal example.

    The first line is the first failure (so it reads well alone), then each failure
    with hypothesis's notes (the minimal example), indented.

    >>> err = AssertionError("s: get('a') lost the saved transcript")
    >>> err.add_note("Falsifying example: state.save(...)")
    >>> print(contract_failure_message(ExceptionGroup("two", [err, KeyError("x")])))
    s: get('a') lost the saved transcript [+1 more failure, all below]
    1. s: get('a') lost the saved transcript
       Falsifying example: state.save(...)
    2. KeyError: 'x'
    """
    leaves = _leaves(e)
    head = _described(leaves[0]).splitlines() or [type(leaves[0]).__name__]
    if len(leaves) == 1:
        notes = getattr(leaves[0], "__notes__", ())
        return "\n".join([*head, *("   " + ln for n in notes for ln in str(n).splitlines())])
    more = len(leaves) - 1
    lines = [f"{head[0]} [+{more} more failure{'s' * (more > 1)}, all below]"]
    for n, leaf in enumerate(leaves, 1):
        text = _described(leaf).splitlines() or [""]
        lines += [f"{n}. {text[0]}", *("   " + ln for ln in text[1:])]
        for extra in getattr(leaf, "__notes__", ()):
            lines.extend("   " + ln for ln in str(extra).splitlines())
    return "\n".join(lines)
