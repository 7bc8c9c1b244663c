"""Pure codec for OpenAI-style chat completions (also used by the in-process client)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from pyrsistent import PMap, PVector, pmap, pvector

from .common import (
    EMPTY_ANSWER,
    MALFORMED,
    MalformedResponse,
    is_empty_answer,
    is_empty_text_block,
    is_forced_choice,
    malformed,
    merge_extra,
    name_text,
    replayable_with,
    response_object,
    stream_cut,
    text_of,
    turn,
    unique_id,
    usage,
)
from .parts import from_openai, is_parts, to_openai, tool_attachments, tool_text
from .sse import load_json, stream_error

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


def tool_entry(t: Mapping) -> PMap:
    """Return one tool map's declaration in a request body's `tools`."""
    function = pmap(
        {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
    )
    return pmap({"type": "function", "function": function})


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


def user_message(text: str) -> PMap:
    """Return a user message."""
    return pmap({"role": "user", "content": text})


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
    schema = pmap({"name": spec["name"], "schema": spec["schema"], "strict": spec["strict"]})
    return {**params, "response_format": pmap({"type": "json_schema", "json_schema": schema})}


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
    part = pmap({"type": "refusal", "refusal": refusal})
    return pmap(m).remove("refusal").set("content", pvector([part]))


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
_READ_CALL = frozenset({"id", "type", "function", "index"})


def _extra(given: Mapping, read: frozenset) -> dict:
    """Return the fields of `given` the loop does not read (None values: nothing said)."""
    if given.keys() <= read:  # the usual case: nothing else (one C-level set check)
        return {}
    return {k: v for k, v in given.items() if k not in read and v not in _NOTHING}


_NOTHING = (None, "", [], {})  # a field holding these says nothing (`annotations: []`)


def _assistant_message(text: str, calls: Sequence[Mapping], extra: Mapping | None = None) -> PMap:
    # Built frozen (not frozen afterwards): this runs for every model turn.
    if not text and not calls and not extra:
        return EMPTY_ANSWER
    msg = {"role": "assistant", "content": text if (text or not calls) else None}
    if extra and not text and not calls and extra.get("refusal"):
        msg["content"] = None  # a refusal: the API's own shape, no content
    if calls:
        msg["tool_calls"] = pvector([_wire_call(c) for c in calls])
    if extra:
        msg.update(extra)
    return pmap(msg)


def _wire_call(c: Mapping) -> PMap:
    # The call as the assistant message carries it (from the decoder's plain dict).
    fn = pmap({"name": c["name"], "arguments": c["arguments"]})
    extra = c.get("extra")
    if not extra:
        return pmap({"id": c["id"], "type": "function", "function": fn})
    return pmap({**extra, "id": c["id"], "type": "function", "function": fn})


def _args_text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    from .common import to_json

    return to_json(raw).decode("utf-8")


def _usage(u: Mapping) -> PMap:
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
_ENDS = {"length": "max_tokens"}


def _turn(
    text: str, calls: list, u: Mapping | None, finish: Any, model: Any, extra: Mapping | None = None
) -> PMap:
    use = _usage(u) if u else usage(None, None)
    frozen = pvector([pmap(c) for c in calls])
    refusal = extra.get("refusal") if extra else None
    refusal = refusal if isinstance(refusal, str) and refusal else None
    message = _assistant_message(text, calls, extra)  # read from the plain dicts: faster
    return turn(message, text, frozen, use, finish, model, end=_ENDS.get(finish), refusal=refusal)


def parse_response(data: Mapping | bytes | str) -> PMap:
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


def _mapping(value: Any, where: str) -> Mapping:
    if type(value) is dict:  # what json.loads makes: no ABC check
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedResponse(f"{where} is a JSON {type(value).__name__}, not an object")
    return value


def _list(value: Any, where: str) -> Sequence:
    if type(value) is list:  # what json.loads makes
        return value
    if value is None:
        return ()
    if not isinstance(value, (list, tuple, PVector)):
        raise MalformedResponse(f"{where} is a JSON {type(value).__name__}, not an array")
    return value


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _parse_response(data: Mapping) -> PMap:
    choices = _list(data.get("choices"), "choices")
    if not choices:
        raise MalformedResponse("response has no choices")
    choice = _mapping(choices[0], "choices[0]")
    message = _mapping(choice.get("message"), "choices[0].message")
    calls, taken = [], set()
    for i, c in enumerate(_list(message.get("tool_calls"), "tool_calls")):
        c = _mapping(c, f"tool_calls[{i}]")
        fn = _mapping(c.get("function"), f"tool_calls[{i}].function")
        cid = c.get("id")
        call = {
            # Distinct within the turn: two calls sharing an id get `id_2`, ...
            "id": unique_id(cid if isinstance(cid, str) and cid else f"call_{i}", taken),
            "name": name_text(fn.get("name")),
            "arguments": _args_text(fn.get("arguments") or ""),
        }
        extra = _extra(c, _READ_CALL)
        if extra:
            call["extra"] = pmap(extra)
        calls.append(call)
    text = text_of(message.get("content"), "choices[0].message.content")
    usage_ = data.get("usage")
    return _turn(
        text,
        calls,
        usage_ if isinstance(usage_, Mapping) else None,
        _str_or_none(choice.get("finish_reason")),
        _str_or_none(data.get("model")),
        _extra(message, _READ_MESSAGE),
    )


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[PMap]:
    """Return one `tool` message per call, in call order; media parts a tool returned
    follow in one user message (a tool message carries text only)."""
    out = [
        pmap({"role": "tool", "tool_call_id": c["id"], "content": _content(r["output"])})
        for c, r in zip(calls, results, strict=True)
    ]
    attachments = tool_attachments(calls, results)
    return out if attachments is None else [*out, attachments]


def _content(output: Any) -> str:
    if isinstance(output, str):
        return output
    return tool_text(output) if is_parts(output) else _args_text(output)


# ---- streaming: SSE events -> deltas -> the same normalized turn -----------------


def stream_body(body: Mapping) -> dict:
    """Return a copy of a request body that asks for a stream ending in a usage chunk.

    >>> stream_body({"model": "m"})
    {'model': 'm', 'stream': True, 'stream_options': {'include_usage': True}}
    """
    options = {**(body.get("stream_options") or {}), "include_usage": True}
    return {**body, "stream": True, "stream_options": options}


class StreamCall(NamedTuple):
    """One tool call being assembled from a stream's fragments."""

    index: int
    id: str | None
    name: str
    args: PVector  # the argument text fragments, joined at the end
    extra: Mapping | None = None  # fields of the call the loop does not read (extra_content)
    wire: int | None = None  # the index the server sent (may repeat: see _position)


