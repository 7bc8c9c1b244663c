"""The curried store decorators describe themselves as their plain functions do (help, inspect)."""

from __future__ import annotations

import inspect
import pydoc

import pytest
import toolz

from toolnexus.store import (
    capped_store,
    encrypted,
    in_memory_store,
    namespaced,
    observed,
    read_through,
    retention,
)

CURRIED = [capped_store, encrypted, namespaced, observed, read_through, retention]


@pytest.mark.parametrize("deco", CURRIED, ids=lambda d: d.__name__)
def test_a_curried_decorator_shows_the_plain_functions_signature(deco):
    """Fails on the old code: toolz showed each missing argument as = '__no__default__'."""
    assert inspect.signature(deco) == inspect.signature(deco.func)
    doc = pydoc.render_doc(deco, renderer=pydoc.plaintext)
    assert "__no__default__" not in doc
    assert f"{deco.__name__}{inspect.signature(deco.func)}" in doc


def test_help_of_capped_store_reads_as_written():
    doc = pydoc.render_doc(capped_store, renderer=pydoc.plaintext)
    assert "capped_store(n: 'int', store: 'Mapping', *, keep: 'int | None' = None) -> 'dict'" in doc
    assert "most recent messages" in doc  # its own docstring, not curry's


def test_a_partly_applied_decorator_shows_what_is_left():
    left = "(store: 'Mapping', *, keep: 'int | None' = None) -> 'dict'"
    assert str(inspect.signature(capped_store(40))) == left
    assert str(inspect.signature(namespaced("acme"))) == "(store: 'Mapping') -> 'dict'"
    on_save = observed(on_save=print)  # a keyword given: the store is still to come
    sig = inspect.signature(on_save)
    assert list(sig.parameters) == ["store", "on_get", "on_save", "on_delete"]
    assert sig.parameters["store"].default is inspect.Parameter.empty
    assert sig.parameters["on_save"].default is print


def test_currying_is_unchanged():
    backing: dict = {}
    by_steps = toolz.pipe(in_memory_store(backing), namespaced("t"), capped_store(1))
    at_once = capped_store(1, namespaced("t", in_memory_store(backing)))
    assert by_steps["desc"] == at_once["desc"] == "capped(1, namespaced('t', in_memory()))"
    by_steps["save"]("a", [{"role": "user", "content": c} for c in "xy"])
    assert [m["content"] for m in at_once["get"]("a")] == ["y"]
    with pytest.raises(TypeError):
        capped_store(1, in_memory_store(), "one too many")
