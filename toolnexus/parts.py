"""Content part constructors: text, images, files and audio for a prompt (upstream's shape).

    run(client, [text("What is in this picture?"), image("cat.png")])

A media part reads and base64-encodes its bytes once, here, at construction; the part
itself holds bytes (base64) or a URL, never a path. Mime types come from a fixed
extension table (png, jpg, jpeg, gif, webp, pdf, mp3, wav), never sniffed from the bytes.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from pyrsistent import PMap, pmap

from .core.wire.parts import MIME_TYPES, check_part, check_part_size, part_size

__all__ = [
    "text",
    "image",
    "file",
    "audio",
    "image_url",
    "file_url",
    "audio_url",
    "mime_type_for",
    "check_part",
    "check_part_size",
    "part_size",
    "MIME_TYPES",
]

Source = str | os.PathLike | bytes | bytearray | memoryview


def mime_type_for(name: str) -> str | None:
    """Return the mime type of a file name or URL path by its extension (the fixed table).

    >>> mime_type_for("cat.JPG"), mime_type_for("notes.txt")
    ('image/jpeg', None)
    """
    suffix = PurePosixPath(name).suffix.lower().lstrip(".")
    return MIME_TYPES.get(suffix)


def text(s: str) -> PMap:
    """Return a text part.

    >>> text("hi") == {"type": "text", "text": "hi"}
    True
    """
    if not isinstance(s, str):
        raise TypeError(f"text() takes a string, got {type(s).__name__}")
    return pmap({"type": "text", "text": s})


def _expect(kind: str, mime: str, where: str) -> None:
    # The table's families: an image part must be an image type, audio an audio type.
    family = mime.split("/", 1)[0]
    if kind == "image" and family != "image" or kind == "audio" and family != "audio":
        raise ValueError(f"{where} is {mime!r}, not an {kind} type")


def _media(kind: str, source: Source, mime_type: str | None, name: str | None) -> PMap:
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not mime_type:
            raise ValueError(f"{kind}(bytes) needs mime_type=: bytes are never sniffed")
        data = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        mime_type = mime_type or mime_type_for(path.name)
        if mime_type is None:
            known = ", ".join(sorted(MIME_TYPES))
            raise ValueError(f"{kind}({str(path)!r}): unknown extension (known: {known});"
                             " pass mime_type=")  # fmt: skip
        data = path.read_bytes()
        name = name if name is not None else path.name
    else:
        raise TypeError(f"{kind}() takes a path or bytes, got {type(source).__name__}")
    _expect(kind, mime_type, f"{kind}()'s mime type")
    part = {"type": kind, "mimeType": mime_type, "data": base64.b64encode(data).decode("ascii")}
    return check_part({**part, "name": name} if name else part)


def _by_url(kind: str, url: str, mime_type: str | None, name: str | None) -> PMap:
    if not isinstance(url, str) or not url:
        raise ValueError(f"{kind}_url() takes a non-empty URL string, got {url!r}")
    mime_type = mime_type or mime_type_for(urlsplit(url).path)
    if mime_type:
        _expect(kind, mime_type, f"{kind}_url()'s mime type")
    part = {"type": kind, "url": url}
    part.update({k: v for k, v in (("mimeType", mime_type), ("name", name)) if v})
    return check_part(part)


def image(path_or_bytes: Source, mime_type: str | None = None, name: str | None = None) -> PMap:
    """Return an image part from a file (its mime type from the extension) or bytes."""
    return _media("image", path_or_bytes, mime_type, name)


def file(path_or_bytes: Source, mime_type: str | None = None, name: str | None = None) -> PMap:
    """Return a file part (e.g. a PDF) from a file or bytes; its name defaults to the file's."""
    return _media("file", path_or_bytes, mime_type, name)


def audio(path_or_bytes: Source, mime_type: str | None = None, name: str | None = None) -> PMap:
    """Return an audio part (wav or mp3) from a file or bytes."""
    return _media("audio", path_or_bytes, mime_type, name)


def image_url(url: str, mime_type: str | None = None, name: str | None = None) -> PMap:
    """Return an image part by URL (the provider fetches it)."""
    return _by_url("image", url, mime_type, name)


def file_url(url: str, mime_type: str | None = None, name: str | None = None) -> PMap:
    """Return a file part by URL (Anthropic fetches a PDF by URL; OpenAI cannot)."""
    return _by_url("file", url, mime_type, name)


def audio_url(url: str, mime_type: str | None = None, name: str | None = None) -> PMap:
    """Return an audio part by URL (neither dialect carries it: see on_unsupported_part)."""
    return _by_url("audio", url, mime_type, name)
