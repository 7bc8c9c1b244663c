"""Content parts (upstream SPEC 1B), pure: checks, sizes, and their wire shape per dialect.

A part is `{"type": "text", "text"}` or `{"type": "image" | "file" | "audio", "mimeType",
"data" (base64) | "url", "name"?}`. Encoding a part for a dialect returns its content
block; a part the dialect cannot carry follows `on_unsupported_part`: "error" raises a
ValueError naming it, "text" puts a text placeholder in its place.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import pvector

from ..frozen import FrozenMap

__all__ = [
    "MIME_TYPES",
    "MEDIA",
    "UnsupportedPartError",
    "check_part",
    "check_parts",
    "prompt_text",
    "check_prompt",
    "part_size",
    "check_part_size",
    "placeholder",
    "unsupported",
    "data_url",
    "split_data_url",
    "audio_format",
    "to_openai",
    "to_anthropic",
    "from_openai",
    "from_anthropic",
    "is_parts",
    "tool_text",
    "tool_result_blocks",
    "tool_attachments",
]

# Upstream's fixed extension table: a mime type is never sniffed from the bytes.
MIME_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "pdf": "application/pdf",
    "mp3": "audio/mpeg",
    "wav": "audio/wav",
}
MEDIA = ("image", "file", "audio")
POLICIES = ("error", "text")
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
                  "audio/mpeg": "mp3", "audio/mp3": "mp3"}  # fmt: skip
_ANTHROPIC_IMAGES = ("image/jpeg", "image/png", "image/gif", "image/webp")


class UnsupportedPartError(ValueError):
    """A content part the target dialect cannot carry (with on_unsupported_part="error")."""


def check_part(part: Any) -> FrozenMap:
    """Return a part as a pmap, or raise ValueError saying what is wrong with it.

    >>> check_part({"type": "text", "text": "hi"})["text"]
    'hi'
    >>> check_part({"type": "image", "mimeType": "image/png"})
    Traceback (most recent call last):
    ...
    ValueError: an image part needs exactly one of 'data' (base64) or 'url'
    """
    if not isinstance(part, Mapping):
        raise ValueError(f"a content part is a mapping, got {type(part).__name__}")
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise ValueError("a text part needs a string 'text'")
        return FrozenMap(part)
    if kind not in MEDIA:
        raise ValueError(f"unknown content part type {kind!r}: expected 'text' or one of {MEDIA}")
    has_data, has_url = part.get("data") is not None, part.get("url") is not None
    if has_data == has_url:
        raise ValueError(f"{_a_part(kind)} needs exactly one of 'data' (base64) or 'url'")
    if has_data and not isinstance(part.get("mimeType"), str):
        raise ValueError(f"{_a_part(kind)} with 'data' needs a 'mimeType'")
    for key in ("data", "url", "mimeType", "name"):
        if part.get(key) is not None and not isinstance(part[key], str):
            raise ValueError(f"{_a_part(kind)}'s {key!r} must be a string")
    return FrozenMap(part)


def _a_part(kind: str) -> str:
    """Name a part of type `kind` with its article: 'an image part', 'a file part'."""
    return f"{'an' if kind.startswith(tuple('aeiou')) else 'a'} {kind} part"


def check_parts(parts: Any) -> tuple[FrozenMap, ...]:
    """Return a prompt's parts checked (a non-empty list of parts), or raise ValueError."""
    if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence) or not parts:
        raise ValueError("a prompt is a string or a non-empty list of content parts")
    return tuple(check_part(p) for p in parts)


def check_prompt(prompt: Any) -> None:
    """Raise a clear error for a prompt a run cannot take (a string, or a list of parts)."""
    if isinstance(prompt, str):
        return
    if not isinstance(prompt, Sequence) or isinstance(prompt, bytes):
        raise TypeError(f"prompt must be a string or a list of parts, got {type(prompt).__name__}")
    check_parts(prompt)


def prompt_text(prompt: str | Sequence[Mapping]) -> str:
    """Return the text of a prompt (a string, or parts: text joined, media named) for logs.

    >>> prompt_text([{"type": "text", "text": "what is this?"},
    ...              {"type": "image", "mimeType": "image/png", "data": "aGk=", "name": "a.png"}])
    'what is this? [image a.png (image/png)]'
    """
    if isinstance(prompt, str):
        return prompt
    return " ".join(
        p["text"] if p.get("type") == "text" else f"[{_describe(p)}]"
        for p in prompt
        if p.get("type") != "text" or p.get("text")
    )