class OpenAIStream(NamedTuple):
    """The accumulator of a chat completions stream: an immutable value (see stream_event).

    `done` turns True once `data: [DONE]` arrived; a stream that ends without it and
    without a `finish_reason` was cut short (`stream_turn` raises). Some compatible
    servers send a finish_reason and no [DONE]: that stream is complete.
    """

    text: PVector = pvector()  # content fragments
    refusal: PVector = pvector()
    calls: PVector = pvector()  # StreamCall values, in first-seen order
    usage: Mapping | None = None  # the chunk with a non-null usage (include_usage)
    finish: str | None = None  # the last non-null finish_reason
    model: str | None = None
    done: bool = False
    extra: Mapping | None = None  # other delta fields, accumulated (reasoning_content, ...)


def stream_start() -> OpenAIStream:
    """Return the accumulator of a stream that has delivered nothing yet."""
    return OpenAIStream()


def _delta(**fields: Any) -> Mapping:
    # A read-only map: built once per event on the hot path, where a pmap costs as much
    # as decoding the event's JSON.
    return MappingProxyType(fields)


def _position(calls: PVector, fragment: Mapping) -> tuple[int, int]:
    """Return (index, position in `calls` or -1) of a tool call fragment."""
    index = fragment.get("index")
    fid = fragment.get("id")
    if index is None:
        # Every OpenAI fragment has an index; some compatible servers omit it and send
        # each call whole, so a fragment with a new id opens the next index.
        known = [p for p, c in enumerate(calls) if fid and c.id == fid]
        if known:
            return calls[known[0]].index, known[0]
        if fid or not calls:
            return (max(c.index for c in calls) + 1 if calls else 0), -1
        return calls[-1].index, len(calls) - 1
    index = int(index)
    if calls and calls[-1].wire == index:  # the common case: fragments of the latest call
        pos = len(calls) - 1
    else:  # the latest call sent under that index
        pos = next((p for p in range(len(calls) - 1, -1, -1) if calls[p].wire == index), -1)
    if pos >= 0 and fid and calls[pos].id and calls[pos].id != fid:
        # A repeated index with a new id is another call (Ollama streams parallel calls
        # all with index 0): it gets the next index of ours.
        return max(c.index for c in calls) + 1, -1
    if pos < 0 and any(c.index == index for c in calls):
        return max(c.index for c in calls) + 1, -1
    return (calls[pos].index if pos >= 0 else index), pos


