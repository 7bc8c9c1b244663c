"""The rules of core/wire/parts.py no other test asserts: the fixed tables, each refusal's
exact message (a part, a prompt, a stored part, a size, a policy), sizes from base64 at
the padding's edges, descriptions and placeholders, data URLs, each part's block in
each dialect (and each one a dialect cannot carry, with its reason), each block read
back, and a tool's output as text, as Anthropic blocks and as OpenAI attachments."""

from __future__ import annotations

import base64

import pytest
from pyrsistent import pvector

from toolnexus.core.frozen import FrozenMap
from toolnexus.core.wire import parts as P
from toolnexus.core.wire.parts import (
    MEDIA,
    MIME_TYPES,
    UnsupportedPartError,
    audio_format,
    check_part,
    check_part_size,
    check_parts,
    check_prompt,
    data_url,
    from_anthropic,
    from_openai,
    is_parts,
    part_size,
    placeholder,
    prompt_text,
    split_data_url,
    to_anthropic,
    to_openai,
    tool_attachments,
    tool_result_blocks,
    tool_text,
    unsupported,
)
from toolnexus.core.wire.view import prompt_message

PNG = {"type": "image", "mimeType": "image/png", "data": "aGk=", "name": "a.png"}
PDF = {"type": "file", "mimeType": "application/pdf", "data": "aGk="}
WAV = {"type": "audio", "mimeType": "audio/wav", "data": "aGk="}
TEXT = {"type": "text", "text": "hi"}
HELLO = base64.b64encode("héllo".encode()).decode()


def test_the_fixed_tables():
    assert MIME_TYPES == {
        "png": "image/png",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "gif": "image/gif",
        "webp": "image/webp",
        "pdf": "application/pdf",
        "mp3": "audio/mpeg",
        "wav": "audio/wav",
    }
    assert MEDIA == ("image", "file", "audio")
    assert issubclass(UnsupportedPartError, ValueError)


@pytest.mark.parametrize(
    "mime, fmt",
    [
        ("audio/wav", "wav"),
        ("audio/x-wav", "wav"),
        ("audio/wave", "wav"),
        ("AUDIO/WAV", "wav"),
        ("audio/mpeg", "mp3"),
        ("audio/mp3", "mp3"),
        ("audio/ogg", None),
        (None, None),
        ("", None),
    ],
)
def test_audio_formats(mime, fmt):
    assert audio_format(mime) == fmt


# ---- checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "part, message",
    [
        (["x"], "a content part is a mapping, got list"),
        ({"type": "text"}, "a text part needs a string 'text'"),
        ({"type": "text", "text": 5}, "a text part needs a string 'text'"),
        (
            {"type": "video"},
            "unknown content part type 'video': expected 'text' or one of"
            " ('image', 'file', 'audio')",
        ),
        (
            {},
            "unknown content part type None: expected 'text' or one of ('image', 'file', 'audio')",
        ),
        (
            {"type": "image", "mimeType": "image/png"},
            "an image part needs exactly one of 'data' (base64) or 'url'",
        ),
        (
            {"type": "audio", "data": "a", "url": "u", "mimeType": "m"},
            "an audio part needs exactly one of 'data' (base64) or 'url'",
        ),
        ({"type": "image", "data": "aGk="}, "an image part with 'data' needs a 'mimeType'"),
        (
            {"type": "image", "data": "aGk=", "mimeType": 5},
            "an image part with 'data' needs a 'mimeType'",
        ),
        ({"type": "image", "data": 5, "mimeType": "m"}, "an image part's 'data' must be a string"),
        ({"type": "image", "url": 5}, "an image part's 'url' must be a string"),
        (
            {"type": "image", "url": "u", "mimeType": 5},
            "an image part's 'mimeType' must be a string",
        ),
        ({"type": "image", "url": "u", "name": 5}, "an image part's 'name' must be a string"),
        ({"type": "file", "url": "u", "name": 5}, "a file part's 'name' must be a string"),
        ({"type": "file", "data": "aGk="}, "a file part with 'data' needs a 'mimeType'"),
    ],
)
def test_each_refused_part_s_message(part, message):
    with pytest.raises(ValueError) as e:
        check_part(part)
    assert str(e.value) == message


def test_a_part_checked_is_a_frozen_map():
    for part in (TEXT, PNG, {"type": "file", "url": "https://x/a.pdf", "name": None}):
        out = check_part(part)
        assert type(out) is FrozenMap and out == part
    assert check_part({"type": "image", "url": "u", "mimeType": None}) == {
        "type": "image",
        "url": "u",
        "mimeType": None,
    }