def part_size(part: Mapping) -> int:
    """Return the decoded size in bytes of a part's base64 data (0 for text and URL parts).

    >>> part_size({"type": "image", "mimeType": "image/png", "data": "aGVsbG8="})
    5
    """
    data = part.get("data") if part.get("type") in MEDIA else None
    if not data:
        return 0
    return len(data) * 3 // 4 - data[-2:].count("=")


def check_part_size(part: Mapping, max_part_bytes: int | None) -> Mapping:
    """Return `part` when its data is at most `max_part_bytes` (None: no limit), else ValueError.

    >>> check_part_size({"type": "image", "mimeType": "image/png", "data": "aGVsbG8="}, 4)
    Traceback (most recent call last):
    ...
    ValueError: image part of 5 bytes exceeds max_part_bytes=4
    """
    size = part_size(part)
    if max_part_bytes is not None and size > max_part_bytes:
        what = (
            f"{part['type']} part {part['name']!r}" if part.get("name") else f"{part['type']} part"
        )
        raise ValueError(f"{what} of {size} bytes exceeds max_part_bytes={max_part_bytes}")
    return part


def _describe(part: Mapping) -> str:
    name = part.get("name") or part.get("url") or ""
    mime = part.get("mimeType") or "unknown type"
    return f"{part.get('type')} {name + ' ' if name else ''}({mime})"


def placeholder(part: Mapping, dialect: str) -> str:
    """Return the text that stands for a part a dialect cannot carry.

    >>> placeholder({"type": "audio", "mimeType": "audio/wav", "name": "a.wav"}, "anthropic")
    '[audio a.wav (audio/wav) omitted: not supported by anthropic]'
    """
    return f"[{_describe(part)} omitted: not supported by {dialect}]"


def unsupported(part: Mapping, dialect: str, policy: str, why: str = "") -> Mapping:
    """Return the text part standing for `part` (policy "text"), or raise (policy "error")."""
    if policy not in POLICIES:
        raise ValueError(f"on_unsupported_part must be one of {POLICIES}, got {policy!r}")
    if policy == "error":
        reason = f": {why}" if why else ""
        raise UnsupportedPartError(f"{dialect} cannot carry the {_describe(part)} part{reason}")
    return FrozenMap({"type": "text", "text": placeholder(part, dialect)})


def data_url(mime_type: str, data: str) -> str:
    """Return a base64 data URL.

    >>> data_url("image/png", "aGk=")
    'data:image/png;base64,aGk='
    """
    return f"data:{mime_type};base64,{data}"


def split_data_url(url: str) -> tuple[str, str] | None:
    """Return (mime type, base64 data) of a base64 data URL, else None.

    >>> split_data_url("data:image/png;base64,aGk="), split_data_url("https://x/y.png")
    (('image/png', 'aGk='), None)
    """
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head or "application/octet-stream", data


def audio_format(mime_type: str | None) -> str | None:
    """Return OpenAI's `input_audio` format of a mime type ("wav" | "mp3"), else None."""
    return _AUDIO_FORMATS.get((mime_type or "").lower())


_EXTENSIONS = {mime: ext for ext, mime in reversed(MIME_TYPES.items())}


def _filename(part: Mapping) -> str:
    ext = _EXTENSIONS.get(part.get("mimeType") or "", "bin")
    return part.get("name") or f"file.{ext}"


# ---- neutral part -> wire block --------------------------------------------------------


