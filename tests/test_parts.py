"""Content parts: constructors over real files, the wire shape per dialect, unsupported parts,
max_part_bytes, and a round trip through real stores."""

from __future__ import annotations

import base64
import os

import pytest
from dialect_kit import STYLES, sent

from toolnexus import (
    audio,
    audio_url,
    create_client,
    file,
    file_url,
    image,
    image_url,
    run,
    text,
)
from toolnexus.core.frozen import thaw
from toolnexus.core.transcript import freeze_transcript
from toolnexus.core.wire import DIALECTS, anthropic, openai, view
from toolnexus.core.wire.parts import UnsupportedPartError, check_part, check_part_size
from toolnexus.store import file_store, sqlite_store
from toolnexus.testing import (
    fake_provider,
    text_reply,
    validate_anthropic_request,
    validate_openai_request,
)

PNG = b"\x89PNG\r\n\x1a\n fake png bytes"
PDF = b"%PDF-1.4 fake"
WAV = b"RIFF fake wav"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, data in (("cat.PNG", PNG), ("doc.pdf", PDF), ("hello.wav", WAV), ("x.txt", b"t")):
        paths[name] = tmp_path / name
        paths[name].write_bytes(data)
    return paths


def test_constructors_read_and_encode_at_construction(files):
    assert text("hi") == {"type": "text", "text": "hi"}
    assert image(files["cat.PNG"]) == {
        "type": "image", "mimeType": "image/png", "data": b64(PNG), "name": "cat.PNG"
    }  # fmt: skip
    assert file(str(files["doc.pdf"]))["mimeType"] == "application/pdf"
    assert audio(files["hello.wav"], name="greeting")["name"] == "greeting"
    # bytes: the mime type is given, never sniffed (these bytes ARE a png header)
    assert image(PNG, mime_type="image/webp")["mimeType"] == "image/webp"
    assert "name" not in image(PNG, mime_type="image/png")
    assert image_url("https://x.test/a/cat.jpeg?size=2") == {
        "type": "image", "url": "https://x.test/a/cat.jpeg?size=2", "mimeType": "image/jpeg"
    }  # fmt: skip
    assert file_url("https://x.test/report") == {"type": "file", "url": "https://x.test/report"}
    assert audio_url("https://x.test/a.mp3")["mimeType"] == "audio/mpeg"


def test_constructor_mistakes_are_clear(files):
    with pytest.raises(ValueError, match="needs mime_type="):
        image(PNG)
    with pytest.raises(ValueError, match="unknown extension"):
        file(files["x.txt"])
    with pytest.raises(ValueError, match="not an image type"):
        image(files["doc.pdf"])
    with pytest.raises(ValueError, match="not an audio type"):
        audio(PNG, mime_type="image/png")
    with pytest.raises(FileNotFoundError):
        image(files["cat.PNG"].parent / "missing.png")
    with pytest.raises(TypeError):
        text(3)
    with pytest.raises(ValueError, match="exactly one of"):
        check_part({"type": "image", "mimeType": "image/png", "data": "aA==", "url": "u"})
    with pytest.raises(ValueError, match="unknown content part type"):
        check_part({"type": "video", "url": "u"})


def test_max_part_bytes_counts_decoded_bytes():
    part = image(b"12345", mime_type="image/png")
    assert check_part_size(part, 5) is part and check_part_size(part, None) is part
    with pytest.raises(ValueError, match="5 bytes exceeds max_part_bytes=4"):
        check_part_size(part, 4)
    with pytest.raises(ValueError, match="max_part_bytes"):
        openai.user_message_parts([part], max_part_bytes=4)
    assert check_part_size(image_url("https://x.test/a.png"), 0)  # a URL has no bytes here


def test_openai_encoding(files):
    parts = [text("look"), image(files["cat.PNG"]), image_url("https://x.test/a.gif"),
             file(files["doc.pdf"]), audio(files["hello.wav"]),
             audio(b"id3", mime_type="audio/mpeg")]  # fmt: skip
    msg = openai.user_message_parts(parts)
    assert thaw(msg) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(PNG)}},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.gif"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(PDF),
                                      "filename": "doc.pdf"}},
            {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
            {"type": "input_audio", "input_audio": {"data": b64(b"id3"), "format": "mp3"}},
        ],
    }  # fmt: skip
    assert validate_openai_request({"model": "m", "messages": [msg]}) == []


