"""Pure codec for OpenAI-style chat completions (also used by the in-process client)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap, freeze
from . import openai_fields as fields
from .common import (
    EMPTY_ANSWER,
    MALFORMED,
    MalformedResponse,
    frozen_turn,
    is_empty_answer,
    is_empty_text_block,
    is_forced_choice,
    malformed,
    name_text,
    replayable_with,
    response_object,
    stream_cut,
    text_of,
    turn,
    unique_id,
    usage,
)
from .openai_read import READ_CALL, args_text, array, extra_fields, mapping, str_or_none
from .openai_stream import (
    OpenAIStream,
    StreamCall,
    stream_body,
    stream_event,
    stream_response,
    stream_start,
)
from .parts import from_openai, is_parts, to_openai, tool_attachments, tool_text

__all__ = [
    "url",
    "headers",
    "user_message",
    "body",
    "parse_response",
    "tool_result_messages",
    "stream_body",
    "OpenAIStream",
    "StreamCall",
    "stream_start",
    "stream_event",
    "stream_response",
    "stream_turn",
]


KEY_ENV = ("OPENAI_API_KEY", "OPENROUTER_API_KEY")  # where a client finds its key, in order
# The body fields the loop sets on every request: request_params may not name them.
OWNED_PARAMS = ("model", "messages", "tools", "stream")


def tool_entry(t: Mapping) -> FrozenMap:
    """Return one tool map's declaration in a request body's `tools`."""
    function = FrozenMap(
        {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
    )
    return FrozenMap({"type": "function", "function": function})


def encode_tools(toolkit: Any) -> Sequence:
    """Return the `tools` list of a request body (a toolkit keeps them, built on register)."""
    if not toolkit:
        return ()
    made = toolkit.get("wire") or {}
    return made["openai"] if "openai" in made else pvector(tool_entry(t) for t in toolkit["tools"])


def url(base_url: str) -> str:
    """Return the chat completions URL of a base URL.

    >>> url("https://api.openai.com/v1/")
    'https://api.openai.com/v1/chat/completions'
    """
    return base_url.rstrip("/") + "/chat/completions"


def headers(api_key: str | None) -> dict:
    """Return the auth headers (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def user_message(text: str) -> FrozenMap:
    """Return a user message."""
    return FrozenMap({"role": "user", "content": text})


def body(model: str, messages: Sequence, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return a request body; the system prompt leads, no tools omits `tools`.

    `tools` is already in wire shape (`encode_tools(toolkit)`), encoded once per run.
    `messages` must be replayable (see `replayable`: the flow cleans a history once,
    when it is loaded, not on every request).
    """
    msgs = [{"role": "system", "content": system}, *messages] if system else messages
    out = {"model": model, "messages": msgs}
    if tools:
        out["tools"] = tools
    if params:  # dict.update on a pmap lists its keys, then looks each one up
        out.update(params)
    return out


def later_params(params: Mapping) -> Mapping:
    """Return the request params of a run's later turns: a forced `tool_choice` (a named
    tool, or any tool) applies to the first turn only, then the model may answer (auto).
    The same object when nothing is forced."""
    if not params or not is_forced_choice(params.get("tool_choice")):
        return params
    return {**params, "tool_choice": "auto"}


def cache_tools(tools: Sequence) -> Sequence:
    """Return the request's tools as they are (OpenAI caches prompt prefixes by itself)."""
    return tools


def cache_body(body: Mapping, conversation_id: str | None) -> Mapping:
    """Return a request body carrying `prompt_cache_key` (the conversation id; a digest of
    it past 64 characters), which routes a conversation's requests to the same cache.
    A key given in request_params is kept."""
    if conversation_id is None or "prompt_cache_key" in body:
        return body
    key = conversation_id
    if len(key) > 64:
        import hashlib

        key = "tn-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:48]
    return {**body, "prompt_cache_key": key}


def with_output(params: Mapping, spec: Mapping) -> dict:
    """Return request params asking for an answer in the structured-output `spec`
    (core.output): `response_format` of type json_schema, strict when the schema allows."""
    schema = FrozenMap({"name": spec["name"], "schema": spec["schema"], "strict": spec["strict"]})
    return {**params, "response_format": FrozenMap({"type": "json_schema", "json_schema": schema})}


def replayable(messages: Sequence) -> Sequence:
    """Return the messages a provider accepts: the same object when nothing is dropped.

    A stored refusal (`{"content": None, "refusal": text}`, as the API sent it) is
    replayed in the request's shape: content `[{"type": "refusal", "refusal": text}]`.
    """
    return replayable_with(messages, _needs_cleaning, fix_message=_refusal_request)


def _refusal_request(m: Mapping) -> Mapping | None:
    refusal = m.get("refusal")
    if m.get("role") != "assistant" or not isinstance(refusal, str) or not refusal:
        return None
    if m.get("content") or m.get("tool_calls"):
        return None
    part = FrozenMap({"type": "refusal", "refusal": refusal})
    return FrozenMap(m).remove("refusal").set("content", pvector([part]))


# What a request leaves out where the server refuses it (see core.flow, openai_fields).
omissions, refused_part, omit = fields.omissions, fields.refused_part, fields.omit


def _needs_cleaning(m: Mapping) -> bool:
    content = m.get("content")
    if type(content) is str:  # the hot path: text content, non-empty unless an empty answer
        return not content and m.get("role") == "assistant" and not m.get("tool_calls")
    if content is None:
        return m.get("role") == "assistant" and not m.get("tool_calls")
    return isinstance(content, (list, tuple, PVector)) and (
        any(is_empty_text_block(p) for p in content) or is_empty_answer(m)
    )


# What the loop reads of an assistant message and of a tool call; every other field a
# provider sends (reasoning_content, reasoning_details, extra_content, annotations, ...)
# is kept as it came and replayed verbatim (DeepSeek and Gemini refuse a turn without it).
_READ_MESSAGE = frozenset({"role", "content", "tool_calls", "function_call"})


def _assistant_message(
    text: str, calls: Sequence[Mapping], extra: Mapping | None = None
) -> FrozenMap:
    # The message of plain call dicts {id, name, arguments[, extra]}.
    wire = [_wire_call(c) for c in calls]
    return _message(text, wire, extra)


def _message(text: str, wire: Sequence[Mapping], extra: Mapping | None) -> FrozenMap:
    # Built frozen (not frozen afterwards): this runs for every model turn. `wire` holds
    # the calls as the message carries them (`_wire_entry`), `extra` frozen values.
    if not text and not wire and not extra:
        return EMPTY_ANSWER
    msg = {"role": "assistant", "content": text if (text or not wire) else None}
    if extra and not text and not wire and extra.get("refusal"):
        msg["content"] = None  # a refusal: the API's own shape, no content
    if wire:
        msg["tool_calls"] = pvector(wire)
    if extra:
        msg.update(extra)
    return FrozenMap(msg)


def _wire_call(c: Mapping) -> FrozenMap:
    # The call as the assistant message carries it (from a plain call dict).
    return _wire_entry(c["id"], c["name"], c["arguments"], c.get("extra"))


def _wire_entry(cid: str, name: str, arguments: str, extra: Mapping | None) -> FrozenMap:
    # The call as the assistant message carries it, from its fields.
    fn = FrozenMap({"name": name, "arguments": arguments})
    if not extra:
        return FrozenMap({"id": cid, "type": "function", "function": fn})
    return FrozenMap({**extra, "id": cid, "type": "function", "function": fn})


def _usage(u: Mapping) -> FrozenMap:
    if u.keys() <= _PLAIN_USAGE:  # no details reported
        return usage(u.get("prompt_tokens"), u.get("completion_tokens"))
    prompt_details = u.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, Mapping) else {}
    done_details = u.get("completion_tokens_details")
    done_details = done_details if isinstance(done_details, Mapping) else {}
    cached = prompt_details.get("cached_tokens")
    if cached is None:  # DeepSeek reports its cache hits beside the counts
        cached = u.get("prompt_cache_hit_tokens")
    return usage(
        u.get("prompt_tokens"),
        u.get("completion_tokens"),
        cache_read=cached,
        cache_write=prompt_details.get("cache_write_tokens"),
        reasoning=done_details.get("reasoning_tokens"),
    )