def to_openai(part: Mapping, policy: str = "error") -> Mapping:
    """Return the chat completions content part of a part.

    Images go as `image_url` (a data URL or the URL), files as `file` with `file_data`
    (a data URL) and a filename, audio as `input_audio` (base64 wav or mp3 only).

    >>> to_openai({"type": "image", "url": "https://x/a.png"})["image_url"]["url"]
    'https://x/a.png'
    """
    _check_part(part)
    kind, mime = part["type"], part.get("mimeType")
    if kind == "text":
        return FrozenMap({"type": "text", "text": part["text"]})
    if kind == "image":
        url = part.get("url") or data_url(mime, part["data"])
        return FrozenMap({"type": "image_url", "image_url": FrozenMap({"url": url})})
    if kind == "file" and part.get("data") is not None:
        inner = {"file_data": data_url(mime, part["data"]), "filename": _filename(part)}
        return FrozenMap({"type": "file", "file": FrozenMap(inner)})
    if kind == "audio" and part.get("data") is not None and audio_format(mime):
        inner = FrozenMap({"data": part["data"], "format": audio_format(mime)})
        return FrozenMap({"type": "input_audio", "input_audio": inner})
    why = "only base64 wav or mp3 audio" if kind == "audio" else "a file by URL"
    return unsupported(part, "openai", policy, why)


