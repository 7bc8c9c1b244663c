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
from pyrsistent import PVector, freeze

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

    >>> from pyrsistent import freeze
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
    expect = model if model is not None else (lambda t: t)
    pools = id_pools(ids)
    values = transcripts if transcripts is not None else transcript_strategy(max_turns=3)
    fresh_ids = ids if ids is not None else conversation_ids()

    class StoreContract(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = make_store()
            self.saved: dict[str, PVector] = {}
            self.touched: set[str] = set()
            # Without "delete" the kit cannot clean up between examples, so it salts ids.
            self.salt = "" if callable(self.store.get("delete")) else "#" + uuid.uuid4().hex[:8]
            self.pool: list[str] = []

        @property
        def desc(self) -> str:
            return self.store.get("desc") or "store"

        @initialize(pool=pools)
        def choose_ids(self, pool: list[str]) -> None:
            self.pool = [i + self.salt for i in pool]
            assert isinstance(self.store.get("desc", ""), str), "a store's 'desc' is a string"

        def _id(self, i: int) -> str:
            id = self.pool[i % len(self.pool)]
            self.touched.add(id)
            note(f"id = {id!r}")
            return id

        def _expected(self, id: str):
            return expect(self.saved[id]) if id in self.saved else None

        def _check_get(self, id: str) -> Any:
            got = self.store["get"](id)
            want = self._expected(id)
            if want is None:
                assert got is None, f"{self.desc}: get({id!r}) should be None, got {_show(got)}"
            else:
                assert got is not None, f"{self.desc}: get({id!r}) lost the saved transcript"
                assert _plain(got) == _plain(want), (
                    f"{self.desc}: get({id!r}) returned another transcript: "
                    + _difference(got, want)
                )
            return got

        @rule(i=st.integers(0, 7), transcript=values, frozen=st.booleans())
        def save(self, i: int, transcript: list, frozen: bool) -> None:
            id = self._id(i)
            before = _plain(transcript)  # a private copy: the drawn value stays printable
            given = freeze(before, strict=False) if frozen else _plain(before)
            self.store["save"](id, given)
            assert _plain(given) == before, (
                f"{self.desc}: save({id!r}) modified its input: " + _difference(given, before)
            )
            self.saved[id] = freeze(before, strict=False)
            _vandalize(given)  # what the caller does with its list later is not the store's
            self._check_get_twice(id)
            self._check_others(id)

        def _check_others(self, id: str) -> None:
            # Distinct ids are isolated: a write to one never shows through another
            # (catches ids that sanitize or encode to the same key whenever a pool has both).
            for other in self.pool:
                if other != id:
                    self._check_get(other)

        def _check_get_twice(self, id: str) -> None:
            got = self._check_get(id)
            _vandalize(got)  # nor what it does with the list it was given
            self._check_get(id)

        @rule(i=st.integers(0, 7))
        def get(self, i: int) -> None:
            self._check_get_twice(self._id(i))

        @rule(id=fresh_ids)
        def get_unknown(self, id: str) -> None:
            id = id + self.salt
            if id not in self.saved:
                got = self.store["get"](id)
                assert got is None, (
                    f"{self.desc}: get({id!r}) of a never-saved id returned {_show(got)}"
                )

        @precondition(lambda self: callable(self.store.get("delete")))
        @rule(i=st.integers(0, 7))
        def delete(self, i: int) -> None:
            id = self._id(i)
            self.store["delete"](id)
            self.saved.pop(id, None)
            self._check_get(id)
            self._check_others(id)

        @rule(i=st.integers(0, 7), j=st.integers(1, 7), pick=st.integers(0, 63))
        def fork(self, i: int, j: int, pick: int) -> None:
            # Fork rules: a fork copies src (or a prefix at a turn boundary) to dst, never
            # changes src, refuses a cut inside a turn, and is KeyError for an absent src.
            from ..store.forks import fork, turn_boundaries

            stored = [n for n, id in enumerate(self.pool) if self._expected(id) is not None]
            if stored and i % 4:  # mostly a conversation that exists
                i = stored[i % len(stored)]
            src = self._id(i)
            dst = self._id(i + j)  # another id of the pool (the same one in a pool of one)
            if src == dst:
                return
            want = self._expected(src)
            if want is None:
                try:
                    fork(self.store, src, dst)
                except KeyError:
                    self._check_get(dst)
                    return
                raise AssertionError(f"{self.desc}: fork of absent {src!r} did not raise KeyError")
            # Half the draws cut at a boundary (or copy whole), half anywhere else.
            good = [None, *turn_boundaries(want)]
            bad = [n for n in range(1, len(want) + 2) if n not in good]
            cut = (good + bad)[pick % len(good + bad)] if pick % 2 or not good else good[
                (pick // 2) % len(good)]  # fmt: skip
            if cut in bad:
                try:
                    fork(self.store, src, dst, at=cut)
                except ValueError:
                    self._check_get(dst)  # unchanged
                    self._check_get(src)
                    return
                raise AssertionError(f"{self.desc}: fork at={cut} inside a turn did not raise")
            n = len(want) if cut is None else cut
            copied = fork(self.store, src, dst, at=cut)
            assert copied in (n, None), f"{self.desc}: fork copied {copied}, expected {n}"
            self.saved[dst] = freeze(_plain(want)[:n], strict=False)
            self._check_get_twice(dst)
            self._check_get(src)
            self._check_others(dst)

        @rule(i=st.integers(0, 7), turns=st.integers(1, 2))
        def rewind(self, i: int, turns: int) -> None:
            from ..core.transcript import safe_cuts
            from ..store.forks import rewind

            id = self._id(i)
            want = self._expected(id)
            if want is None or turns > len(safe_cuts(want)):
                try:
                    rewind(self.store, id, turns)
                except (KeyError, ValueError):
                    self._check_get(id)
                    return
                raise AssertionError(f"{self.desc}: rewind({id!r}, {turns}) did not raise")
            kept = rewind(self.store, id, turns)
            cut = _plain(want)[: safe_cuts(want)[-turns]]
            assert _plain(kept) == cut, (
                f"{self.desc}: rewind({id!r}, {turns}) returned another transcript: "
                + _difference(kept, cut)
            )
            self.saved[id] = freeze(_plain(kept), strict=False)
            self._check_get(id)
            self._check_others(id)

        @rule()
        def restart(self) -> None:
            self.store = make_store()
            for id in self.pool:
                self._check_get(id)

        @precondition(lambda self: callable(self.store.get("ids")))
        @rule()
        def list_ids(self) -> None:
            listed = list(self.store["ids"]())
            assert all(isinstance(i, str) for i in listed), f"{self.desc}: ids() are strings"
            assert len(listed) == len(set(listed)), f"{self.desc}: ids() repeats an id"
            want = {i for i in self.saved if self._expected(i) is not None}
            # Salted runs share the backing with earlier examples: look at ours only.
            seen = set(listed) & set(self.pool) if self.salt else set(listed)
            assert seen == want, (
                f"{self.desc}: ids() listed {sorted(seen)!r}, saved {sorted(want)!r}"
            )

        def teardown(self) -> None:
            delete = self.store.get("delete")
            if callable(delete):
                for id in self.touched:
                    delete(id)

    StoreContract.__name__ = StoreContract.__qualname__ = "StoreContract"
    return StoreContract


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