@pytest.mark.parametrize("parts", ["hi", b"hi", [], (), None, 5, {"type": "text", "text": "a"}])
def test_a_prompt_s_parts_are_a_non_empty_list(parts):
    with pytest.raises(ValueError) as e:
        check_parts(parts)
    assert str(e.value) == "a prompt is a string or a non-empty list of content parts"


def test_checked_parts_are_a_tuple_of_frozen_maps():
    out = check_parts([TEXT, PNG])
    assert type(out) is tuple and out == (TEXT, PNG) and type(out[1]) is FrozenMap
    assert check_parts((TEXT,)) == (TEXT,)


def test_a_prompt_is_text_or_parts():
    assert check_prompt("hi") is None and check_prompt([TEXT]) is None
    for bad, kind in ((b"hi", "bytes"), (5, "int"), (None, "NoneType"), ({"a": 1}, "dict")):
        with pytest.raises(TypeError) as e:
            check_prompt(bad)
        assert str(e.value) == f"prompt must be a string or a list of parts, got {kind}"
    with pytest.raises(ValueError, match="^a prompt is a string or a non-empty list"):
        check_prompt([])
    with pytest.raises(ValueError, match="^unknown content part type"):
        check_prompt([{"type": "x"}])


def test_a_prompt_message_in_each_dialect_follows_its_options():
    assert prompt_message("openai", "hi") == {"role": "user", "content": "hi"}
    m = prompt_message("anthropic", [TEXT, PNG])
    assert [b["type"] for b in m["content"]] == ["text", "image"]
    with pytest.raises(UnsupportedPartError):
        prompt_message("anthropic", [WAV])
    m = prompt_message("anthropic", [WAV], on_unsupported_part="text")
    assert m["content"][0]["text"].startswith("[audio (audio/wav) omitted")
    with pytest.raises(
        ValueError, match="^image part 'a.png' of 2 bytes exceeds max_part_bytes=1$"
    ):
        prompt_message("openai", [PNG], max_part_bytes=1)
    assert prompt_message("openai", [PNG], max_part_bytes=2)["role"] == "user"


# ---- text, sizes, descriptions -----------------------------------------------------------


def test_a_prompt_s_text():
    assert prompt_text("as is") == "as is"
    parts = [TEXT, {"type": "text", "text": ""}, PNG, {"type": "file", "url": "https://x/f"}]
    assert prompt_text(parts) == "hi [image a.png (image/png)] [file https://x/f (unknown type)]"
    assert prompt_text([{"type": "audio", "data": "x"}]) == "[audio (unknown type)]"
    assert prompt_text([]) == ""


@pytest.mark.parametrize(
    "data, size",
    [("", 0), ("aGk=", 2), ("aGVsbG8=", 5), ("aGVsbA==", 4), ("aGVs", 3), ("QUJDRA", 4)],
)
def test_a_part_s_size_is_its_decoded_bytes(data, size):
    assert part_size({"type": "file", "mimeType": "m", "data": data}) == size
    if data and len(data) % 4 == 0:
        assert size == len(base64.b64decode(data))


def test_text_and_url_parts_have_no_size():
    assert part_size({"type": "text", "text": "aGVsbG8=", "data": "aGVsbG8="}) == 0
    assert part_size({"type": "image", "url": "u"}) == 0
    assert part_size({"type": "video", "data": "aGVsbG8="}) == 0


