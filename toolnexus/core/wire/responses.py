"""Pure codec for the Responses API (OpenAI, Open Responses servers): `POST /responses`.

A Responses transcript keeps the API's own items, inside messages (every stored message
has a role, whatever the store):

    {"role": "user" | "system" | "developer", "content": str | [input_text/_image/_file]}
    {"role": "assistant", "items": [reasoning, message, function_call, ...], "response_id"?}
    {"role": "tool", "items": [function_call_output, ...]}      # one per turn of results

A request's `input` is those items in order (`input_items`): an assistant turn's output
items replayed as they came (reasoning items with their `encrypted_content`, which
`include` asks for), so the conversation is stateless by default (`store: false`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from pyrsistent import PVector, pvector

from ..errors import ProviderError
from ..frozen import FrozenMap
from .common import (
    EMPTY_ANSWER,
    MALFORMED,
    MalformedResponse,
    malformed,
    name_text,
    refusal_text,
    response_object,
    to_json,
    turn,
    unique_id,
    usage,
)
from .openai import cache_tools, headers, later_params, user_message  # the same as chat's
from .parts import (
    check_part_size,
    check_parts,
    data_url,
    is_parts,
    split_data_url,
    unsupported,
)
from .responses_stream import (
    ResponsesStream,
    final_response,
    stream_body,
    stream_event,
    stream_start,
)

__all__ = [
    "url",
    "headers",
    "later_params",
    "cache_tools",
    "user_message",
    "user_message_parts",
    "body",
    "input_items",
    "parse_response",
    "tool_result_messages",
    "stream_body",
    "ResponsesStream",
    "stream_start",
    "stream_event",
    "stream_turn",
    "to_part",
    "from_part",
    "call_ids",
    "result_ids",
]

# What a stateless conversation asks for: nothing kept on the server, reasoning given back
# encrypted so the next request can replay it.
STATELESS = MappingProxyType({"store": False, "include": ("reasoning.encrypted_content",)})


KEY_ENV = ("OPENAI_API_KEY", "OPENROUTER_API_KEY")  # where a client finds its key, in order
# The body fields the loop sets on every request: request_params may not name them.
OWNED_PARAMS = ("model", "input", "tools", "stream", "instructions")


def tool_entry(t: Mapping) -> FrozenMap:
    """Return one tool map's declaration in a request body's `tools` (a function tool)."""
    return FrozenMap(
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["input_schema"],
            "strict": False,  # our schemas are not all strict-mode schemas
        }
    )


def encode_tools(toolkit: Any) -> Sequence:
    """Return the `tools` list of a request body (a toolkit keeps them, built on register)."""
    if not toolkit:
        return ()
    made = toolkit.get("wire") or {}
    if "responses" in made:
        return made["responses"]
    return pvector(tool_entry(t) for t in toolkit["tools"])


def url(base_url: str) -> str:
    """Return the Responses URL of a base URL.

    >>> url("https://api.openai.com/v1/")
    'https://api.openai.com/v1/responses'
    """
    return base_url.rstrip("/") + "/responses"


# ---- the request ---------------------------------------------------------------------


def _output_message(item: Mapping) -> Mapping | None:
    """Return an assistant `message` item as a request takes it (None: nothing to say).

    The published schema wants `annotations` and `logprobs` on every output_text part,
    and an id and a status on the item: an item without an id (not the API's own) goes
    as an `EasyInputMessage` of its text instead.
    """
    parts = [p for p in item.get("content") or () if isinstance(p, Mapping)]
    kept = []
    for p in parts:
        if p.get("type") == "output_text":
            if not p.get("text"):
                continue
            p = {"annotations": [], "logprobs": [], **p}
        kept.append(p)
    if not kept:
        return None
    if not isinstance(item.get("id"), str):
        text = "".join(p.get("text") or p.get("refusal") or "" for p in kept)
        return FrozenMap({"role": "assistant", "content": text}) if text else None
    return {**item, "status": item.get("status") or "completed", "content": kept}


def _request_item(item: Any, stored: bool) -> Mapping | None:
    if not isinstance(item, Mapping):
        return None
    if item.get("type") == "message" and item.get("role") == "assistant":
        return _output_message(item)
    if item.get("type") == "reasoning" and not item.get("encrypted_content"):
        # Replayable by id only where the server kept it (store true); imported reasoning
        # (core.genai) has no id: no server or encryption vouches for it.
        if not (stored and item.get("id")):
            return None
    return _without_nulls(item)


def _without_nulls(item: Mapping) -> Mapping:
    """Return an item without its null fields (a gateway such as LiteLLM adds `"async":
    null, "namespace": null` to a function_call, which the API refuses back): the same
    object when it has none."""
    if None not in item.values():
        return item
    return {k: v for k, v in item.items() if v is not None}


def input_items(messages: Sequence, stored: bool = False) -> list:
    """Return a request's `input`: the transcript's items in order (see the module doc).

    `stored`: the request keeps the conversation on the server (`store` true), where a
    reasoning item may be named by its id; else one without `encrypted_content` is left
    out. A reasoning item that leads to nothing in its turn is left out too.

    >>> input_items([{"role": "user", "content": "hi"}, {"role": "assistant", "items": [
    ...     {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]}])[1]["type"]
    'function_call'
    """
    out: list = []
    for m in messages:
        items = m.get("items")
        if items is None:
            if m.get("role") == "assistant" and not m.get("content"):
                continue  # an empty answer: no API takes one
            out.append(m)
            continue
        start = len(out)
        for item in items:
            made = _request_item(item, stored)
            if made is not None:
                out.append(made)
        while len(out) > start and _is_reasoning(out[-1]) and m.get("role") == "assistant":
            out.pop()  # reasoning without its following item (saved before this rule)
    return out


def _is_reasoning(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == "reasoning"


def body(model: str, messages: Sequence, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return a request body: `instructions` only when a system prompt is given, `tools`
    only when any; stateless (`store: false`, encrypted reasoning included where the model
    gives it: see `omissions`) unless the params say otherwise."""
    stored = bool(params.get("store", STATELESS["store"])) if params else STATELESS["store"]
    out: dict = {"model": model, "input": input_items(messages, stored)}
    if system:
        out["instructions"] = system
    if tools:
        out["tools"] = tools
    out["store"] = STATELESS["store"]
    if "encrypted_content" not in omissions(model):
        out["include"] = list(STATELESS["include"])
    if params:
        out.update(params)
    return out


# ---- what a request leaves out where the server refuses it (see core.flow) --------------

# OpenAI's models that do not reason: they refuse `include: ["reasoning.encrypted_content"]`
# ("Encrypted content is not supported with this model"). The reasoning ones (o1, o3, o4,
# gpt-5, codex) take it; a model of no known family is asked, and one refusal is enough
# (the flow then remembers it per client and model).
_NO_REASONING = re.compile(r"(chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-4|gpt-3\.5)(-|:|$)")


def omissions(model: str) -> frozenset:
    """Return what requests to `model` leave out from the start: the encrypted reasoning
    of `include` for OpenAI's models that do not reason.

    >>> sorted(omissions("gpt-4.1-mini")), sorted(omissions("o4-mini")), sorted(omissions("gpt-5"))
    (['encrypted_content'], [], [])
    """
    name = model.rpartition("/")[2].lower().removeprefix("ft:")  # "openai/gpt-4o", "ft:gpt-4o:..."
    return frozenset({"encrypted_content"}) if _NO_REASONING.match(name) else frozenset()


def refused_part(error: Any) -> str | None:
    """Return what a refusal says the request should leave out ("encrypted_content": the
    400 "Encrypted content is not supported with this model"), or None."""
    text = refusal_text(error)
    if text is None:
        return None
    return "encrypted_content" if "encrypted content is not supported" in text else None


def omit(body: Mapping, names: frozenset) -> Mapping:
    """Return a request body without what `names` says the server refuses (the same
    object when it holds none of it)."""
    include = body.get("include")
    if "encrypted_content" not in names or not include:
        return body
    kept = [x for x in include if x != STATELESS["include"][0]]
    if len(kept) == len(include):
        return body
    out = {**body, "include": kept}
    if not kept:
        del out["include"]
    return out


def stored(body: Mapping) -> dict:
    """Return a request body asking the server to keep its response (`store: true`), so the
    next request can name it."""
    return {**body, "store": True}


def server_state_body(body: Mapping, messages: Sequence) -> dict:
    """Return the request of a conversation the server keeps: `previous_response_id` (the
    id the latest answer of the transcript carries) and only the items after that answer;
    the whole transcript when no answer has an id (a first turn, or a translated one).

    >>> b = server_state_body({"model": "m", "input": []}, [{"role": "user", "content": "a"},
    ...     {"role": "assistant", "items": [], "response_id": "r1"},
    ...     {"role": "user", "content": "b"}])
    >>> b["previous_response_id"], b["input"], b["store"]
    ('r1', [{'role': 'user', 'content': 'b'}], True)
    """
    for k in range(len(messages) - 1, -1, -1):
        rid = messages[k].get("response_id")
        if isinstance(rid, str) and rid and messages[k].get("role") == "assistant":
            tail = input_items(messages[k + 1 :], stored=True)
            return {**stored(body), "previous_response_id": rid, "input": tail}
    return stored(body)


def forgotten(error: Any) -> bool:
    """Return whether a ProviderError says the server no longer knows the previous response
    (expired, deleted, another server): the request goes once more with the whole
    transcript."""
    text = f"{getattr(error, 'body', '')} {error}".lower()
    return getattr(error, "status", None) in (400, 404) and (
        "previous_response" in text or "previous response" in text
    )


def cache_body(body: Mapping, conversation_id: str | None) -> Mapping:
    """Return a request body carrying `prompt_cache_key` (as chat completions does)."""
    from .openai import cache_body as chat_cache_body

    return chat_cache_body(body, conversation_id)


def with_output(params: Mapping, spec: Mapping) -> dict:
    """Return request params asking for an answer in the structured-output `spec`:
    `text.format` of type json_schema (other `text` settings kept)."""
    given = params.get("text") if params else None
    fmt = FrozenMap({"type": "json_schema", "name": spec["name"], "schema": spec["schema"],
                "strict": spec["strict"]})  # fmt: skip
    return {**params, "text": FrozenMap({**(given or {}), "format": fmt})}


def replayable(messages: Sequence) -> Sequence:
    """Return the messages the API accepts: the same object when nothing is dropped
    (empty answers and assistant turns with no item left go)."""
    bad = [i for i, m in enumerate(messages) if _empty(m)]
    if not bad:
        return messages
    drop = set(bad)
    return [m for i, m in enumerate(messages) if i not in drop]


def _empty(m: Mapping) -> bool:
    if m.get("role") != "assistant":
        return False
    items = m.get("items")
    if items is None:
        content = m.get("content")
        return not content
    return not input_items([m], stored=True)  # gone only when no request could hold any


# ---- the transcript algebra: calls, results, repair ------------------------------------


def call_ids(message: Mapping) -> tuple[str, ...]:
    """Return the call ids of the function calls an assistant turn makes."""
    if message.get("role") != "assistant":
        return ()
    return tuple(
        i["call_id"]
        for i in message.get("items") or ()
        if isinstance(i, Mapping) and i.get("type") == "function_call"
        and isinstance(i.get("call_id"), str)
    )  # fmt: skip


def result_ids(message: Mapping) -> tuple[str, ...]:
    """Return the call ids a results message answers."""
    if message.get("role") != "tool" or message.get("items") is None:
        return ()
    return tuple(
        i.get("call_id")
        for i in message["items"]
        if isinstance(i, Mapping) and i.get("type") == "function_call_output"
    )


def owns(message: Mapping) -> bool:
    """Return whether a message is in this dialect's own shape (it holds items)."""
    return isinstance(message.get("items"), (list, tuple, PVector))


def result_items(message: Mapping) -> Sequence:
    """Return the items of a results message (core.transcript merges synthesized ones in)."""
    return message.get("items") or ()


def output_item(call_id: str, output: Any) -> FrozenMap:
    """Return the `function_call_output` item answering `call_id`."""
    return FrozenMap({"type": "function_call_output", "call_id": call_id, "output": output})


def results_message(items: Sequence) -> FrozenMap:
    """Return the message holding a turn's `function_call_output` items."""
    return FrozenMap({"role": "tool", "items": pvector(items)})


# ---- tool results ----------------------------------------------------------------------


def _output(output: Any) -> Any:
    if isinstance(output, str):
        return output
    if is_parts(output):
        parts = [to_part(p, "text") for p in output if p["type"] != "text" or p["text"].strip()]
        return pvector(parts) if parts else "(no output)"
    return to_json(output).decode("utf-8")


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[FrozenMap]:
    """Return ONE message of `function_call_output` items, in call order (media parts a
    tool returned go inside its output: the API takes input_image and input_file there)."""
    items = [
        output_item(c["id"], _output(r["output"])) for c, r in zip(calls, results, strict=True)
    ]
    return [results_message(items)]


# ---- content parts ---------------------------------------------------------------------


def to_part(part: Mapping, policy: str = "error") -> Mapping:
    """Return the Responses input content of a neutral part: input_text, input_image,
    input_file (audio it cannot carry follows `policy`).

    >>> to_part({"type": "image", "url": "https://x/a.png"})["image_url"]
    'https://x/a.png'
    """
    kind, mime = part["type"], part.get("mimeType")
    if kind == "text":
        return FrozenMap({"type": "input_text", "text": part["text"]})
    if kind == "image":
        url = part.get("url") or data_url(mime, part["data"])
        return FrozenMap({"type": "input_image", "image_url": url, "detail": "auto"})
    if kind == "file" and part.get("data") is not None:
        name = part.get("name") or "file"
        return FrozenMap({"type": "input_file", "file_data": data_url(mime, part["data"]),
                     "filename": name})  # fmt: skip
    if kind == "file":
        return FrozenMap({"type": "input_file", "file_url": part["url"]})
    # Its placeholder is text, which this API takes as input_text only (never "text").
    return to_part(unsupported(part, "responses", policy, "no audio input"))


def from_part(block: Mapping) -> FrozenMap | None:
    """Return the neutral part of a Responses content part (None if it is not one)."""
    from .parts import _media

    kind = block.get("type")
    if kind in ("input_text", "output_text"):
        return FrozenMap({"type": "text", "text": block.get("text") or ""})
    if kind == "refusal":
        return FrozenMap({"type": "text", "text": block.get("refusal") or ""})
    if kind == "input_image" and isinstance(block.get("image_url"), str):
        split = split_data_url(block["image_url"])
        return _media("image", *(split or (None, None)), None if split else block["image_url"],
                      None)  # fmt: skip
    if kind == "input_file":
        if isinstance(block.get("file_data"), str):
            split = split_data_url(block["file_data"])
            if split is not None:
                return _media("file", *split, None, block.get("filename"))
        if isinstance(block.get("file_url"), str):
            return _media("file", None, None, block["file_url"], block.get("filename"))
    return None  # a file_id: only the provider that issued it knows it


def user_message_parts(
    parts: Sequence[Mapping], on_unsupported_part: str = "error", max_part_bytes: int | None = None
) -> FrozenMap:
    """Return a user message whose content is a list of Responses input parts.

    >>> user_message_parts([{"type": "text", "text": "hi"}])["content"][0]["type"]
    'input_text'
    """
    checked = [check_part_size(p, max_part_bytes) for p in check_parts(parts)]
    content = pvector(to_part(p, on_unsupported_part) for p in checked)
    return FrozenMap({"role": "user", "content": content})


# ---- decoding an answer ----------------------------------------------------------------


def _usage(u: Any) -> FrozenMap:
    if not isinstance(u, Mapping):
        return usage(None, None)
    inputs = u.get("input_tokens_details")
    outputs = u.get("output_tokens_details")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    outputs = outputs if isinstance(outputs, Mapping) else {}
    return usage(
        u.get("input_tokens"),
        u.get("output_tokens"),
        cache_read=inputs.get("cached_tokens"),
        reasoning=outputs.get("reasoning_tokens"),
    )


def _list(value: Any, where: str) -> Sequence:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple, PVector)):
        raise MalformedResponse(f"{where} is a JSON {type(value).__name__}, not an array")
    return value