def _check_part(part: Any) -> None:
    """Raise ValueError, saying what is wrong, unless `part` is a content part (a stored
    transcript may hold a damaged one: never a KeyError from deep inside)."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if not isinstance(kind, str):
        raise ValueError(f"not a content part (a map with a string 'type'): {part!r:.120}")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise ValueError(f"a text part needs a string 'text': {part!r:.120}")
        return
    url, data = part.get("url"), part.get("data")
    if not isinstance(url, str) and not isinstance(data, str):
        raise ValueError(
            f"{_a_part(kind)} needs 'data' (base64 text) or 'url', it has neither: {part!r:.120}"
        )
    if url is None and not isinstance(part.get("mimeType"), str):
        raise ValueError(f"{_a_part(kind)} with 'data' needs a string 'mimeType': {part!r:.120}")


def _source(part: Mapping) -> FrozenMap:
    if part.get("url") is not None:
        return FrozenMap({"type": "url", "url": part["url"]})
    # The request schema's media types are lower case (a mime type is case-insensitive).
    return FrozenMap(
        {"type": "base64", "media_type": part["mimeType"].lower(), "data": part["data"]}
    )


_TITLE_MAX = 500  # the request schema's longest document title


def _document(part: Mapping, source: Mapping) -> FrozenMap:
    block = {"type": "document", "source": source}
    name = part.get("name")
    return FrozenMap({**block, "title": name[:_TITLE_MAX]} if name else block)


def to_anthropic(part: Mapping, policy: str = "error") -> Mapping:
    """Return the messages content block of a part: `text`, `image` or `document`.

    >>> b = to_anthropic({"type": "file", "mimeType": "application/pdf", "data": "aGk="})
    >>> b == {"type": "document",
    ...       "source": {"type": "base64", "media_type": "application/pdf", "data": "aGk="}}
    True
    """
    _check_part(part)
    kind, mime = part["type"], (part.get("mimeType") or "").lower()
    if kind == "text":
        return FrozenMap({"type": "text", "text": part["text"]})
    if kind == "image" and (part.get("url") is not None or mime in _ANTHROPIC_IMAGES):
        return FrozenMap({"type": "image", "source": _source(part)})
    if kind == "file" and (mime == "application/pdf" or (not mime and part.get("url"))):
        return _document(part, _source(part))
    if kind == "file" and mime == "text/plain" and part.get("data") is not None:
        try:
            text = base64.b64decode(part["data"], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return unsupported(part, "anthropic", policy, "its text is not base64 UTF-8")
        source = FrozenMap({"type": "text", "media_type": "text/plain", "data": text})
        return _document(part, source)
    why = {"audio": "no audio input", "image": f"image type {mime!r}"}.get(kind, f"file {mime!r}")
    return unsupported(part, "anthropic", policy, why)


# ---- wire block -> neutral part (None: not a content part) -----------------------------


def _media(kind: str, mime: str | None, data: str | None, url: str | None, name: Any) -> FrozenMap:
    out: dict = {"type": kind}
    if mime:
        out["mimeType"] = mime
    if data is not None:
        out["data"] = data
    else:
        out["url"] = url
    if isinstance(name, str) and name:
        out["name"] = name
    return FrozenMap(out)


def from_openai(block: Mapping) -> FrozenMap | None:
    """Return the neutral part of a chat completions content part (None if it is not one).

    >>> p = from_openai({"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}})
    >>> p == {"type": "image", "mimeType": "image/png", "data": "aGk="}
    True
    """
    kind = block.get("type")
    if kind == "text":
        return FrozenMap({"type": "text", "text": block.get("text") or ""})
    if kind == "refusal":
        return FrozenMap({"type": "text", "text": block.get("refusal") or ""})
    if kind == "image_url":
        url = (block.get("image_url") or {}).get("url") or ""
        split = split_data_url(url)
        return _media("image", *(split or (None, None)), None if split else url, None)
    if kind == "file":
        inner = block.get("file") or {}
        split = split_data_url(inner.get("file_data") or "")
        if split is None:
            return None  # a file_id: only the provider that issued it knows it
        return _media("file", *split, None, inner.get("filename"))
    if kind == "input_audio":
        inner = block.get("input_audio") or {}
        mime = {"wav": "audio/wav", "mp3": "audio/mpeg"}.get(inner.get("format"))
        return _media(
            "audio", mime or f"audio/{inner.get('format')}", inner.get("data"), None, None
        )
    return None


def from_anthropic(block: Mapping) -> FrozenMap | None:
    """Return the neutral part of a messages content block (None if it is not one).

    >>> p = from_anthropic({"type": "image", "source": {"type": "url", "url": "https://x/a.png"}})
    >>> p == {"type": "image", "url": "https://x/a.png"}
    True
    """
    kind = block.get("type")
    if kind == "text":
        return FrozenMap({"type": "text", "text": block.get("text") or ""})
    if kind not in ("image", "document"):
        return None
    source = block.get("source") or {}
    neutral = "image" if kind == "image" else "file"
    if source.get("type") == "base64":
        return _media(
            neutral, source.get("media_type"), source.get("data"), None, block.get("title")
        )
    if source.get("type") == "url":
        return _media(neutral, None, None, source.get("url"), block.get("title"))
    if source.get("type") == "text":
        data = base64.b64encode((source.get("data") or "").encode("utf-8")).decode("ascii")
        return _media("file", "text/plain", data, None, block.get("title"))
    return None


# ---- a tool's result given as content parts (see core.tool.tool_output) ----------------


def is_parts(output: Any) -> bool:
    """Return whether a tool result's output is content parts (not text)."""
    return not isinstance(output, str) and isinstance(output, Sequence)


def _media_note(part: Mapping, where: str) -> str:
    return f"[{_describe(part)}: {where}]"


def tool_text(output: Any, where: str = "attached below") -> str:
    """Return the text of a tool's output: itself, or its text parts joined with a note
    standing for each media part.

    >>> tool_text([{"type": "text", "text": "chart:"},
    ...            {"type": "image", "mimeType": "image/png", "data": "aGk=", "name": "c.png"}])
    'chart:\\n[image c.png (image/png): attached below]'
    """
    if not is_parts(output):
        return output
    pieces = [p["text"] if p["type"] == "text" else _media_note(p, where) for p in output]
    return "\n".join(x for x in pieces if x.strip()) or "(no output)"


def tool_result_blocks(output: Any) -> Any:
    """Return a tool output as Anthropic `tool_result` content: the text, or text, image and
    document blocks (audio, which it cannot carry, as a note; no whitespace-only text).

    >>> [b["type"] for b in tool_result_blocks([{"type": "text", "text": "a"},
    ...     {"type": "image", "mimeType": "image/png", "data": "aGk="}])]
    ['text', 'image']
    """
    if not is_parts(output):
        return output
    blocks = [to_anthropic(p, "text") for p in output if p["type"] != "text" or p["text"].strip()]
    return pvector(blocks) if blocks else "(no output)"


def tool_attachments(calls: Sequence[Mapping], results: Sequence[Mapping]) -> FrozenMap | None:
    """Return the OpenAI chat user message carrying the media parts of a turn's tool
    results (a tool message holds text only), or None when there are none.

    Each call's media follow a line naming the call; a part chat completions cannot carry
    (a file by URL) becomes its text placeholder.
    """
    content: list = []
    for c, r in zip(calls, results, strict=True):
        output = r["output"]
        media = [p for p in output if p["type"] != "text"] if is_parts(output) else []
        if media:
            content.append(FrozenMap({"type": "text", "text": f"Attached by tool {c['name']} "
                                 f"(call {c['id']}):"}))  # fmt: skip
            content.extend(to_openai(p, "text") for p in media)
    return FrozenMap({"role": "user", "content": pvector(content)}) if content else None