def _add_fragment(calls: PVector, fragment: Mapping, deltas: list) -> PVector:
    index, pos = _position(calls, fragment)
    fn = fragment.get("function") or {}
    args = fn.get("arguments")
    piece = (_args_text(args),) if args else ()
    extra = _extra(fragment, _READ_CALL) or None
    if pos < 0:
        wire = fragment.get("index")
        call = StreamCall(index, fragment.get("id"), fn.get("name") or "", pvector(piece), extra,
                          None if wire is None else int(wire))  # fmt: skip
        deltas.append(_delta(type="tool_call_start", index=index, id=call.id, name=call.name))
        return calls.append(call)
    call = calls[pos]
    if extra:
        call = call._replace(extra=merge_extra(call.extra, extra, concat=False))
    if piece:
        call = call._replace(args=call.args.extend(piece))
    if not call.id and fragment.get("id"):
        call = call._replace(id=fragment["id"])
    if not call.name and fn.get("name"):
        call = call._replace(name=fn["name"])
    return calls.set(pos, call)


def stream_event(acc: OpenAIStream, event: Mapping) -> tuple[OpenAIStream, tuple[Mapping, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries (read-only maps).

    Deltas: {"type": "text", "delta"}, {"type": "refusal", "delta"} and
    {"type": "tool_call_start", "index", "id", "name"}. An `error` event, or a chunk
    holding "error", raises ProviderError with the provider's message; anything
    malformed is a ProviderError too.
    """
    try:
        return _stream_event(acc, event)
    except MALFORMED as e:
        raise malformed(e, "stream event") from None


def _stream_event(acc: OpenAIStream, event: Mapping) -> tuple[OpenAIStream, tuple[Mapping, ...]]:
    data = event["data"]
    if event["event"] == "error":
        raise stream_error(data)
    if data[:1] != "{":
        if data.strip() == "[DONE]":  # a chunk is an object: "{..."
            return acc._replace(done=True), ()
        if not data.strip():  # an event with no data carries nothing: skipped
            return acc, ()
    chunk = load_json(data)
    # An error chunk ({"error": {...}}, vLLM's {"object": "error", ...}) ends the turn:
    # inband.envelope's test, inline (plain dict lookups: this runs for every chunk).
    if chunk.get("error") is not None or "error" in (chunk.get("object"), chunk.get("type")):
        raise stream_error(chunk)
    text, refusal, calls, usage, finish, model, done, extra = acc
    if model is None:
        model = _str_or_none(chunk.get("model"))
    given = chunk.get("usage")
    if given is not None and isinstance(given, Mapping):  # the include_usage chunk
        usage = given  # (its choices may be empty)
    deltas: list = []
    for choice in _list(chunk.get("choices"), "choices"):
        choice = _mapping(choice, "choice")
        if choice.get("index", 0) != 0:  # parse_response reads choices[0] only
            continue
        delta = _mapping(choice.get("delta"), "delta")
        content = delta.get("content")
        if content:
            piece = text_of(content, "delta.content")  # a list of parts joins into text
            if piece:
                text = text.append(piece)
                deltas.append(_delta(type="text", delta=piece))
        if delta.get("refusal"):
            piece = text_of(delta["refusal"], "delta.refusal")
            refusal = refusal.append(piece)
            deltas.append(_delta(type="refusal", delta=piece))
        for fragment in _list(delta.get("tool_calls"), "delta.tool_calls"):
            calls = _add_fragment(calls, _mapping(fragment, "tool call fragment"), deltas)
        if not delta.keys() <= _READ_DELTA:  # inline: this runs for every chunk
            more = _extra(delta, _READ_DELTA)
            if more:
                extra = _more(extra, more, deltas)
        if isinstance(choice.get("finish_reason"), str):  # a later null never resets it
            finish = choice["finish_reason"]
    return OpenAIStream(text, refusal, calls, usage, finish, model, done, extra), tuple(deltas)


_READ_DELTA = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
# Delta fields that carry a model's reasoning as text: shown as "thinking" deltas.
_REASONING = ("reasoning_content", "reasoning")


def _more(extra: Mapping | None, more: Mapping, deltas: list) -> Mapping:
    """Return the accumulated extra fields after a delta's (reasoning shown as thinking)."""
    for key in _REASONING:
        piece = more.get(key)
        if isinstance(piece, str) and piece:
            deltas.append(_delta(type="thinking", delta=piece))
    out = dict(extra) if extra else {}
    for key, value in more.items():  # a top-level string field arrives in pieces
        out[key] = merge_extra(out.get(key), value)
    return out


def stream_response(acc: OpenAIStream) -> dict:
    """Return the chat completions response a stream amounts to (what parse_response reads)."""
    calls = [
        {
            **(c.extra or {}),
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": "".join(c.args)},
        }
        for c in sorted(acc.calls, key=lambda c: c.index)
    ]
    message: dict = {**(acc.extra or {}), "role": "assistant",
                     "content": "".join(acc.text) or None}  # fmt: skip
    if calls:
        message["tool_calls"] = calls
    if acc.refusal:
        message["refusal"] = "".join(acc.refusal)
    return {
        "model": acc.model,
        "choices": [{"index": 0, "message": message, "finish_reason": acc.finish}],
        "usage": acc.usage,
    }


def stream_turn(acc: OpenAIStream) -> PMap:
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
) -> PMap:
    """Return a user message whose content is a list of parts in chat completions shape.

    Parts are upstream's (`toolnexus.parts`); each is checked and held to `max_part_bytes`.
    A URL audio part cannot go: it follows `on_unsupported_part` ("error" | "text").

    >>> user_message_parts([{"type": "text", "text": "hi"}])["content"][0]["text"]
    'hi'
    """
    from .parts import check_part_size, check_parts, to_openai

    checked = [check_part_size(p, max_part_bytes) for p in check_parts(parts)]
    return pmap(
        {"role": "user", "content": pvector(to_openai(p, on_unsupported_part) for p in checked)}
    )


__all__.append("user_message_parts")


def valid_call_id(id: str) -> bool:
    """Return whether a tool call id meets chat completions' rule (at most 40 characters)."""
    return 0 < len(id) <= 40


# The neutral content part <-> this dialect's block (see parts.py).
to_part, from_part = to_openai, from_openai