def test_anthropic_encoding(files):
    parts = [text("look"), image(files["cat.PNG"]), image_url("https://x.test/a.gif"),
             file(files["doc.pdf"]), file_url("https://x.test/r.pdf", name="report")]  # fmt: skip
    msg = anthropic.user_message_parts(parts)
    src = {"type": "base64", "media_type": "image/png", "data": b64(PNG)}
    assert thaw(msg) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": src},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/a.gif"}},
            {"type": "document", "title": "doc.pdf",
             "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}},
            {"type": "document", "title": "report",
             "source": {"type": "url", "url": "https://x.test/r.pdf"}},
        ],
    }  # fmt: skip
    assert validate_anthropic_request({"model": "m", "messages": [msg]}) == []


@pytest.mark.parametrize(
    "codec, part, named",
    [
        (anthropic, {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}, "audio"),
        (openai, {"type": "audio", "url": "https://x.test/a.mp3"}, "audio https://x.test/a.mp3"),
        (openai, {"type": "file", "url": "https://x.test/r.pdf"}, "file https://x.test/r.pdf"),
        (anthropic, {"type": "image", "mimeType": "image/bmp", "data": "Qk0="}, "image"),
    ],
)
def test_unsupported_parts_raise_or_become_placeholders(codec, part, named):
    with pytest.raises(UnsupportedPartError, match=f"cannot carry the {named}"):
        codec.user_message_parts([text("hi"), part])
    msg = codec.user_message_parts([text("hi"), part], on_unsupported_part="text")
    placeholder = msg["content"][1]
    assert placeholder["type"] == "text" and "omitted: not supported by" in placeholder["text"]
    with pytest.raises(ValueError, match="on_unsupported_part"):
        codec.user_message_parts([part], on_unsupported_part="drop")


def test_a_prompt_of_parts_must_be_a_non_empty_list():
    for bad in ([], "text", None, [{"type": "text"}]):
        with pytest.raises(ValueError):
            openai.user_message_parts(bad)


@pytest.mark.parametrize("dialect", STYLES)
def test_parts_survive_a_store_round_trip(tmp_path, files, dialect):
    codec = DIALECTS[dialect]
    msg = codec.user_message_parts([text("look"), image(files["cat.PNG"]), file(files["doc.pdf"])])
    transcript = freeze_transcript([msg, {"role": "assistant", "content": "a cat"}])
    for store in (sqlite_store(tmp_path / "parts.db"), file_store(tmp_path / "files")):
        store["save"]("c", transcript)
        assert store["get"]("c") == transcript, store["desc"]
    # and a new store over the same file reads it back equal (not from a memo)
    assert sqlite_store(tmp_path / "parts.db")["get"]("c") == transcript


@pytest.mark.parametrize("style", STYLES)
def test_a_prompt_of_parts_reaches_every_dialect_and_reads_back_the_same(files, style):
    parts = [text("look"), image(files["cat.PNG"]), file(files["doc.pdf"])]
    with fake_provider([text_reply("a cat")]) as fp:  # its schema and rules check the body
        c = create_client(base_url=fp.url, style=style, model="m", api_key="k")
        r = run(c, parts)
    assert r["text"] == "a cat"
    ((role, said),) = sent(fp.requests[0]["body"])
    assert role == "user" and [p["type"] for p in said] == ["text", "image", "file"]
    assert said[0]["text"] == "look" and said[1]["mimeType"] == "image/png"
    assert [b64(PNG), b64(PDF)] == [p["data"] for p in said[1:]]
    assert view.items(r["messages"][:1]) == [(role, said)]  # as stored, as sent


def test_parts_survive_redis_and_postgres(redis_url, postgres_dsn, unique, files):
    from toolnexus.store import postgres_store, redis_store

    msg = anthropic.user_message_parts([text("look"), image(files["cat.PNG"])])
    transcript = freeze_transcript([msg, {"role": "assistant", "content": "a cat"}])
    r = redis_store(redis_url, prefix=f"tnx-parts:{unique}:")
    pg = postgres_store(postgres_dsn, f"tnx_{unique}")
    try:
        for store in (r, pg):
            store["save"]("c", transcript)
        assert redis_store(redis_url, prefix=f"tnx-parts:{unique}:")["get"]("c") == transcript
        assert pg["get"]("c") == transcript
    finally:
        r["delete"]("c")
        pg["delete"]("c")
        pg["close"]()
        import psycopg

        with psycopg.connect(postgres_dsn, autocommit=True) as c:
            c.execute(f"DROP TABLE tnx_{unique}, tnx_{unique}_heads")