def test_the_size_bound_at_its_edge_and_its_message():
    part = {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="}
    assert check_part_size(part, 5) is part and check_part_size(part, None) is part
    with pytest.raises(ValueError) as e:
        check_part_size(part, 4)
    assert str(e.value) == "image part of 5 bytes exceeds max_part_bytes=4"
    with pytest.raises(ValueError) as e:
        check_part_size({**part, "name": "x.png"}, 0)
    assert str(e.value) == "image part 'x.png' of 5 bytes exceeds max_part_bytes=0"


def test_placeholders_and_the_policies():
    assert (
        placeholder(PNG, "gemini") == "[image a.png (image/png) omitted: not supported by gemini]"
    )
    assert placeholder({"type": "file"}, "x") == "[file (unknown type) omitted: not supported by x]"
    text = unsupported(PNG, "d", "text", "why")
    assert text == {"type": "text", "text": placeholder(PNG, "d")} and type(text) is FrozenMap
    with pytest.raises(UnsupportedPartError) as e:
        unsupported(PNG, "d", "error", "no images")
    assert str(e.value) == "d cannot carry the image a.png (image/png) part: no images"
    with pytest.raises(UnsupportedPartError) as e:
        unsupported(PNG, "d", "error")
    assert str(e.value) == "d cannot carry the image a.png (image/png) part"
    with pytest.raises(ValueError) as e:
        unsupported(PNG, "d", "drop")
    assert str(e.value) == "on_unsupported_part must be one of ('error', 'text'), got 'drop'"
    assert not isinstance(e.value, UnsupportedPartError)


def test_data_urls():
    assert data_url("image/png", "aGk=") == "data:image/png;base64,aGk="
    assert split_data_url("data:;base64,aGk=") == ("application/octet-stream", "aGk=")
    assert split_data_url("data:a/b;base64,x;base64,y") == ("a/b", "x;base64,y")
    assert split_data_url("data:a/b,plain") is None
    assert split_data_url("https://x/data:a;base64,b") is None


# ---- to the wire -------------------------------------------------------------------------


def test_each_part_in_openai():
    assert to_openai(TEXT) == {"type": "text", "text": "hi"}
    assert to_openai(PNG) == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,aGk="},
    }
    assert to_openai({"type": "image", "url": "https://x"})["image_url"] == {"url": "https://x"}
    assert to_openai({**PDF, "name": "r.pdf"}) == {
        "type": "file",
        "file": {"file_data": "data:application/pdf;base64,aGk=", "filename": "r.pdf"},
    }
    assert to_openai(PDF)["file"]["filename"] == "file.pdf"
    assert to_openai({**PDF, "mimeType": "image/jpeg"})["file"]["filename"] == "file.jpg"
    assert to_openai({**PDF, "mimeType": "text/csv"})["file"]["filename"] == "file.bin"
    assert to_openai(WAV) == {
        "type": "input_audio",
        "input_audio": {"data": "aGk=", "format": "wav"},
    }
    assert to_openai({**WAV, "mimeType": "audio/mpeg"})["input_audio"]["format"] == "mp3"
    out = to_openai(PNG)
    assert type(out) is FrozenMap and type(out["image_url"]) is FrozenMap


@pytest.mark.parametrize(
    "part, why",
    [
        ({"type": "file", "url": "https://x/a.pdf"}, "a file by URL"),
        ({"type": "audio", "url": "https://x/a.wav"}, "only base64 wav or mp3 audio"),
        ({**WAV, "mimeType": "audio/ogg"}, "only base64 wav or mp3 audio"),
    ],
)
def test_what_openai_cannot_carry(part, why):
    with pytest.raises(UnsupportedPartError) as e:
        to_openai(part)
    assert str(e.value).startswith("openai cannot carry the ") and str(e.value).endswith(f": {why}")
    assert to_openai(part, "text")["text"].endswith("omitted: not supported by openai]")


@pytest.mark.parametrize(
    "part, message",
    [
        ("x", "not a content part (a map with a string 'type'): 'x'"),
        ({"type": 5}, "not a content part (a map with a string 'type'): {'type': 5}"),
        (
            {"type": "text", "text": None},
            "a text part needs a string 'text': {'type': 'text', 'text': None}",
        ),
        (
            {"type": "image"},
            "an image part needs 'data' (base64 text) or 'url', it has neither: {'type': 'image'}",
        ),
        (
            {"type": "file"},
            "a file part needs 'data' (base64 text) or 'url', it has neither: {'type': 'file'}",
        ),
        (
            {"type": "image", "data": "x"},
            "an image part with 'data' needs a string 'mimeType': {'type': 'image', 'data': 'x'}",
        ),
    ],
)
def test_a_damaged_stored_part_is_a_value_error_in_either_dialect(part, message):
    for encode in (to_openai, to_anthropic):
        with pytest.raises(ValueError) as e:
            encode(part)
        assert str(e.value) == message


def test_a_damaged_part_is_cut_to_120_characters_in_the_message():
    part = {"type": "image", "pad": "p" * 200}
    with pytest.raises(ValueError) as e:
        to_openai(part)
    assert str(e.value).endswith(f"it has neither: {part!r:.120}")


