"""The file store over a real directory: atomic writes, safe names, corrupt files."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.store import StoreCorruptError, file_store
from toolnexus.store.file import file_name_for, id_for_file_name

T = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def test_round_trip_and_unknown_id(tmp_path):
    s = file_store(tmp_path)
    assert s["get"]("nobody") is None
    s["save"]("u", T)
    assert s["get"]("u") == T
    assert file_store(tmp_path)["get"]("u") == T  # a restart sees it


def test_hostile_ids_stay_inside_the_directory_and_never_collide(tmp_path):
    root = tmp_path / "store"
    s = file_store(root)
    ids = ["../x", "a/b", "a_b", "/etc/passwd", ".", "..", "~x", "é", "x" * 150, "a b", "A_B"]
    for i, id in enumerate(ids):
        s["save"](id, [{"role": "user", "content": str(i)}])
    for i, id in enumerate(ids):
        assert s["get"](id)[0]["content"] == str(i)
    assert sorted(s["ids"]()) == sorted(ids)
    assert {p.parent for p in root.iterdir()} == {root}
    assert not (tmp_path / "x.json").exists()


@given(st.text(min_size=1, max_size=120))
def test_file_names_are_injective_and_safe(id):
    name = file_name_for(id)
    assert "/" not in name and "\\" not in name and name not in (".", "..")
    assert not name.startswith(".") and len(name.encode()) <= 255
    assert id_for_file_name(name) == id


def test_empty_id_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="non-empty"):
        file_store(tmp_path)["get"]("")


@pytest.mark.parametrize(
    "content", ["{not json", '{"version": 99, "messages": []}', '[{"no": "role"}]', '"str"']
)
def test_corrupt_file_raises_naming_the_file(tmp_path, content):
    s = file_store(tmp_path)
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(StoreCorruptError, match="bad.json"):
        s["get"]("bad")


def test_reads_the_unversioned_format_as_version_0(tmp_path):
    (tmp_path / "old.json").write_text('[{"role": "user", "content": "x"}]')
    assert file_store(tmp_path)["get"]("old")[0]["content"] == "x"


def test_failed_write_leaves_the_old_transcript_and_no_temp_file(tmp_path):
    s = file_store(tmp_path)
    s["save"]("u", T)
    with pytest.raises(TypeError):
        s["save"]("u", [{"role": "user", "content": object()}])  # not JSON-encodable
    assert s["get"]("u") == T
    assert sorted(os.listdir(tmp_path)) == ["u.json"]


def test_delete_and_ids(tmp_path):
    s = file_store(tmp_path)
    s["save"]("a", T)
    s["save"]("b", T)
    s["delete"]("a")
    s["delete"]("never")
    assert s["ids"]() == ("b",)
