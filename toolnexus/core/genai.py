"""Portable conversations, pure: transcripts to and from the OpenTelemetry GenAI messages.

    messages = to_genai(stored)                   # [{"role", "parts": [...]}, ...]
    back = from_genai(messages, style="anthropic")

The format is the GenAI semantic conventions' input messages
(`open-telemetry/semantic-conventions-genai`, `docs/gen-ai/gen-ai-input-messages.json`):
a message is `{role, parts}`; parts are `text` {content}, `tool_call` {id, name,
arguments (an object)}, `tool_call_response` {id, response}, `blob` {mime_type, modality,
content (base64)}, `uri` {mime_type, modality, uri}, `reasoning` {content}. Reading goes
through translate's neutral items (any dialect, by shape), writing through the dialect
writers (`writers.py`), so nothing here branches on a dialect name. An export is
normalized so that it survives every dialect: an assistant turn is its reasoning, its
text (each joined into one part) and its calls; the results of a turn are one `tool`
message. Reasoning is imported in the dialect's own reasoning shape (`reasoning_content`, an
unsigned thinking block, a reasoning item without encrypted content), kept in the
transcript and never sent to a provider that takes reasoning back only signed or
encrypted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from .frozen import FrozenMap
from .transcript import freeze_transcript
from .wire import DEFAULT_STYLE, DIALECTS, view
from .wire import parts as P
from .wire.translate import translate

__all__ = ["to_genai", "from_genai"]

_MODALITY = {"image": "image", "audio": "audio", "file": "document"}
_KIND = {"image": "image", "audio": "audio", "video": "file", "document": "file"}


# ---- out -------------------------------------------------------------------------------


def _part(p: Mapping) -> dict:
    """Return the GenAI part of a neutral content part (text or media)."""
    kind = p.get("type")
    if kind == "text":
        return {"type": "text", "content": p.get("text") or ""}
    if kind in _MODALITY:
        out: dict = {"modality": _MODALITY[kind], "mime_type": p.get("mimeType")}
        if p.get("data") is not None:
            return {"type": "blob", **out, "content": p["data"]}
        return {"type": "uri", **out, "uri": p.get("url") or ""}
    return {"type": kind or "unknown"}  # a GenericPart: what the format cannot name


def _parts(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    return [_part(p) for p in content if not (p.get("type") == "text" and not p.get("text"))]


def _response(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    return [_part(view.content_part(b)) for b in content if isinstance(b, Mapping)]


def _arguments(raw: Any) -> Any:
    """Return a call's arguments as the object the format asks for (broken JSON: as sent)."""
    if isinstance(raw, Mapping):
        return json.loads(json.dumps(dict(raw), default=list))  # plain, JSON-ready
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw


def _reasoning(extras: Sequence[Mapping], own: Mapping) -> str:
    """Return the readable reasoning of a turn: thinking text, summaries, reasoning_content."""
    texts = [b.get("thinking") for b in extras]
    for b in extras:
        texts += [s.get("text") for s in b.get("summary") or () if isinstance(s, Mapping)]
    texts.append(own.get("reasoning_content"))
    return "".join(t for t in texts if isinstance(t, str))


def _assistant(parts: list, calls: list, extras: list, own: Mapping) -> dict | None:
    out: list[dict] = []
    thought = _reasoning(extras, own)
    if thought:
        out.append({"type": "reasoning", "content": thought})
    refusal = own.get("refusal")
    said = [p for p in parts if p.get("type") == "text"]
    text = "".join(p.get("text") or "" for p in said) + (
        refusal if isinstance(refusal, str) else ""
    )
    if text:
        out.append({"type": "text", "content": text})
    out += [_part(p) for p in parts if p.get("type") != "text"]
    out += [{"type": "tool_call", "id": i, "name": name, "arguments": _arguments(raw)}
            for i, name, raw, _ in calls]  # fmt: skip
    return {"role": "assistant", "parts": out} if out else None


def to_genai(transcript: Sequence[Mapping]) -> list[dict]:
    """Return a transcript (any dialect, read by its shapes) as GenAI messages, JSON-ready.

    >>> to_genai([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'parts': [{'type': 'text', 'content': 'hi'}]}]
    """
    out: list[dict] = []
    for m in freeze_transcript(transcript):
        for item in view.read(m):
            kind = item[0]
            if kind == "result":
                part = {"type": "tool_call_response", "id": item[1], "response": _response(item[2])}
                if out and out[-1]["role"] == "tool":
                    out[-1]["parts"].append(part)
                else:
                    out.append({"role": "tool", "parts": [part]})
            elif kind == "assistant":
                made = _assistant(*item[1:])
                if made is not None:
                    out.append(made)
            elif kind in ("system", "user") and _parts(item[1]):
                out.append({"role": kind, "parts": _parts(item[1])})
    return out


# ---- in --------------------------------------------------------------------------------


