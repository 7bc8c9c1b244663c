"""Pure codec for Google's native Gemini API: `POST {base}/v1beta/models/{model}:generateContent`
(`:streamGenerateContent?alt=sse` streamed), the key in `x-goog-api-key`.

A Gemini transcript keeps the API's own parts, inside messages with our roles (every
stored message has a role, whatever the store):

    {"role": "user" | "system", "content": str}              (the shape every dialect shares)
    {"role": "user", "parts": [text, inlineData, fileData]}  (a prompt of content parts)
    {"role": "assistant", "parts": [...]}   the model's parts as they came: `thought` parts,
                                            `thoughtSignature`s (on a call, on text, on an
                                            empty last part), functionCall with its id
    {"role": "tool", "parts": [functionResponse, ...]}   one per turn of results

A request's `contents` are those parts in order (role "model" for ours, "user" for
prompts and results); system messages are lifted into `systemInstruction`. Signatures
are replayed exactly where they came; another dialect never sees them (gemini_items).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from .common import to_json
from .gemini_read import (
    GeminiStream,
    parse_response,
    stream_event,
    stream_start,
    stream_turn,
)
from .gemini_schema import check_schema
from .parts import MIME_TYPES, check_part_size, check_parts, is_parts, split_data_url

__all__ = [
    "url",
    "model_url",
    "headers",
    "user_message",
    "user_message_parts",
    "body",
    "contents",
    "parse_response",
    "tool_result_messages",
    "stream_body",
    "GeminiStream",
    "stream_start",
    "stream_event",
    "stream_turn",
    "to_part",
    "from_part",
    "call_ids",
    "result_ids",
    "owns",
]

KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")  # where a client finds its key, in order
# The body fields the loop sets on every request: request_params may not name them.
OWNED_PARAMS = ("model", "contents", "tools", "systemInstruction")  # the model: in the URL
VERSION = "v1beta"
_LIST = (list, tuple, PVector)


# ---- where and how ---------------------------------------------------------------------


def model_url(base_url: str, model: str, stream: bool = False) -> str:
    """Return the URL of a model's generateContent (or streamGenerateContent with SSE);
    `/v1beta` is added only when the base URL names no version.

    >>> model_url("https://generativelanguage.googleapis.com", "gemini-2.5-flash")
    'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent'
    >>> model_url("http://h/v1/", "m", stream=True)
    'http://h/v1/models/m:streamGenerateContent?alt=sse'
    """
    base = base_url.rstrip("/")
    last = base.rpartition("/")[2]
    if not (last.startswith("v") and last[1:2].isdigit()):
        base = f"{base}/{VERSION}"
    name = model.removeprefix("models/")
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{base}/models/{name}:{method}"


def url(base_url: str) -> str:
    """Return the models collection URL of a base URL (a request names its model:
    see `model_url`, which the client uses).

    >>> url("https://generativelanguage.googleapis.com/")
    'https://generativelanguage.googleapis.com/v1beta/models'
    """
    return model_url(base_url, "-").rpartition("/")[0]


def headers(api_key: str | None) -> dict:
    """Return the auth header: the key goes in `x-goog-api-key`, never in the URL."""
    return {"x-goog-api-key": api_key} if api_key else {}


def stream_body(body: Mapping) -> Mapping:
    """Return the body of a streamed request: the same one (the URL asks for the stream)."""
    return body


# ---- tools -----------------------------------------------------------------------------


def tool_entry(t: Mapping) -> FrozenMap:
    """Return one tool map's entry in a request's `tools`: a Tool of its one function
    declaration (`encode_tools` joins them into one Tool)."""
    made = {"name": t["name"], "description": t["description"],
            "parametersJsonSchema": t["input_schema"]}  # fmt: skip
    return FrozenMap({"functionDeclarations": pvector([FrozenMap(made)])})


def _declarations(entry: Mapping) -> Sequence:
    """Return the function declarations of a Tool entry (none: a provider tool)."""
    decls = entry.get("functionDeclarations")
    return decls if isinstance(decls, _LIST) else ()


def encode_tools(toolkit: Any) -> Sequence:
    """Return the `tools` list of a request body: ONE Tool of all function declarations,
    then the provider tools meant for Gemini, verbatim.

    A schema outside the subset Gemini takes is a ValueError naming the tool and keyword.
    """
    if not toolkit:
        return ()
    made = toolkit.get("wire") or {}
    entries = made["gemini"] if "gemini" in made else [tool_entry(t) for t in toolkit["tools"]]
    decls = [d for e in entries for d in _declarations(e)]
    for d in decls:
        check_schema(d.get("parametersJsonSchema"), f"tool {d.get('name')!r}")
    out = [FrozenMap({"functionDeclarations": pvector(decls)})] if decls else []
    return pvector([*out, *(e for e in entries if not _declarations(e))])


def cache_tools(tools: Sequence) -> Sequence:
    """Return the tools as they are: Gemini caches a repeated prefix by itself (implicit
    caching); explicit caching names a `cachedContent` in the request params."""
    return tools


def cache_body(body: Mapping, conversation_id: str | None) -> Mapping:
    """Return the body as it is (see `cache_tools`)."""
    return body


# ---- what a request leaves out where the server refuses it: nothing known yet ----------


def omissions(model: str) -> frozenset:
    """Return what requests to `model` leave out from the start: nothing."""
    return frozenset()


def refused_part(error: Any) -> str | None:
    """Return what a refusal says the request should leave out: nothing known."""
    return None


def omit(body: Mapping, names: frozenset) -> Mapping:
    """Return the body as it is (nothing is ever omitted)."""
    return body


# ---- params ----------------------------------------------------------------------------


def later_params(params: Mapping) -> Mapping:
    """Return the params of a run's later turns: a forced call (mode ANY) applies to the
    first turn only, then the model may answer (AUTO). The same object otherwise."""
    config = (params or {}).get("toolConfig")
    calling = config.get("functionCallingConfig") if isinstance(config, Mapping) else None
    if not isinstance(calling, Mapping) or calling.get("mode") not in ("ANY", "VALIDATED"):
        return params
    auto = {k: v for k, v in calling.items() if k not in ("mode", "allowedFunctionNames")}
    fixed = FrozenMap({**config, "functionCallingConfig": FrozenMap({**auto, "mode": "AUTO"})})
    return {**params, "toolConfig": fixed}


def with_output(params: Mapping, spec: Mapping) -> dict:
    """Return params asking for an answer in the structured-output `spec`:
    `generationConfig.responseMimeType` JSON with its `responseJsonSchema` (other
    generation settings kept)."""
    check_schema(spec["schema"], f"output schema {spec['name']!r}")
    given = (params or {}).get("generationConfig") or {}
    given = {k: v for k, v in given.items() if k != "responseSchema"}
    config = {**given, "responseMimeType": "application/json", "responseJsonSchema": spec["schema"]}
    return {**(params or {}), "generationConfig": FrozenMap(config)}


# ---- content parts ---------------------------------------------------------------------


def to_part(part: Mapping, policy: str = "error") -> FrozenMap:
    """Return the Gemini part of a neutral part: text, inlineData (base64) or fileData (a URI).

    >>> dict(to_part({"type": "image", "mimeType": "image/png", "data": "aGk="})["inlineData"])
    {'mimeType': 'image/png', 'data': 'aGk='}
    """
    kind = part["type"]
    if kind == "text":
        return FrozenMap({"text": part["text"]})
    mime = part.get("mimeType")
    if part.get("data") is not None:
        return FrozenMap({"inlineData": FrozenMap({"mimeType": mime, "data": part["data"]})})
    split = split_data_url(part.get("url") or "")
    if split is not None:
        return FrozenMap({"inlineData": FrozenMap({"mimeType": split[0], "data": split[1]})})
    url = part["url"]  # the API wants a URI's media type: its path's extension's (parts'
    # table), never a query's or fragment's (a signed URL ends `?sig=...`)
    path = url.partition("#")[0].partition("?")[0]
    mime = mime or MIME_TYPES.get(path.rpartition(".")[2].lower())
    made = {"mimeType": mime, "fileUri": url} if mime else {"fileUri": url}
    return FrozenMap({"fileData": FrozenMap(made)})


def from_part(block: Mapping) -> FrozenMap | None:
    """Return the neutral part of a Gemini part (None: not content, e.g. a call)."""
    from .parts import _media

    if not isinstance(block, Mapping) or block.get("thought") is True:
        return None
    if isinstance(block.get("text"), str):
        return FrozenMap({"type": "text", "text": block["text"]})
    for key, place in (("inlineData", "data"), ("fileData", "fileUri")):
        given = block.get(key)
        if isinstance(given, Mapping) and isinstance(given.get(place), str):
            mime = given.get("mimeType") if isinstance(given.get("mimeType"), str) else None
            kind = _kind(mime)
            data = given[place] if place == "data" else None
            return _media(
                kind, mime, data, None if data else given[place], given.get("displayName")
            )
    return None


def _kind(mime: str | None) -> str:
    top = (mime or "").partition("/")[0]
    return top if top in ("image", "audio") else "file"


def user_message(text: str) -> FrozenMap:
    """Return a user message."""
    return FrozenMap({"role": "user", "content": text})


def user_message_parts(
    parts: Sequence[Mapping], on_unsupported_part: str = "error", max_part_bytes: int | None = None
) -> FrozenMap:
    """Return a user message holding Gemini parts.

    >>> dict(user_message_parts([{"type": "text", "text": "hi"}])["parts"][0])
    {'text': 'hi'}
    """
    checked = [check_part_size(p, max_part_bytes) for p in check_parts(parts)]
    return FrozenMap(
        {"role": "user", "parts": pvector(to_part(p, on_unsupported_part) for p in checked)}
    )


# ---- the request -----------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, _LIST):
        return ""
    return "".join(
        b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)
    )


def _request_parts(m: Mapping, names: Mapping) -> list:
    """Return a message's parts as a request carries them (empty text without a
    signature goes; a functionResponse gets its call's name when it has none)."""
    given = m.get("parts")
    if not isinstance(given, _LIST):
        text = _text(m.get("content"))
        return [FrozenMap({"text": text})] if text else []
    out = []
    for p in given:
        if not isinstance(p, Mapping):
            continue
        if p.get("text") == "" and not p.get("thoughtSignature") and len(p) <= 2:
            continue
        if p.get("thought") is True and not p.get("thoughtSignature"):
            continue  # a thought summary: the signatures carry the model's state
        answer = p.get("functionResponse")
        if isinstance(answer, Mapping) and not answer.get("name"):
            name = names.get(answer.get("id"), "")
            p = FrozenMap({**p, "functionResponse": FrozenMap({**answer, "name": name})})
        out.append(p)
    return out