def test_the_helpers_the_flow_calls_for_a_prompt(files):
    from toolnexus.core.wire.parts import check_prompt, prompt_text
    from toolnexus.core.wire.view import prompt_message

    parts = [text("what is it?"), image(files["cat.PNG"])]
    check_prompt("hi"), check_prompt(parts)
    with pytest.raises(TypeError, match="a string or a list of parts"):
        check_prompt(3)
    with pytest.raises(ValueError):
        check_prompt([{"type": "video"}])
    assert prompt_message("openai", "hi") == openai.user_message("hi")
    assert prompt_message("openai", parts) == openai.user_message_parts(parts)
    with pytest.raises(UnsupportedPartError):
        prompt_message("anthropic", [audio(files["hello.wav"])])
    assert (
        "omitted"
        in prompt_message("anthropic", [audio(files["hello.wav"])], on_unsupported_part="text")[
            "content"
        ][0]["text"]
    )
    with pytest.raises(ValueError, match="max_part_bytes"):
        prompt_message("anthropic", parts, max_part_bytes=3)
    assert prompt_text(parts) == "what is it? [image cat.PNG (image/png)]"


# Reading a user's file: bounded, and only a regular file (a device or a FIFO named by
# a path, or a symlink to one, would otherwise read forever or block forever).


def _in_thread(call, seconds: float = 5.0):
    """Run `call` on a daemon thread; return ("done", value), ("raised", error) or
    ("hung", None) when it has not returned within `seconds`."""
    import threading

    out: list = []

    def work():
        try:
            out.append(("done", call()))
        except BaseException as e:
            out.append(("raised", e))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(seconds)
    return out[0] if out else ("hung", None)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_symlink_to_an_endless_device_is_refused_not_read(tmp_path):
    link = tmp_path / "cat.png"
    link.symlink_to("/dev/zero")
    for make in (image, file, audio):
        with pytest.raises(ValueError, match="not a regular file"):
            make(link, mime_type="audio/wav" if make is audio else None)
    with pytest.raises(ValueError, match="not a regular file"):
        image("/dev/zero", mime_type="image/png")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "cat.png"
    os.mkfifo(fifo)
    outcome, value = _in_thread(lambda: image(fifo))
    if outcome == "hung":  # the old behaviour: free the reader (a writer that closes)
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert outcome == "raised" and isinstance(value, ValueError), (outcome, value)
    assert "not a regular file" in str(value) and "FIFO" in str(value)


def test_a_directory_is_refused_as_not_a_regular_file(tmp_path):
    (tmp_path / "album.png").mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        image(tmp_path / "album.png")


def test_a_file_over_max_bytes_is_refused_before_it_is_read(tmp_path):
    from toolnexus.parts import MAX_FILE_BYTES

    big = tmp_path / "big.pdf"
    with open(big, "wb") as f:  # sparse: no disk is used
        f.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ValueError, match=f"over max_bytes={MAX_FILE_BYTES}"):
        file(big)
    small = tmp_path / "small.pdf"
    small.write_bytes(b"x" * 10)
    assert base64.b64decode(file(small, max_bytes=10)["data"]) == b"x" * 10  # at the bound
    with pytest.raises(ValueError, match="11 bytes, over max_bytes=10"):
        (small.write_bytes(b"x" * 11), file(small, max_bytes=10))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_bytes"):
            file(small, max_bytes=bad)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_a_file_longer_than_its_stated_size_is_bounded_as_it_is_read():
    # /proc files are regular with a size of 0: only the read itself can bound them.
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(ValueError, match="over max_bytes=16"):
        file("/proc/self/status", mime_type="application/pdf", max_bytes=16)
    whole = file("/proc/self/status", mime_type="application/pdf")
    assert base64.b64decode(whole["data"]).startswith(b"Name:")