class FailedResponse(ProviderError, ValueError):
    """A response whose status is "failed" (or that holds an `error`): its message is the
    provider's. A ValueError too, as every decoding error (see common.MalformedResponse)."""


def _failed(data: Mapping) -> None:
    err = data.get("error")
    if data.get("status") == "failed" or isinstance(err, Mapping):
        said = err.get("message") if isinstance(err, Mapping) else None
        raise FailedResponse(said if isinstance(said, str) and said else "the response failed")


def _read_output(output: Sequence) -> tuple[list, str, str, list]:
    """Return (items as kept, text, refusal text, calls) of a response's output."""
    items, texts, refusals, calls, taken = [], [], [], [], set()
    for n, item in enumerate(output):
        if not isinstance(item, Mapping):
            raise MalformedResponse(f"output[{n}] is a JSON {type(item).__name__}, not an object")
        kind = item.get("type")
        if kind == "message":
            for p in _list(item.get("content"), f"output[{n}].content"):
                if isinstance(p, Mapping) and p.get("type") == "output_text":
                    texts.append(p["text"] if isinstance(p.get("text"), str) else "")
                elif isinstance(p, Mapping) and p.get("type") == "refusal":
                    refusals.append(p["refusal"] if isinstance(p.get("refusal"), str) else "")
        elif kind == "function_call":
            given = item.get("call_id")
            cid = unique_id(given if isinstance(given, str) and given else f"call_{n}", taken)
            if cid != given:
                item = {**item, "call_id": cid}
            name = name_text(item.get("name"))
            if name != item.get("name"):  # replayed as the API takes it: a string
                item = {**item, "name": name}
            args = item.get("arguments")
            args = args if isinstance(args, str) else to_json(args or {}).decode("utf-8")
            calls.append({"id": cid, "name": name, "arguments": args})
        items.append(_without_nulls(item))
    while items and _is_reasoning(items[-1]):
        items.pop()  # cut while reasoning (max_output_tokens): the API refuses it alone
    return items, "".join(texts), "".join(refusals), calls


