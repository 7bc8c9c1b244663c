"""Pure codec for Anthropic-style messages."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from . import anthropic_replay as replay
from .anthropic_request import (
    cache_body,
    cache_tools,
    request_citation,
    request_text,
    user_message_parts,
)
from .anthropic_stream import (
    AnthropicStream,
    stream_body,
    stream_event,
    stream_response,
    stream_start,
)
from .common import (
    EMPTY_ANSWER,
    MALFORMED,
    MalformedResponse,
    is_empty_answer,
    is_empty_text_block,
    is_forced_choice,
    malformed,
    name_text,
    replayable_with,
    response_object,
    sanitize,
    stream_cut,
    to_json,
    turn,
    unique_id,
    usage,
)
from .parts import from_anthropic, is_parts, to_anthropic, tool_result_blocks

__all__ = [
    *("omissions", "omit", "refused_part"),  # see anthropic_replay
    "cache_body",  # prompt caching and the request shape of blocks: see anthropic_request
    "cache_tools",
    "request_citation",
    "user_message_parts",
    "url",
    "headers",
    "user_message",
    "body",
    "parse_response",
    "tool_result_messages",
    "stream_body",
    "AnthropicStream",
    "stream_start",
    "stream_event",
    "stream_response",
    "stream_turn",
]

VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


KEY_ENV = ("ANTHROPIC_API_KEY",)  # where a client finds its key
# The body fields the loop sets on every request: request_params may not name them.
OWNED_PARAMS = ("model", "messages", "tools", "stream", "system")


def tool_entry(t: Mapping) -> FrozenMap:
    """Return one tool map's declaration in a request body's `tools`."""
    return FrozenMap(
        {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
    )


def encode_tools(toolkit: Any) -> Sequence:
    """Return the `tools` list of a request body (a toolkit keeps them, built on register)."""
    if not toolkit:
        return ()
    made = toolkit.get("wire") or {}
    return (
        made["anthropic"]
        if "anthropic" in made
        else pvector(tool_entry(t) for t in toolkit["tools"])
    )


def url(base_url: str) -> str:
    """Return the messages URL; `/v1` is appended only when the base lacks it.

    >>> url("https://api.anthropic.com"), url("http://h/v1/")
    ('https://api.anthropic.com/v1/messages', 'http://h/v1/messages')
    """
    base = base_url.rstrip("/")
    return (base if base.endswith("/v1") else base + "/v1") + "/messages"


def headers(api_key: str | None) -> dict:
    """Return the auth and version headers."""
    h = {"anthropic-version": VERSION}
    if api_key:
        h["x-api-key"] = api_key
    return h


def user_message(text: str) -> FrozenMap:
    """Return a user message."""
    return FrozenMap({"role": "user", "content": text})


def body(model: str, messages: Sequence, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return a request body: `system` only when non-empty, `tools` only when any.

    `tools` is already in wire shape (`encode_tools(toolkit)`), encoded once per run.
    `messages` must be replayable (see `replayable`: the flow cleans a history once,
    when it is loaded, not on every request). System messages a transcript holds (a
    seeded or translated conversation keeps them) are lifted into `system`, ahead of
    the client's own, in their order; the transcript itself keeps them.
    """
    messages, lifted = _lift_system(messages)
    system = "\n\n".join(x for x in (*lifted, system) if x)
    out: dict = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS, "messages": messages}
    if system:
        out["system"] = system
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
    choice, auto = params["tool_choice"], {"type": "auto"}
    if isinstance(choice, Mapping) and "disable_parallel_tool_use" in choice:
        auto["disable_parallel_tool_use"] = choice["disable_parallel_tool_use"]
    return {**params, "tool_choice": FrozenMap(auto)}


def with_output(params: Mapping, spec: Mapping) -> dict:
    """Return request params asking for an answer in the structured-output `spec`
    (core.output): `output_config.format` of type json_schema (other output_config kept)."""
    given = params.get("output_config") if params else None
    config = {
        **(given or {}),
        "format": FrozenMap({"type": "json_schema", "schema": spec["schema"]}),
    }
    return {**params, "output_config": FrozenMap(config)}


