"""The file store over a real directory: atomic writes, safe names, corrupt files."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.backends.file.names import file_name_for, id_for_file_name
from toolnexus.core import transcript as tx
from toolnexus.store import StoreCorruptError, file_lock, file_store
from toolnexus.store import locks as L
from toolnexus.store.document import document_text as _document
from toolnexus.store.document import parse_document
from toolnexus.testing import conversation_ids, transcripts

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


# ---- any id (issue 14) ---------------------------------------------------------------

USER_IDS = ["é" * 120, "中" * 100, "x" * 250, "y" * 10_000, "a/" * 200, "\udc80 lone"]


def test_takes_ids_users_have_that_a_file_name_cannot_hold(tmp_path):
    """Fails on the old code: 'conversation id too long for a file store'."""
    s = file_store(tmp_path)
    for i, id in enumerate(USER_IDS):
        s["save"](id, [{"role": "user", "content": str(i)}])
    again = file_store(tmp_path)  # a restart
    for i, id in enumerate(USER_IDS):
        assert again["get"](id)[0]["content"] == str(i)
    assert sorted(again["ids"]()) == sorted(USER_IDS)
    assert all(len(n.encode()) <= 255 for n in os.listdir(tmp_path))
    s["delete"]("y" * 10_000)
    assert again["get"]("y" * 10_000) is None and "y" * 10_000 not in again["ids"]()


@given(st.text(min_size=1, max_size=400))
def test_every_id_has_a_safe_name_of_at_most_246_bytes(id):
    name = file_name_for(id)
    assert "/" not in name and not name.startswith(".") and len(name.encode()) <= 246
    assert id_for_file_name(name) in (id, None)  # None: a digest name, the id is inside
    assert (id_for_file_name(name) is None) == name.startswith("~~")
    assert file_name_for(id + "x") != name


def test_a_digest_collision_is_an_error_never_another_conversation(tmp_path):
    s = file_store(tmp_path)
    mine, theirs = "m" * 300, "t" * 300
    s["save"](theirs, [{"role": "user", "content": "theirs"}])
    # As if SHA-256 collided: their file under my name.
    os.replace(tmp_path / file_name_for(theirs), tmp_path / file_name_for(mine))
    with pytest.raises(StoreCorruptError, match=r"holds conversation 'ttt.*not 'mmm") as e:
        s["get"](mine)
    assert file_name_for(mine) in str(e.value)
    with pytest.raises(StoreCorruptError):
        s["delete"](mine)
    assert (tmp_path / file_name_for(mine)).exists()  # not deleted
    assert s["ids"]() == (theirs,)  # listed by the id inside


def test_a_digest_file_without_its_id_is_corrupt(tmp_path):
    id = "z" * 300
    (tmp_path / file_name_for(id)).write_text('{"version": 1, "messages": []}')
    with pytest.raises(StoreCorruptError, match=file_name_for(id)):
        file_store(tmp_path)["get"](id)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"version": 1, "messages": [{"role": "user", "content": "caf\xe9"}]}',  # Latin-1
        b"\xff\xfe\x00\x00",
        b'{"version": 1}',  # the old code read these two as an empty transcript
        b'{"version": 1, "messages": null}',
        b'{"version": 1, "messages": {"role": "user"}}',
        b'{"version": 1, "id": 7, "messages": []}',
        b"",
    ],
)
def test_an_unreadable_document_is_corrupt_naming_the_file(tmp_path, raw):
    """Fails on the old code: UnicodeDecodeError, or an empty transcript the next ask
    overwrote."""
    (tmp_path / "bad.json").write_bytes(raw)
    with pytest.raises(StoreCorruptError, match="bad.json"):
        file_store(tmp_path)["get"]("bad")


def test_a_document_naming_another_id_is_corrupt(tmp_path):
    (tmp_path / "a.json").write_text('{"version": 1, "id": "b", "messages": []}')
    with pytest.raises(StoreCorruptError, match="a.json"):
        file_store(tmp_path)["get"]("a")


def test_a_directory_in_place_of_a_file_is_corrupt_naming_it(tmp_path):
    (tmp_path / "d.json").mkdir()
    with pytest.raises(StoreCorruptError, match="d.json"):
        file_store(tmp_path)["get"]("d")


# ---- temp files and durability --------------------------------------------------------


def test_stale_temp_files_are_removed_on_open(tmp_path):
    """Fails on the old code: a killed save's temp file stayed forever."""
    (tmp_path / ".tmp-u.json").write_text("half a save")
    (tmp_path / ".tmp-k3j4h5.json").write_text("an older version's temp file")
    file_store(tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_stale_temp_file_is_reused_by_the_next_save_of_its_id(tmp_path):
    s = file_store(tmp_path)
    (tmp_path / ".tmp-u.json").write_text("half a save, killed after the store opened")
    s["save"]("u", T)
    assert sorted(os.listdir(tmp_path)) == ["u.json"] and s["get"]("u") == T


def test_a_temp_file_a_live_save_holds_is_left_alone(tmp_path):
    """A save in progress (in another process) holds its temp file's flock: opening a
    store then must not remove it."""
    import fcntl

    fd = os.open(tmp_path / ".tmp-u.json", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        file_store(tmp_path)
        assert os.listdir(tmp_path) == [".tmp-u.json"]
    finally:
        os.close(fd)
    file_store(tmp_path)
    assert os.listdir(tmp_path) == []


def test_saves_of_one_id_from_many_threads_never_mix(tmp_path):
    """Store objects without the lock, on one id: each save is whole (its own temp file
    is flocked), the last one wins, and no temp file is left."""
    from durable_store_cases import thread_errors

    def work(n):
        s = file_store(tmp_path)
        for i in range(20):
            s["save"]("u", [{"role": "user", "content": f"{n}-{i}"}] * (1 + n * 50))

    assert thread_errors(work, [(n,) for n in range(4)]) == []
    got = file_store(tmp_path)["get"]("u")
    n = int(got[0]["content"].split("-")[0])
    assert len(got) == 1 + n * 50 and len({m["content"] for m in got}) == 1
    assert os.listdir(tmp_path) == ["u.json"]


def test_the_directory_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    """A real fsync, spied on: the file's data, then the directory that names it."""
    import stat

    synced, real = [], os.fsync

    def spy(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    s = file_store(tmp_path)
    monkeypatch.setattr(os, "fsync", spy)
    s["save"]("u", T)
    assert synced == ["file", "dir"]


@given(conversation_ids(), transcripts(max_turns=2))
def test_documents_round_trip_with_and_without_the_id(id, transcript):
    frozen = tx.freeze_transcript(transcript)
    for inside in (id, None):
        assert parse_document(_document(inside, frozen).encode("utf-8")) == (frozen, inside)


def test_paired_locks_are_made_on_first_use_and_closed_with_their_owner(tmp_path):
    made = []

    def make():
        lock = file_lock(tmp_path / "locks", timeout=0.05)
        lock.close = lambda: made.append("closed")
        made.append("made")
        return lock

    paired = L.paired_lock(make)
    assert made == [] and not (tmp_path / "locks").exists()
    with paired("a"), pytest.raises(L.LockTimeoutError), paired("a"):
        pass
    with paired("b"):
        pass
    paired.close()
    assert made == ["made", "closed"]


@pytest.mark.parametrize("number", [float("nan"), float("inf")])
def test_a_message_no_reader_could_take_back_is_refused_and_the_stored_one_stays(tmp_path, number):
    """Fails on the old main: NaN was written as `NaN`, which no JSON reader takes back,
    so every later get of the conversation raised StoreCorruptError."""
    s = file_store(tmp_path)
    for id in ("c", "a/b"):  # a plain file name, and one named by its digest
        s["save"](id, [{"role": "user", "content": "kept"}])
        with pytest.raises(tx.TranscriptFormatError, match="not JSON"):
            s["save"](id, [{"role": "user", "content": "kept"}, {"role": "user", "n": number}])
        assert [m["content"] for m in s["get"](id)] == ["kept"]
    with pytest.raises(tx.TranscriptFormatError, match="not JSON"):
        tx.dumps([{"role": "user", "content": "x", "n": number}])