def test_a_stored_part_with_a_url_needs_no_mime_type():
    assert to_anthropic({"type": "image", "url": "https://x", "data": 5})["source"] == {
        "type": "url",
        "url": "https://x",
    }


def test_each_part_in_anthropic():
    assert to_anthropic(TEXT) == {"type": "text", "text": "hi"}
    assert to_anthropic({**PNG, "mimeType": "IMAGE/PNG"}) == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
    }
    for mime in ("image/jpeg", "image/gif", "image/webp"):
        assert to_anthropic({**PNG, "mimeType": mime})["type"] == "image"
    assert to_anthropic({"type": "image", "url": "https://x/a.bmp"})["source"]["type"] == "url"
    assert to_anthropic({**PDF, "name": "r.pdf"}) == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "aGk="},
        "title": "r.pdf",
    }
    assert to_anthropic({"type": "file", "url": "https://x/a"}) == {
        "type": "document",
        "source": {"type": "url", "url": "https://x/a"},
    }
    long = to_anthropic({**PDF, "name": "n" * 600})
    assert long["title"] == "n" * 500


def test_a_plain_text_file_goes_to_anthropic_as_its_text():
    data = base64.b64encode("héllo".encode()).decode()
    part = {"type": "file", "mimeType": "Text/Plain", "data": data, "name": "n.txt"}
    assert to_anthropic(part) == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "héllo"},
        "title": "n.txt",
    }


@pytest.mark.parametrize(
    "part, why",
    [
        (WAV, "no audio input"),
        ({**PNG, "mimeType": "image/bmp"}, "image type 'image/bmp'"),
        ({**PDF, "mimeType": "application/zip"}, "file 'application/zip'"),
        ({"type": "file", "url": "https://x/a.txt", "mimeType": "text/plain"}, "file 'text/plain'"),
        ({**PDF, "mimeType": "text/plain", "data": "not base64!"}, "its text is not base64 UTF-8"),
        ({**PDF, "mimeType": "text/plain", "data": "/w=="}, "its text is not base64 UTF-8"),
        ({**PDF, "mimeType": "text/plain", "data": "aG!k="}, "its text is not base64 UTF-8"),
    ],
)
def test_what_anthropic_cannot_carry(part, why):
    with pytest.raises(UnsupportedPartError) as e:
        to_anthropic(part)
    assert str(e.value).startswith("anthropic cannot carry the ") and str(e.value).endswith(
        f": {why}"
    )
    assert to_anthropic(part, "text")["text"].endswith("omitted: not supported by anthropic]")


# ---- from the wire ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block, part",
    [
        ({"type": "text", "text": "a"}, {"type": "text", "text": "a"}),
        ({"type": "text", "text": None}, {"type": "text", "text": ""}),
        ({"type": "refusal", "refusal": "no"}, {"type": "text", "text": "no"}),
        ({"type": "refusal"}, {"type": "text", "text": ""}),
        (
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            {"type": "image", "mimeType": "image/png", "data": "aGk="},
        ),
        (
            {"type": "image_url", "image_url": {"url": "https://x"}},
            {"type": "image", "url": "https://x"},
        ),
        ({"type": "image_url"}, {"type": "image", "url": ""}),
        (
            {
                "type": "file",
                "file": {"file_data": "data:application/pdf;base64,aGk=", "filename": "r.pdf"},
            },
            {"type": "file", "mimeType": "application/pdf", "data": "aGk=", "name": "r.pdf"},
        ),
        (
            {"type": "file", "file": {"file_data": "data:a/b;base64,x", "filename": 5}},
            {"type": "file", "mimeType": "a/b", "data": "x"},
        ),
        ({"type": "file", "file": {"file_id": "f-1"}}, None),
        ({"type": "file"}, None),
        (
            {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}},
            {"type": "audio", "mimeType": "audio/wav", "data": "aGk="},
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "mp3"}},
            {"type": "audio", "mimeType": "audio/mpeg", "data": "aGk="},
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "aGk=", "format": "flac"}},
            {"type": "audio", "mimeType": "audio/flac", "data": "aGk="},
        ),
        ({"type": "video"}, None),
        ({}, None),
    ],
)
def test_each_openai_block_read_back(block, part):
    out = from_openai(block)
    assert out == part
    if part is not None:
        assert type(out) is FrozenMap and list(out) == list(part)


