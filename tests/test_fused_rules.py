"""The rules of store/fused.py no other test asserts: `fuse` keeps the database a call
works in, and a "view" stands for get and save."""

from __future__ import annotations

from toolnexus.store.fused import derive, fuse, stored_view, view


def test_fuse_keeps_where_the_call_works():
    assert fuse(print, "save", where="db-1").where == "db-1"
    assert fuse(print, "save").where is None


def test_a_view_stands_for_get_and_save_and_goes_with_either():
    see = view(list)
    assert see.needs == frozenset({"get", "save"})
    store = derive({"get": 1, "save": 2}, fused={"view": see})
    assert stored_view(store) is list
    assert stored_view(derive(store, get=3)) is None and stored_view(derive(store, save=4)) is None
