"""Gemini's fileData: the media type of a file given by URL comes from its path's
extension, whatever query or fragment the URL carries (a signed URL's `?sig=...`)."""

from __future__ import annotations

import pytest

from toolnexus.core.frozen import thaw
from toolnexus.core.wire.gemini import to_part


@pytest.mark.parametrize(
    ("url", "mime"),
    [
        ("https://x/a.png", "image/png"),
        ("https://x/a.png?sig=abc.def", "image/png"),
        ("https://x/a.pdf#page=2", "application/pdf"),
        ("gs://bucket/dir/a.JPG?generation=1", "image/jpeg"),
    ],
)
def test_a_file_url_s_media_type_is_its_path_s_extension(url, mime):
    made = thaw(to_part({"type": "image", "url": url}, "error"))
    assert made == {"fileData": {"mimeType": mime, "fileUri": url}}


@pytest.mark.parametrize("url", ["https://x/dir.v2/file", "https://x/a?f=b.png"])
def test_a_url_without_a_known_extension_in_its_path_has_no_media_type(url):
    assert thaw(to_part({"type": "image", "url": url}, "error")) == {"fileData": {"fileUri": url}}
