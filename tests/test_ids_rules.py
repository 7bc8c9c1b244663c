"""The rules of store/_ids.py: what a conversation id is, and a text store's refusal of a
lone surrogate (the message, the id cut to 80 characters, where the surrogate is)."""

from __future__ import annotations

import pytest

from toolnexus.store._ids import check_id, check_text_id


@pytest.mark.parametrize("id", ["a", "é", " ", "\ud83d", "x" * 10_000])
def test_a_non_empty_string_is_an_id(id):
    assert check_id(id) is id


@pytest.mark.parametrize("id", ["", None, 5, b"a", ["a"]])
def test_anything_else_is_refused(id):
    with pytest.raises(ValueError) as e:
        check_id(id)
    assert str(e.value) == f"a conversation id must be a non-empty string, got {id!r}"


@pytest.mark.parametrize("id", ["a", "é😀", "ü" * 300])
def test_a_text_store_takes_any_valid_unicode(id):
    assert check_text_id(id, "SQLiteStore") is id


def test_a_text_store_refuses_a_bad_id_as_check_id_does():
    with pytest.raises(ValueError, match="^a conversation id must be a non-empty string"):
        check_text_id("", "SQLiteStore")


def test_a_lone_surrogate_is_refused_naming_the_store_and_where_it_is():
    with pytest.raises(ValueError) as e:
        check_text_id("ab\udc00c", "RedisStore")
    assert str(e.value) == (
        "RedisStore: conversation id 'ab\\udc00c' holds a lone surrogate ('\\udc00' at 2),"
        " which this store's UTF-8 text cannot hold: pass valid Unicode, or wrap the store"
        " in sanitize_ids to keep any string as an id"
    )
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_a_long_id_is_cut_to_80_characters_in_the_message():
    id = "é" * 100 + "\ud800"
    with pytest.raises(ValueError) as e:
        check_text_id(id, "S")
    assert f"conversation id {repr(id)[:80]} holds" in str(e.value)
    assert "('\\ud800' at 100)" in str(e.value)