# incomplete_details.reason -> how the loop ends a turn without tool calls (any other
# reason of an incomplete response: "incomplete", no limit named)
_ENDS = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


def _parse_response(data: Mapping) -> FrozenMap:
    _failed(data)
    items, text, refusal, calls = _read_output(_list(data.get("output"), "output"))
    status = data.get("status") if isinstance(data.get("status"), str) else None
    details = data.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    finish = reason if isinstance(reason, str) else status
    message: Any = EMPTY_ANSWER
    if items:
        message = {"role": "assistant", "items": pvector(items)}
        if isinstance(data.get("id"), str):
            message["response_id"] = data["id"]
    frozen = pvector(FrozenMap(c) for c in calls)
    model = data.get("model") if isinstance(data.get("model"), str) else None
    end = _ENDS.get(reason, "incomplete") if status == "incomplete" else None
    return turn(message, text, frozen, _usage(data.get("usage")), finish, model, end=end,
                refusal=refusal or None)  # fmt: skip


def parse_response(data: Mapping | bytes | str) -> FrozenMap:
    """Return the normalized turn of a Responses response (an object, or its JSON).

    A failed response (status "failed", an `error`) is a ProviderError with its message;
    an incomplete one ends honestly (`end` "max_tokens" when cut at max_output_tokens).

    >>> t = parse_response({"status": "completed", "output": [{"type": "message",
    ...     "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}],
    ...     "usage": {"input_tokens": 2, "output_tokens": 1}})
    >>> t["text"], t["usage"]["total_tokens"], t["finish"]
    ('hi', 3, 'completed')
    """
    try:
        return _parse_response(response_object(data))
    except MALFORMED as e:
        raise malformed(e) from None


def stream_turn(acc: ResponsesStream) -> FrozenMap:
    """Return the normalized turn of a finished stream: `parse_response` of the response it
    stands for (see responses_stream.final_response, which raises for a cut stream)."""
    return parse_response(final_response(acc))


def valid_call_id(id: str) -> bool:
    """Return whether a call id meets the published schema (1 to 64 characters)."""
    return 0 < len(id) <= 64
