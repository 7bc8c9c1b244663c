"""The rules of store/document.py no other test asserts: each refusal of parse_document says
what is wrong, and a document that could not be read back is refused as the conversation's
file."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import freeze
from toolnexus.core.transcript import TranscriptFormatError
from toolnexus.store.document import document_text, parse_document


@pytest.mark.parametrize(
    "raw, says",
    [
        (b"\xff{}", r"^not UTF-8: 'utf-8' codec can't decode byte 0xff"),
        (b"{", r"^not JSON: "),
        (b"5", r"^not a transcript document \(no 'version'\)$"),
        (b'"version"', r"^not a transcript document \(no 'version'\)$"),
        (b'{"messages": []}', r"^not a transcript document \(no 'version'\)$"),
        (b'{"version": 99, "messages": []}', r"^unknown transcript format version 99$"),
        (b'{"version": 1}', r"^'messages' is NoneType, not a list$"),
        (b'{"version": 1, "messages": {}}', r"^'messages' is dict, not a list$"),
        (b'{"version": 1, "messages": [], "id": 7}', r"^'id' is int, not a string$"),
    ],
)
def test_each_refusal_says_what_is_wrong(raw, says):
    with pytest.raises(TranscriptFormatError, match=says):
        parse_document(raw)


def test_a_bare_list_is_format_version_zero_without_an_id():
    assert parse_document(b'[{"role": "user", "content": "q"}]') == (
        freeze([{"role": "user", "content": "q"}]),
        None,
    )


@pytest.mark.parametrize("id", [None, "c1"])
def test_a_file_no_reader_could_take_back_is_refused_as_the_conversation_s_file(id):
    split = freeze([{"role": "user", "content": "half \ud83d of a character"}])
    with pytest.raises(
        TranscriptFormatError, match=r"^the conversation's file holds a lone surrogate"
    ):
        document_text(id, split)
