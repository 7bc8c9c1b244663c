"""The store contract kit, run against every shipped store and decorator, and shown to fail."""

from __future__ import annotations

import copy
import itertools
import re

import pytest
import toolz
from cryptography.fernet import Fernet
from hypothesis import Phase

from toolnexus.core import transcript as tx
from toolnexus.core.frozen import freeze
from toolnexus.store import (
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
from toolnexus.store.fused import derive
from toolnexus.testing import check_store_contract, conversation_ids, store_contract_machine

# The decorators are thin: fewer examples each keeps the suite fast.
FEW = {"max_examples": 12}


def test_in_memory_store():
    backing: dict = {}
    check_store_contract(lambda: in_memory_store(backing))


def test_file_store(tmp_path):
    """Every id, long ones too (the old code refused ids over 180 UTF-8 bytes)."""
    check_store_contract(lambda: file_store(tmp_path))


def test_file_store_with_long_ids_only(tmp_path):
    long_ids = conversation_ids().map(lambda i: i * (400 // len(i) + 1))
    check_store_contract(lambda: file_store(tmp_path), ids=long_ids, **FEW)


def test_sanitized_file_store(tmp_path):
    check_store_contract(lambda: sanitized_file_store(tmp_path))


def test_a_store_without_delete_or_ids():
    backing: dict = {}

    def make():
        s = in_memory_store(backing)
        return {"get": s["get"], "save": s["save"]}

    check_store_contract(make)


def test_capped_store_against_its_own_model(tmp_path):
    check_store_contract(
        lambda: capped_store(3, sanitized_file_store(tmp_path)),
        model=lambda t: tx.trim(t, 3),
        **FEW,
    )


def test_sanitize_ids_over_memory():
    backing: dict = {}
    check_store_contract(lambda: sanitize_ids(in_memory_store(backing)), **FEW)


def test_namespaced_beside_another_tenant():
    backing: dict = {}
    other = namespaced("other", in_memory_store(backing))
    other["save"]("a/b", [{"role": "user", "content": "not yours"}])
    check_store_contract(lambda: namespaced("acme", in_memory_store(backing)), **FEW)
    assert other["get"]("a/b")[0]["content"] == "not yours"


def test_observed():
    backing: dict = {}
    seen = []
    check_store_contract(
        lambda: observed(
            in_memory_store(backing),
            on_get=lambda id, t: seen.append(id),
            on_save=lambda id, t: seen.append(id),
        ),
        **FEW,
    )
    assert seen


def test_read_through_with_a_cold_cache_per_restart(tmp_path):
    check_store_contract(
        lambda: read_through(in_memory_store(), sanitized_file_store(tmp_path)), **FEW
    )


def test_read_through_with_a_persistent_cache(tmp_path):
    cache: dict = {}
    check_store_contract(
        lambda: read_through(in_memory_store(cache), sanitized_file_store(tmp_path)), **FEW
    )


# read_through returns what the store behind it returns: a persistent cache (warm across
# restarts) over the compositions we ship, each checked against its own model.


def test_read_through_over_a_capped_store(tmp_path):
    """Fails on the old code: the warm cache held the untrimmed transcript."""
    cache: dict = {}
    check_store_contract(
        lambda: read_through(in_memory_store(cache), capped_store(2, sqlite_store(tmp_path / "c"))),
        model=lambda t: tx.trim(t, 2),
        **FEW,
    )


def test_read_through_over_a_full_composition(tmp_path):
    key, cache = Fernet.generate_key(), {}
    check_store_contract(
        lambda: read_through(
            in_memory_store(cache),
            toolz.pipe(
                sanitized_file_store(tmp_path), encrypted(key), namespaced("acme"), capped_store(3)
            ),
        ),
        model=lambda t: tx.trim(t, 3),
        **FEW,
    )


def test_read_through_over_retention_and_a_transform_it_must_read_back(tmp_path):
    def titled(store):  # a user's decorator that declares nothing: read back after save
        def save(id, t):
            store["save"](id, [*t, {"role": "user", "content": "(saved)"}])

        return derive(store, save=save)

    cache: dict = {}
    check_store_contract(
        lambda: read_through(
            in_memory_store(cache), titled(retention(3600, sanitized_file_store(tmp_path)))
        ),
        model=lambda t: t.append(freeze({"role": "user", "content": "(saved)"})),
        **FEW,
    )


def test_retention_within_max_age_is_transparent(tmp_path):
    check_store_contract(lambda: retention(3600, sanitized_file_store(tmp_path)), **FEW)


def test_retention_past_max_age_reads_absent():
    ticks = itertools.count(1000)  # every reading of the clock is one second later
    backing: dict = {}
    check_store_contract(
        lambda: retention(0, in_memory_store(backing), now=lambda: next(ticks)),
        model=lambda t: None,
        **FEW,
    )


def test_encrypted(tmp_path):
    key = Fernet.generate_key()
    check_store_contract(lambda: encrypted(key, sanitized_file_store(tmp_path)), **FEW)


def test_a_full_composition(tmp_path):
    key = Fernet.generate_key()
    check_store_contract(
        lambda: toolz.pipe(
            sanitized_file_store(tmp_path),
            encrypted(key),
            namespaced("acme"),
            retention(3600),
            capped_store(4),
        ),
        model=lambda t: tx.trim(t, 4),
        **FEW,
    )


def test_the_machine_runs_as_a_test_case():
    backing: dict = {}
    case = store_contract_machine(lambda: in_memory_store(backing)).TestCase
    case.settings = case.settings.__class__(case.settings, max_examples=5, deadline=None)
    case("runTest").runTest()


# ---- the kit fails broken stores ------------------------------------------------------

FIND_FAST = {"database": None, "phases": [Phase.generate], "max_examples": 100, "derandomize": True}


def _dict_store(backing: dict, key=lambda id: id, keep=lambda t: t, give=lambda t: t) -> dict:
    return {
        "get": lambda id: give(backing[key(id)]) if key(id) in backing else None,
        "save": lambda id, t: backing.__setitem__(key(id), keep(t)),
        "delete": lambda id: backing.pop(key(id), None),
        "ids": lambda: tuple(backing),
        "desc": "broken()",
    }


def _fails(make, match: str, **kw) -> None:
    with pytest.raises(AssertionError, match=match):
        check_store_contract(make, **{**FIND_FAST, **kw})


def test_the_kit_catches_a_store_that_keeps_the_callers_list():
    backing: dict = {}
    _fails(lambda: _dict_store(backing), r"broken\(\): get\(")


def test_the_kit_catches_a_store_that_hands_out_its_own_list():
    backing: dict = {}
    _fails(lambda: _dict_store(backing, keep=copy.deepcopy), r"broken\(\): get\(")


def test_the_kit_catches_colliding_ids():
    backing: dict = {}
    naive = lambda id: re.sub(r"[^A-Za-z0-9]", "_", id)  # noqa: E731 - the bug under test
    _fails(lambda: _dict_store(backing, key=naive, keep=tx.freeze_transcript), "broken")


def test_the_kit_catches_a_store_that_forgets_on_restart():
    _fails(lambda: in_memory_store(), r"in_memory\(\): get\(.*lost")


def test_the_kit_catches_a_store_that_modifies_its_input():
    backing: dict = {}

    def keep(t):
        if isinstance(t, list):
            t.reverse()
        return tx.freeze_transcript(t)

    _fails(lambda: _dict_store(backing, keep=keep), "modified its input")


def test_the_kit_catches_a_capped_store_checked_without_its_model():
    backing: dict = {}
    _fails(lambda: capped_store(1, in_memory_store(backing)), "capped")


def test_several_broken_rules_are_one_assertion_error_with_each_example():
    """Fails on the old code: hypothesis's ExceptionGroup went through as is."""

    def make():
        backing: dict = {}

        def get(id):
            if not id.isascii():
                raise KeyError("unicode ids are not kept")
            return backing.get(id)

        return {
            "get": get,
            "save": backing.__setitem__,  # keeps the caller's list: vandalized later
            "delete": lambda id: backing.pop(id, None),
            "desc": "broken()",
        }

    with pytest.raises(AssertionError) as e:
        check_store_contract(make, **{**FIND_FAST, "phases": [Phase.generate, Phase.shrink]})
    text = str(e.value)
    assert re.search(r"\[\+\d+ more failures?, all below\]", text.splitlines()[0])
    assert "KeyError: 'unicode ids are not kept'" in text
    assert re.search(r"\n\d\. broken\(\): get\(", text)  # the list it kept, vandalized
    assert text.count("state = StoreContract()") >= 2  # each failure's minimal example


def test_a_store_that_raises_is_an_assertion_error_with_the_example():
    def make():
        return {"get": lambda id: None, "save": lambda id, t: 1 / 0, "desc": "broken()"}

    with pytest.raises(AssertionError, match=r"ZeroDivisionError") as e:
        check_store_contract(make, **FIND_FAST)
    assert "state.save(" in str(e.value) and isinstance(e.value.__cause__, ZeroDivisionError)
