"""The rules of store/check.py no other test asserts: every missing operation named, each
SQLite suffix, an object with only one of get/save, a curry without a name, the default
`who`."""

from __future__ import annotations

import pytest
from toolz import curry

from toolnexus.store.check import check_store, store_problem


def test_a_mapping_missing_both_operations_names_both():
    assert store_problem({}) == "got a mapping whose 'get' and 'save' is missing or not callable"
    assert store_problem({"get": print, "save": 1}) == (
        "got a mapping whose 'save' is missing or not callable"
    )


@pytest.mark.parametrize("path", ["chat.db", "chat.sqlite", "chat.sqlite3"])
def test_every_sqlite_suffix_suggests_sqlite_store(path):
    assert (
        store_problem(path)
        == f"got the path {path!r}: wrap it in a store, e.g. sqlite_store({path!r})"
    )


def test_another_path_suggests_file_store():
    assert (
        store_problem("chats/")
        == "got the path 'chats/': wrap it in a store, e.g. file_store('chats/')"
    )


class OnlyGet:
    def get(self, id):
        return None


class OnlySave:
    def save(self, id, t):
        return None


@pytest.mark.parametrize("obj", [OnlyGet(), OnlySave()])
def test_an_object_with_only_one_of_get_and_save_is_not_taken_for_a_store(obj):
    assert store_problem(obj) == f"got {type(obj).__name__}"


def test_a_curry_without_a_name_reads_as_a_decorator():
    waiting = curry(lambda n, store: store)
    del waiting.__name__  # toolz sets it on the instance; a curry may lack it
    assert store_problem(waiting).startswith("got decorator(...) still waiting for its store")


def test_the_error_names_the_store_argument_by_default():
    with pytest.raises(TypeError, match=r"^store: got int; a store is a mapping"):
        check_store(42)