_PLAIN_USAGE = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})

# finish_reason -> how the loop ends a turn without tool calls (see common.turn)
_ENDS = {"length": "max_tokens", "content_filter": "content_filter"}  # truncations


def _refusal(extra: Mapping | None) -> str | None:
    refusal = extra.get("refusal") if extra else None
    return refusal if isinstance(refusal, str) and refusal else None


def _turn(
    text: str, calls: list, u: Mapping | None, finish: Any, model: Any, extra: Mapping | None = None
) -> FrozenMap:
    # The turn of plain call dicts {id, name, arguments} (the in-process client's).
    use = _usage(u) if u else usage(None, None)
    frozen = pvector([FrozenMap(c) for c in calls])
    message = _assistant_message(text, calls, extra)
    end = _ENDS.get(finish)
    return turn(message, text, frozen, use, finish, model, end=end, refusal=_refusal(extra))


def parse_response(data: Mapping | bytes | str) -> FrozenMap:
    """Return the normalized turn of a chat completions response (an object, or its JSON).

    Anything malformed (bad or too deep JSON, wrong shapes) is a ProviderError
    (`MalformedResponse`, also a ValueError). Content given as a list of text parts is
    joined into text; a non-string tool name becomes its JSON text (an unknown tool).

    >>> t = parse_response({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
    ...                     "usage": {"prompt_tokens": 2, "completion_tokens": 1}})
    >>> t["text"], t["usage"]["total_tokens"], t["finish"]
    ('hi', 3, 'stop')
    """
    try:
        return _parse_response(response_object(data))
    except MALFORMED as e:
        raise malformed(e) from None


# Each shape check below tests the exact type json.loads makes first and calls the
# helper that names what is wrong (and accepts other mappings and sequences) only for
# any other type: the same errors, without a frame or an error label per field.


