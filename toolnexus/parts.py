"""Content part constructors: text, images, files and audio for a prompt (upstream's shape).

    run(client, [text("What is in this picture?"), image("cat.png")])

A media part reads and base64-encodes its bytes once, here, at construction; the part
itself holds bytes (base64) or a URL, never a path. Mime types come from a fixed
extension table (png, jpg, jpeg, gif, webp, pdf, mp3, wav), never sniffed from the bytes.
A path is read only when it names a regular file (after symlinks) of at most
`max_bytes` (MAX_FILE_BYTES, 20 MiB, unless given): never a device, a FIFO or a socket.
"""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from .core.frozen import FrozenMap
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
    "MAX_FILE_BYTES",
]

Source = str | os.PathLike | bytes | bytearray | memoryview

# The most a part constructor reads from a path unless told otherwise: OpenAI's limit for
# one image, and base64 of it (about 27 MiB) stays under the stores' 32 MiB per message.
MAX_FILE_BYTES = 20 * 1024 * 1024

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


def mime_type_for(name: str) -> str | None:
    """Return the mime type of a file name or URL path by its extension (the fixed table).

    >>> mime_type_for("cat.JPG"), mime_type_for("notes.txt")
    ('image/jpeg', None)
    """
    suffix = PurePosixPath(name).suffix.lower().lstrip(".")
    return MIME_TYPES.get(suffix)


def text(s: str) -> FrozenMap:
    """Return a text part.

    >>> text("hi") == {"type": "text", "text": "hi"}
    True
    """
    if not isinstance(s, str):
        raise TypeError(f"text() takes a string, got {type(s).__name__}")
    return FrozenMap({"type": "text", "text": s})


def _expect(kind: str, mime: str, where: str) -> None:
    # The table's families: an image part must be an image type, audio an audio type.
    family = mime.split("/", 1)[0]
    if kind == "image" and family != "image" or kind == "audio" and family != "audio":
        raise ValueError(f"{where} is {mime!r}, not an {kind} type")


def _not_regular(mode: int) -> str | None:
    """Return what a file of this mode is when it is not a regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "of another kind")


def _read_file(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """Return the bytes of the regular file at `path` (symlinks followed), at most `max_bytes`;
    anything else (a device, a FIFO, a directory, a larger file) is a ValueError."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be an integer >= 1, got {max_bytes!r}")
    # O_NONBLOCK: opening a FIFO for reading would wait for a writer; it changes nothing
    # for a regular file, and the kind of file is checked before any read.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        what = _not_regular(info.st_mode)
        if what is not None:
            raise ValueError(f"{str(path)!r} is not a regular file ({what})")
        if info.st_size > max_bytes:
            raise ValueError(_too_big(path, info.st_size, max_bytes))
        with open(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)  # a file longer than it said (/proc) is bounded too
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(_too_big(path, len(data), max_bytes))
    return data


def _too_big(path: str | os.PathLike, size: int, max_bytes: int) -> str:
    return f"{str(path)!r} holds {size} bytes, over max_bytes={max_bytes} (pass a larger one)"


def _media(
    kind: str, source: Source, mime_type: str | None, name: str | None, max_bytes: int
) -> FrozenMap:
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
        data = _read_file(path, max_bytes)
        name = name if name is not None else path.name
    else:
        raise TypeError(f"{kind}() takes a path or bytes, got {type(source).__name__}")
    _expect(kind, mime_type, f"{kind}()'s mime type")
    part = {"type": kind, "mimeType": mime_type, "data": base64.b64encode(data).decode("ascii")}
    return check_part({**part, "name": name} if name else part)


def _by_url(kind: str, url: str, mime_type: str | None, name: str | None) -> FrozenMap:
    if not isinstance(url, str) or not url:
        raise ValueError(f"{kind}_url() takes a non-empty URL string, got {url!r}")
    mime_type = mime_type or mime_type_for(urlsplit(url).path)
    if mime_type:
        _expect(kind, mime_type, f"{kind}_url()'s mime type")
    part = {"type": kind, "url": url}
    part.update({k: v for k, v in (("mimeType", mime_type), ("name", name)) if v})
    return check_part(part)


def image(
    path_or_bytes: Source,
    mime_type: str | None = None,
    name: str | None = None,
    *,
    max_bytes: int = MAX_FILE_BYTES,
) -> FrozenMap:
    """Return an image part from a file (its mime type from the extension) or bytes."""
    return _media("image", path_or_bytes, mime_type, name, max_bytes)


def file(
    path_or_bytes: Source,
    mime_type: str | None = None,
    name: str | None = None,
    *,
    max_bytes: int = MAX_FILE_BYTES,
) -> FrozenMap:
    """Return a file part (e.g. a PDF) from a file or bytes; its name defaults to the file's."""
    return _media("file", path_or_bytes, mime_type, name, max_bytes)


def audio(
    path_or_bytes: Source,
    mime_type: str | None = None,
    name: str | None = None,
    *,
    max_bytes: int = MAX_FILE_BYTES,
) -> FrozenMap:
    """Return an audio part (wav or mp3) from a file or bytes."""
    return _media("audio", path_or_bytes, mime_type, name, max_bytes)


def image_url(url: str, mime_type: str | None = None, name: str | None = None) -> FrozenMap:
    """Return an image part by URL (the provider fetches it)."""
    return _by_url("image", url, mime_type, name)


def file_url(url: str, mime_type: str | None = None, name: str | None = None) -> FrozenMap:
    """Return a file part by URL (Anthropic fetches a PDF by URL; OpenAI cannot)."""
    return _by_url("file", url, mime_type, name)


def audio_url(url: str, mime_type: str | None = None, name: str | None = None) -> FrozenMap:
    """Return an audio part by URL (neither dialect carries it: see on_unsupported_part)."""
    return _by_url("audio", url, mime_type, name)