@pytest.mark.parametrize(
    "block, part",
    [
        ({"type": "text", "text": "a"}, {"type": "text", "text": "a"}),
        ({"type": "text"}, {"type": "text", "text": ""}),
        ({"type": "tool_use"}, None),
        (
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}},
            {"type": "image", "mimeType": "image/png", "data": "aGk="},
        ),
        (
            {"type": "document", "title": "r.pdf",
             "source": {"type": "base64", "media_type": "application/pdf", "data": "aGk="}},
            {"type": "file", "mimeType": "application/pdf", "data": "aGk=", "name": "r.pdf"},
        ),
        (
            {"type": "document", "source": {"type": "url", "url": "https://x"}, "title": ""},
            {"type": "file", "url": "https://x"},
        ),
        (
            {"type": "document", "source": {"type": "url", "url": "https://x"}, "title": "t"},
            {"type": "file", "url": "https://x", "name": "t"},
        ),
        ({"type": "image", "source": {"type": "url", "url": "https://x"}}, {"type": "image", "url": "https://x"}),
        (
            {"type": "document", "source": {"type": "text", "data": "héllo"}, "title": "n"},
            {"type": "file", "mimeType": "text/plain", "data": HELLO, "name": "n"},
        ),
        (
            {"type": "document", "source": {"type": "text"}},
            {"type": "file", "mimeType": "text/plain", "data": ""},
        ),
        ({"type": "document", "source": {"type": "file", "file_id": "f"}}, None),
        ({"type": "image"}, None),
    ],
)  # fmt: skip
def test_each_anthropic_block_read_back(block, part):
    out = from_anthropic(block)
    assert out == part
    if part is not None:
        assert type(out) is FrozenMap and list(out) == list(part)


# ---- a tool's output ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output, parts",
    [
        ("text", False),
        ([], True),
        ((), True),
        (pvector(), True),
        (None, False),
        ({"a": 1}, False),
        (b"x", True),
    ],
)
def test_what_output_is_parts(output, parts):
    assert is_parts(output) is parts


def test_a_tool_s_output_as_text():
    assert tool_text("plain") == "plain" and tool_text(None) is None
    parts = [TEXT, {"type": "text", "text": "  "}, PNG, {"type": "text", "text": "end"}]
    assert tool_text(parts) == "hi\n[image a.png (image/png): attached below]\nend"
    assert tool_text([PNG], "omitted") == "[image a.png (image/png): omitted]"
    assert tool_text([{"type": "text", "text": " "}]) == "(no output)"
    assert tool_text([]) == "(no output)"


def test_a_tool_s_output_as_anthropic_blocks():
    assert tool_result_blocks("plain") == "plain"
    out = tool_result_blocks([TEXT, {"type": "text", "text": " \n"}, PNG, WAV])
    assert type(out) is type(pvector())
    assert [b["type"] for b in out] == ["text", "image", "text"]
    assert out[2]["text"] == "[audio (audio/wav) omitted: not supported by anthropic]"
    assert tool_result_blocks([{"type": "text", "text": "  "}]) == "(no output)"
    assert tool_result_blocks([]) == "(no output)"


def test_a_turn_s_tool_media_as_an_openai_user_message():
    calls = [
        {"id": "c1", "name": "chart"},
        {"id": "c2", "name": "say"},
        {"id": "c3", "name": "get"},
    ]
    results = [
        {"output": [TEXT, PNG]},
        {"output": "just text"},
        {"output": [{"type": "file", "url": "https://x/a.pdf"}, TEXT]},
    ]
    m = tool_attachments(calls, results)
    assert type(m) is FrozenMap and m["role"] == "user" and type(m["content"]) is type(pvector())
    assert [dict(b) for b in m["content"]] == [
        {"type": "text", "text": "Attached by tool chart (call c1):"},
        dict(to_openai(PNG)),
        {"type": "text", "text": "Attached by tool get (call c3):"},
        {
            "type": "text",
            "text": "[file https://x/a.pdf (unknown type) omitted: not supported by openai]",
        },
    ]
    assert tool_attachments(calls[:2], [{"output": [TEXT]}, {"output": "t"}]) is None
    assert tool_attachments([], []) is None
    with pytest.raises(ValueError):
        tool_attachments(calls, results[:1])


def test_a_part_is_named_with_its_article_even_an_unnamed_one():
    # "" is in every string, so a test of the first letter by `in` took "" for a vowel.
    assert [P._a_part(k) for k in ("image", "audio", "file", "")] == [
        "an image part", "an audio part", "a file part", "a  part"
    ]  # fmt: skip