def _call_names(messages: Sequence) -> dict:
    return {c["id"]: c.get("name", "") for m in messages for c in _calls(m) if c.get("id")}


def contents(messages: Sequence) -> tuple[list, list]:
    """Return (a request's `contents`, the texts of the system messages lifted out).

    Adjacent contents of one role are joined (results, then a user's words)."""
    out: list = []
    system: list = []
    names = _call_names(messages)
    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
            continue
        parts = _request_parts(m, names)
        if not parts:
            continue
        wire = "model" if role == "assistant" else "user"
        if out and out[-1]["role"] == wire:
            out[-1] = {"role": wire, "parts": [*out[-1]["parts"], *parts]}
        else:
            out.append({"role": wire, "parts": parts})
    return out, system


def body(model: str, messages: Sequence, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return a request body: `contents`, `systemInstruction` only when a system text is
    given (the transcript's system messages first), `tools` only when any; the model is
    in the URL, not here."""
    made, lifted = contents(messages)
    out: dict = {"contents": made}
    said = "\n\n".join(x for x in (*lifted, system) if x)
    if said:
        out["systemInstruction"] = FrozenMap({"parts": pvector([FrozenMap({"text": said})])})
    if tools:
        out["tools"] = tools
    if params:
        out.update(params)
    return out


def replayable(messages: Sequence) -> Sequence:
    """Return the messages the API accepts: the same object when nothing is dropped
    (an empty answer goes: no part of it could be sent)."""
    names: dict = {}
    bad = [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant" and not _request_parts(m, names)
    ]
    if not bad:
        return messages
    drop = set(bad)
    return [m for i, m in enumerate(messages) if i not in drop]


# ---- the transcript algebra: calls, results, repair ------------------------------------


def owns(message: Mapping) -> bool:
    """Return whether a message is in this dialect's own shape (it holds parts)."""
    return isinstance(message.get("parts"), _LIST)


def _calls(message: Mapping) -> list:
    if message.get("role") != "assistant" or not owns(message):
        return []
    return [
        p["functionCall"]
        for p in message["parts"]
        if isinstance(p, Mapping) and isinstance(p.get("functionCall"), Mapping)
    ]


def call_ids(message: Mapping) -> tuple[str, ...]:
    """Return the ids of the function calls an assistant turn makes."""
    return tuple(c["id"] for c in _calls(message) if isinstance(c.get("id"), str))


def result_items(message: Mapping) -> Sequence:
    """Return the functionResponse parts of a results message."""
    return tuple(
        p
        for p in message.get("parts") or ()
        if isinstance(p, Mapping) and isinstance(p.get("functionResponse"), Mapping)
    )


def result_ids(message: Mapping) -> tuple[str, ...]:
    """Return the call ids a results message answers."""
    if message.get("role") != "tool" or not owns(message):
        return ()
    return tuple(p["functionResponse"].get("id") for p in result_items(message))


def output_item(call_id: str, output: Any, name: str = "", is_error: bool = False) -> FrozenMap:
    """Return the functionResponse part answering `call_id` (a name left empty is the
    call's, filled in when a request is built)."""
    key = "error" if is_error else "output"
    answer = {"id": call_id, "name": name, "response": FrozenMap({key: output})}
    return FrozenMap({"functionResponse": FrozenMap(answer)})


def results_message(items: Sequence) -> FrozenMap:
    """Return the message holding a turn's functionResponse parts."""
    return FrozenMap({"role": "tool", "parts": pvector(items)})


# ---- tool results ----------------------------------------------------------------------


def _output(output: Any) -> tuple[Any, list]:
    """Return (the response value, media parts) of a tool's output."""
    if isinstance(output, str):
        return output, []
    if not is_parts(output):
        return to_json(output).decode("utf-8"), []
    text = "\n".join(p["text"] for p in output if p["type"] == "text" and p["text"].strip())
    media = [to_part(p, "text") for p in output if p["type"] != "text"]
    media = [m for m in media if "text" not in m]
    return text or ("(no output)" if not media else ""), media


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[FrozenMap]:
    """Return ONE message of functionResponse parts, in call order (a tool's media parts
    ride in its functionResponse's own `parts`)."""
    items = []
    for c, r in zip(calls, results, strict=True):
        value, media = _output(r["output"])
        item = output_item(c["id"], value, c.get("name") or "", bool(r.get("is_error")))
        if media:
            answer = item["functionResponse"].set("parts", pvector(media))
            item = item.set("functionResponse", answer)
        items.append(item)
    return [results_message(items)] if items else []


_ID_OK = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def valid_call_id(id: str) -> bool:
    """Return whether a call id is one this codec sends back (1 to 64 characters of
    letters, digits, `_`, `-`, `.`, `:`)."""
    return _ID_OK.fullmatch(id) is not None