def _parse_response(data: Mapping) -> FrozenMap:
    choices = data.get("choices")
    if type(choices) is not list:
        choices = array(choices, "choices")
    if not choices:
        raise MalformedResponse("response has no choices")
    choice = choices[0]
    if type(choice) is not dict:
        choice = mapping(choice, "choices[0]")
    message = choice.get("message")
    if type(message) is not dict:
        message = mapping(message, "choices[0].message")
    raw = message.get("tool_calls")
    calls, wire = _calls(raw if type(raw) is list else array(raw, "tool_calls"))
    text = message.get("content")
    if type(text) is not str:
        text = text_of(text, "choices[0].message.content")
    u = data.get("usage")
    use = _usage(u) if u and (type(u) is dict or isinstance(u, Mapping)) else usage(None, None)
    finish, model = choice.get("finish_reason"), data.get("model")
    finish = finish if type(finish) is str else str_or_none(finish)
    model = model if type(model) is str else str_or_none(model)
    extra = None if message.keys() <= _READ_MESSAGE else extra_fields(message, _READ_MESSAGE)
    extra = freeze(extra) if extra else None  # kept as sent: nested values frozen
    msg = _message(text, wire, extra)
    return frozen_turn(msg, text, pvector(calls), use, finish, model, _ENDS.get(finish),
                       _refusal(extra))  # fmt: skip


def _calls(raw: Sequence) -> tuple[list, list]:
    # The turn's calls {id, name, arguments[, extra]} and the message's, both frozen.
    calls, wire, taken = [], [], set()
    for i, c in enumerate(raw):
        if type(c) is not dict:
            c = mapping(c, f"tool_calls[{i}]")
        fn = c.get("function")
        if type(fn) is not dict:
            fn = mapping(fn, f"tool_calls[{i}].function")
        cid = c.get("id")
        if type(cid) is not str or not cid:
            cid = cid if isinstance(cid, str) and cid else f"call_{i}"
        # Distinct within the turn: two calls sharing an id get `id_2`, ...
        cid = unique_id(cid, taken)
        name = fn.get("name")
        if type(name) is not str:
            name = name_text(name)
        args = fn.get("arguments") or ""
        if type(args) is not str:
            args = args_text(args)
        extra = None if c.keys() <= READ_CALL else extra_fields(c, READ_CALL)
        if extra:
            extra = freeze(extra)  # kept as sent: nested values frozen
            calls.append(FrozenMap({"id": cid, "name": name, "arguments": args, "extra": extra}))
        else:
            calls.append(FrozenMap({"id": cid, "name": name, "arguments": args}))
        wire.append(_wire_entry(cid, name, args, extra))
    return calls, wire


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[FrozenMap]:
    """Return one `tool` message per call, in call order; media parts a tool returned
    follow in one user message (a tool message carries text only)."""
    out = [
        FrozenMap({"role": "tool", "tool_call_id": c["id"], "content": _content(r["output"])})
        for c, r in zip(calls, results, strict=True)
    ]
    attachments = tool_attachments(calls, results)
    return out if attachments is None else [*out, attachments]


def _content(output: Any) -> str:
    if isinstance(output, str):
        return output
    return tool_text(output) if is_parts(output) else args_text(output)


# ---- streaming: SSE events -> deltas (openai_stream) -> the same normalized turn


def stream_turn(acc: OpenAIStream) -> FrozenMap:
    """Return the normalized turn of a finished stream: exactly what parse_response gives.

    Tool arguments stay raw (the joined fragments), so JSON cut off at max_tokens
    reaches the loop, which feeds back an invalid-arguments error. A stream that ended
    with neither a finish_reason nor `[DONE]` (cut short, or a 200 with no event) is a
    ProviderError marked `network` (see common.stream_cut).
    """
    if acc.finish is None and not acc.done:
        raise stream_cut("no finish_reason and no [DONE]")
    try:
        return parse_response(stream_response(acc))
    except MALFORMED as e:
        raise malformed(e, "stream") from None


# ---- content parts: a prompt that is a list of parts --------------------------------


def user_message_parts(
    parts: Sequence[Mapping], on_unsupported_part: str = "error", max_part_bytes: int | None = None
) -> FrozenMap:
    """Return a user message whose content is a list of parts in chat completions shape.

    Parts are upstream's (`toolnexus.parts`); each is checked and held to `max_part_bytes`.
    A URL audio part cannot go: it follows `on_unsupported_part` ("error" | "text").

    >>> user_message_parts([{"type": "text", "text": "hi"}])["content"][0]["text"]
    'hi'
    """
    from .parts import check_part_size, check_parts, to_openai

    checked = [check_part_size(p, max_part_bytes) for p in check_parts(parts)]
    return FrozenMap(
        {"role": "user", "content": pvector(to_openai(p, on_unsupported_part) for p in checked)}
    )


__all__.append("user_message_parts")  # pragma: no mutate (runs at import: out of reach)


def valid_call_id(id: str) -> bool:
    """Return whether a tool call id meets chat completions' rule (at most 40 characters)."""
    return 0 < len(id) <= 40


# The neutral content part <-> this dialect's block (see parts.py).
to_part, from_part = to_openai, from_openai