def _system_text(m: Mapping) -> str:
    content = m.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple, PVector)):
        return ""  # a stored value of no known shape says nothing
    return "".join(
        b["text"]
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _lift_system(messages: Sequence) -> tuple[Sequence, tuple[str, ...]]:
    """Return (the messages without system ones, their texts): the same object if none."""
    if not any(m.get("role") in _SYSTEM_ROLES for m in messages):
        return messages, ()
    texts = tuple(_system_text(m) for m in messages if m.get("role") in _SYSTEM_ROLES)
    return [m for m in messages if m.get("role") not in _SYSTEM_ROLES], texts


_SYSTEM_ROLES = frozenset({"system", "developer"})


def replayable(messages: Sequence) -> Sequence:
    """Return the messages the API accepts: the same object when nothing is dropped (an
    unsigned thinking block stays where it led to an answer: see anthropic_replay)."""
    if any(map(replay.lone_thinking, messages)):  # rare: a transcript saved before that rule
        messages = [replay.led_only(m) for m in messages]
    return replayable_with(messages, _needs_cleaning, fix_block=_request_block)


# What a request leaves out where the server refuses it (see core.flow: omitted).
omissions, omit, refused_part = replay.omissions, replay.omit, replay.refused_part


def _request_block(b: Any) -> Any:
    return request_text(b) if isinstance(b, Mapping) and b.get("type") == "text" else b


def _needs_cleaning(m: Mapping) -> bool:
    content = m.get("content")
    if type(content) is str:  # the hot path: text content, non-empty unless an empty answer
        return not content and m.get("role") == "assistant"
    if content is None:
        return m.get("role") == "assistant"
    return isinstance(content, (list, tuple, PVector)) and (
        any(is_empty_text_block(b) or _cut_citations(b) for b in content) or is_empty_answer(m)
    )


def _cut_citations(b: Any) -> bool:
    # A block stored before citations were cut to their request shape (see request_text).
    return isinstance(b, Mapping) and b.get("type") == "text" and request_text(b) is not b


_ID_OK = re.compile(r"[a-zA-Z0-9_-]+")


def _block(b: Any, i: int) -> Mapping | None:
    """Return a response block as it may be replayed (None: dropped, an empty text block)."""
    if not isinstance(b, Mapping):
        raise MalformedResponse(f"content[{i}] is a JSON {type(b).__name__}, not an object")
    kind = b.get("type")
    if not isinstance(kind, str):  # stored, it would be sent back: every request block has one
        raise MalformedResponse(f"content[{i}].type is not a string")
    if kind == "text":
        if not isinstance(b.get("text"), str):
            raise MalformedResponse(f"content[{i}].text is not a string")
        return request_text(b) if b["text"].strip() else None
    if kind != "tool_use":  # (an unsigned thinking block is judged with what follows it)
        return b
    # A tool_use block must replay: a string id the API accepts, a name, an object input.
    bid, name, given = b.get("id"), b.get("name"), b.get("input", {})
    fixed = {
        "id": bid if isinstance(bid, str) and _ID_OK.fullmatch(bid) else _call_id(bid, i),
        "name": _replay_name(name),
        "input": given if isinstance(given, Mapping) else {},
    }
    if all(b.get(k) is v for k, v in fixed.items()):
        return b
    return {**b, **fixed}


def _replay_name(name: Any) -> str:
    """Return a tool_use name the API takes back (1 to 200 characters): a string as it
    came (the loop reports an unknown tool), cut to 200; a non-string as its JSON text
    sanitized; none or an empty one as "_unnamed" (an empty name refused every request)."""
    text = name if isinstance(name, str) else sanitize(name_text(name))
    return text[:200] or "_unnamed"


def _call_id(given: Any, i: int) -> str:
    return sanitize(given) if isinstance(given, str) and given else f"toolu_{i}"


def parse_response(data: Mapping | bytes | str) -> FrozenMap:
    """Return the normalized turn of a messages response (an object, or its JSON).

    Anything malformed (bad or too deep JSON, wrong shapes) is a ProviderError
    (`MalformedResponse`, also a ValueError). Empty text blocks are dropped; an answer
    with no blocks left is kept as `{"role": "assistant", "content": ""}`, which
    `body()` leaves out of later requests.

    >>> t = parse_response({"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
    ...                     "usage": {"input_tokens": 5, "output_tokens": 2}})
    >>> t["text"], t["usage"]["prompt_tokens"], t["usage"]["total_tokens"]
    ('hi', 5, 7)
    """
    try:
        return _parse_response(response_object(data))
    except MALFORMED as e:
        raise malformed(e) from None


def _parse_response(data: Mapping) -> FrozenMap:
    content = data.get("content")
    if content is not None and not isinstance(content, (list, tuple, PVector)):
        raise MalformedResponse(f"content is a JSON {type(content).__name__}, not an array")
    given = list(content or ())
    blocks = _unique_ids([b for b in (_block(b, i) for i, b in enumerate(given)) if b is not None])
    blocks = replay.led(blocks)  # cut while thinking (max_tokens): what led nothing goes
    text = "".join(b["text"] for b in blocks if b.get("type") == "text")
    calls = [
        # The call keeps what the model sent (a non-object input is reported back to
        # it as invalid arguments); the stored block has an object the API accepts.
        {"id": b["id"], "name": b["name"], "arguments": raw.get("input", {})}
        for b, raw in _tool_uses(blocks, given)
    ]
    u = data.get("usage")
    stop, model = data.get("stop_reason"), data.get("model")
    stop = stop if isinstance(stop, str) else None
    return turn(
        {"role": "assistant", "content": blocks} if blocks else EMPTY_ANSWER,
        text,
        calls,
        _usage(u if isinstance(u, Mapping) else {}),
        stop,
        model if isinstance(model, str) else None,
        end=_ENDS.get(stop),
        refusal=text if stop == "refusal" else None,
    )


def _unique_ids(blocks: list) -> list:
    """Return the blocks with distinct tool_use ids (a repeated one gets `id_2`, ...)."""
    taken: set = set()
    out = []
    for b in blocks:
        if b.get("type") == "tool_use":
            new = unique_id(b["id"], taken, 64)
            b = b if new == b["id"] else {**b, "id": new}
        out.append(b)
    return out


# stop_reason -> how the loop ends a turn without tool calls (see common.turn)
# (every truncation the API defines ends the run incomplete: see steps._ending)
_ENDS = {"max_tokens": "max_tokens", "model_context_window_exceeded": "max_tokens",
         "pause_turn": "pause"}  # fmt: skip


def _usage(u: Mapping) -> FrozenMap:
    """Return the usage of a response: prompt_tokens counts cached input too (billed)."""
    read, write = u.get("cache_read_input_tokens"), u.get("cache_creation_input_tokens")
    if read is None and write is None:  # the usual case without prompt caching
        return usage(u.get("input_tokens"), u.get("output_tokens"))
    prompt = sum(x for x in (u.get("input_tokens"), read, write)
                 if isinstance(x, int) and not isinstance(x, bool) and x > 0)  # fmt: skip
    return usage(prompt, u.get("output_tokens"), cache_read=read, cache_write=write)


def _tool_uses(blocks: list, given: list) -> list[tuple[Mapping, Mapping]]:
    # Pair each kept tool_use block with the block the provider sent (same order).
    sent = [b for b in given if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    kept = [b for b in blocks if b.get("type") == "tool_use"]
    return list(zip(kept, sent, strict=True))


def tool_result_messages(calls: Sequence[Mapping], results: Sequence[Mapping]) -> list[FrozenMap]:
    """Return ONE user message holding a tool_result block per call, in call order."""
    blocks = pvector(
        FrozenMap(
            {
                "type": "tool_result",
                "tool_use_id": c["id"],
                "content": _result_content(r["output"]),
                "is_error": bool(r["is_error"]),
            }
        )
        for c, r in zip(calls, results, strict=True)
    )
    return [FrozenMap({"role": "user", "content": blocks})] if blocks else []


def _result_content(output: Any) -> Any:
    # Text as it is; content parts as text, image and document blocks (core.tool_output).
    if isinstance(output, str):
        return output
    return tool_result_blocks(output) if is_parts(output) else to_json(output).decode()


# ---- streaming: SSE events -> deltas (anthropic_stream) -> the same normalized turn


def stream_turn(acc: AnthropicStream) -> FrozenMap:
    """Return the normalized turn of a finished stream: exactly what parse_response gives.

    Tool arguments are the parsed input (no fragments: the content_block_start input);
    input JSON cut off at max_tokens stays the raw text, which the loop reports back
    to the model as invalid arguments. A stream that ended without `message_stop` (cut
    short, or a 200 with no event) is a ProviderError marked `network` (see
    common.stream_cut).
    """
    if not acc.done:
        raise stream_cut("no message_stop")
    try:
        response, raw = stream_response(acc)
    except MALFORMED as e:
        raise malformed(e, "stream") from None
    t = parse_response(response)
    if not any(r is not None for r in raw):
        return t
    calls = pvector(
        c if r is None else c.set("arguments", r) for c, r in zip(t["tool_calls"], raw, strict=True)
    )
    return t.set("tool_calls", calls)


def valid_call_id(id: str) -> bool:
    """Return whether a tool use id meets the messages API's rule (`^[a-zA-Z0-9_-]+$`)."""
    return _ID_OK.fullmatch(id) is not None


# The neutral content part <-> this dialect's block (see parts.py).
to_part, from_part = to_anthropic, from_anthropic