def _neutral(p: Mapping, where: str) -> Mapping:
    """Return the neutral content part of a GenAI part (unknown ones as bare typed parts)."""
    kind = p.get("type")
    if kind == "text":
        return FrozenMap({"type": "text", "text": _string(p, "content", where)})
    if kind in ("blob", "uri"):
        modality, mime = p.get("modality"), p.get("mime_type")
        guess = (mime or "").split("/")[0]
        neutral = _KIND.get(modality) or _KIND.get(guess) or "file"
        field, key = ("content", "data") if kind == "blob" else ("uri", "url")
        value = p.get(field)
        if not isinstance(value, str):  # named as the caller wrote it, not as kept here
            raise ValueError(f"{where}: a {kind} part needs a string {field!r}")
        part = {"type": neutral, key: value, **({"mimeType": mime} if mime else {})}
        return P.check_part(part)
    return FrozenMap({"type": kind if isinstance(kind, str) else "unknown"})


def _string(p: Mapping, key: str, where: str) -> str:
    value = p.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}: a {p.get('type')} part needs a string {key!r}")
    return value


def _result(p: Mapping, where: str) -> tuple:
    response = p.get("response")
    if isinstance(response, list):
        blocks = [
            P.to_anthropic(_neutral(x, where), "text") for x in response if isinstance(x, Mapping)
        ]
        content: Any = pvector(blocks)
    else:
        content = response if isinstance(response, str) else json.dumps(response)
    return ("result", p.get("id") or "call", content, False)


def _carried(thought: str) -> tuple[list, dict]:
    """Return the (extras, own fields) carrying reasoning text in every dialect's shape:
    each writer keeps its own (Anthropic thinking, a Responses reasoning item, the
    OpenAI-style `reasoning_content`) and drops the others'. Unsigned and unencrypted,
    they are never sent to a provider (see each codec's `replayable`)."""
    if not thought:
        return [], {}
    thinking = FrozenMap({"type": "thinking", "thinking": thought})
    summary = pvector([FrozenMap({"type": "summary_text", "text": thought})])
    return [thinking, FrozenMap({"type": "reasoning", "summary": summary})], {
        "reasoning_content": thought
    }


def _message_items(m: Any, n: int) -> list[tuple]:
    """Return the neutral items of one GenAI message, or raise a ValueError saying why not."""
    where = f"message {n}"
    if not isinstance(m, Mapping) or not isinstance(m.get("parts"), (list, tuple, PVector)):
        raise ValueError(f"{where}: a GenAI message is an object with a 'role' and a 'parts' list")
    role = m.get("role")
    parts = [p for p in m["parts"] if isinstance(p, Mapping)]
    if len(parts) != len(m["parts"]):
        raise ValueError(f"{where}: every part is an object with a 'type'")
    results = [_result(p, where) for p in parts if p.get("type") == "tool_call_response"]
    rest = [p for p in parts if p.get("type") != "tool_call_response"]
    if role == "system":
        return [("system", "".join(_string(p, "content", where) for p in rest))]
    if role == "assistant":
        calls = [(p.get("id") or f"call_{n}_{k}", _string(p, "name", where),
                  p.get("arguments") if p.get("arguments") is not None else {}, {})
                 for k, p in enumerate(rest) if p.get("type") == "tool_call"]  # fmt: skip
        thought = "".join(
            _string(p, "content", where) for p in rest if p.get("type") == "reasoning"
        )
        said = [_neutral(p, where) for p in rest if p.get("type") not in ("tool_call", "reasoning")]
        return [*results, ("assistant", said, calls, *_carried(thought))]
    if role not in ("user", "tool"):
        raise ValueError(f"{where}: role {role!r}: expected system, user, assistant or tool")
    said: Any = [_neutral(p, where) for p in rest]
    if len(said) == 1 and said[0]["type"] == "text":  # plain text, as a prompt is stored
        said = said[0]["text"]
    return [*results, *([("user", said)] if said else [])]


def from_genai(
    messages: Sequence[Mapping], style: str = DEFAULT_STYLE, *, on_unsupported_part: str = "error"
) -> PVector:
    """Return GenAI messages as a transcript in `style` (a row of the dialect registry).

    System messages stay in place (as the loop saves them); tool ids a dialect refuses
    are remapped (a call and its results alike). A part the dialect cannot carry follows
    `on_unsupported_part` ("error" raises a ValueError naming it, "text": a placeholder).

    >>> t = from_genai([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
    >>> len(t), t[0]["role"], t[0]["content"]
    (1, 'user', 'hi')
    """
    if style not in DIALECTS:
        raise ValueError(f"unknown style {style!r}: expected one of {tuple(DIALECTS)}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError("GenAI messages are a list of {role, parts} objects")
    said = [item for n, m in enumerate(messages) for item in _message_items(m, n)]
    out = view.transcript_of(said, style, on_unsupported_part)
    return translate(out, style, keep_system=True, on_unsupported_part=on_unsupported_part).messages
