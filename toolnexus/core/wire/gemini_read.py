"""Decoding Gemini's answers, whole and streamed (pure): GenerateContentResponse -> the
normalized turn. `gemini` (the dialect's codec) exposes these as its own.

Every finishReason ends honestly: STOP is the answer; MAX_TOKENS (with or without parts)
is cut short ("max_tokens"); the safety family (SAFETY, RECITATION, PROHIBITED_CONTENT,
BLOCKLIST, SPII, IMAGE_*, MODEL_ARMOR) and a prompt blocked by `promptFeedback.blockReason`
are a refusal (the turn's `refusal`, as Anthropic's stop_reason "refusal": the exchange
is not kept as context); the rest (MALFORMED_FUNCTION_CALL, OTHER, ...) is
"incomplete", never a silent done.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from .common import (
    EMPTY_ANSWER,
    MALFORMED,
    MalformedResponse,
    malformed,
    name_text,
    response_object,
    stream_cut,
    to_json,
    turn,
    unique_id,
    usage,
)
from .sse import load_json, stream_error

__all__ = ["GeminiStream", "parse_response", "stream_start", "stream_event", "stream_turn", "ENDS"]

_LIST = (list, tuple, PVector)

# finishReason -> how the loop ends a turn without tool calls (common.turn's `end`)
_FILTERED = (
    "SAFETY",
    "RECITATION",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "MODEL_ARMOR",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "JAILBREAK",
)
ENDS = MappingProxyType(
    {"STOP": None, "MAX_TOKENS": "max_tokens", **dict.fromkeys(_FILTERED, "refusal")}
)


def _end(reason: str | None) -> str | None:
    if reason is None:
        return None
    return ENDS.get(reason, "incomplete")  # MALFORMED_FUNCTION_CALL, OTHER, ...


def _usage(u: Any) -> FrozenMap:
    """Return the usage of usageMetadata: thoughts are billed output, cached input is input."""
    if not isinstance(u, Mapping):
        return usage(None, None)
    prompt = [u.get("promptTokenCount"), u.get("toolUsePromptTokenCount")]
    output = [u.get("candidatesTokenCount"), u.get("thoughtsTokenCount")]
    return usage(
        sum(x for x in prompt if _count(x)),
        sum(x for x in output if _count(x)),
        cache_read=u.get("cachedContentTokenCount"),
        reasoning=u.get("thoughtsTokenCount"),
    )


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def _call_id(seed: str, n: int, taken: set) -> str:
    """Return the id of a call the API left without one: the response's id and the call's
    place when there is a response id, else a hash of the turn's parts (the same answer
    gives the same id in every process)."""
    base = f"call_{seed}_{n}" if seed else f"call_{n}"
    return unique_id(base[:64], taken, 64)


def _seed(data: Mapping, parts: Sequence) -> str:
    rid = data.get("responseId")
    if isinstance(rid, str) and rid and rid.replace("-", "").replace("_", "").isalnum():
        return rid[:40]
    return hashlib.blake2b(to_json(list(parts)), digest_size=6).hexdigest()


def _read_parts(data: Mapping, parts: Sequence) -> tuple[list, str, list]:
    """Return (parts as kept, the answer's text, calls) of a candidate's parts."""
    kept, texts, calls, taken = [], [], [], set()
    seed = None
    for n, p in enumerate(parts):
        if not isinstance(p, Mapping):
            raise MalformedResponse(f"parts[{n}] is a JSON {type(p).__name__}, not an object")
        call = p.get("functionCall")
        if isinstance(call, Mapping):
            given = call.get("id")
            if not (isinstance(given, str) and given):
                seed = _seed(data, parts) if seed is None else seed
                given = _call_id(seed, len(calls), taken)
            else:
                given = unique_id(given, taken, 64)
            name = name_text(call.get("name"))
            args = call.get("args", {})
            # Args that are not an object reach the tool (its error is fed back) but are
            # kept as {}: replayed as they came, the API would refuse every later turn.
            kept_args = args if isinstance(args, Mapping) else {}
            if given != call.get("id") or name != call.get("name") or kept_args is not args:
                fixed = {"id": given, "name": name, "args": kept_args}
                p = {**p, "functionCall": {**call, **fixed}}
            calls.append({"id": given, "name": name, "arguments": {} if args is None else args})
        elif isinstance(p.get("text"), str) and p.get("thought") is not True:
            texts.append(p["text"])
        kept.append(p)
    return kept, "".join(texts), calls


def _blocked(data: Mapping) -> str | None:
    feedback = data.get("promptFeedback")
    reason = feedback.get("blockReason") if isinstance(feedback, Mapping) else None
    return reason if isinstance(reason, str) and reason else None


def _parse_response(data: Mapping) -> FrozenMap:
    candidates = data.get("candidates")
    if candidates is not None and not isinstance(candidates, _LIST):
        raise MalformedResponse("candidates is not an array")
    first = candidates[0] if candidates else {}
    if not isinstance(first, Mapping):
        raise MalformedResponse("candidates[0] is not an object")
    content = first.get("content") if isinstance(first.get("content"), Mapping) else {}
    given = content.get("parts")
    if given is not None and not isinstance(given, _LIST):
        raise MalformedResponse("content.parts is not an array")
    parts, text, calls = _read_parts(data, given or ())
    reason = first.get("finishReason") if isinstance(first.get("finishReason"), str) else None
    blocked = _blocked(data)
    end = "refusal" if blocked else _end(reason)
    refusal = None
    if end == "refusal":  # said as a refusal, not as an answer (see common.turn)
        said = first.get("finishMessage") if isinstance(first.get("finishMessage"), str) else ""
        refusal, end = text or said or f"blocked by Gemini: {blocked or reason}", None
    message = {"role": "assistant", "parts": pvector(parts)} if parts else EMPTY_ANSWER
    model = data.get("modelVersion") if isinstance(data.get("modelVersion"), str) else None
    return turn(
        message,
        text,
        pvector(FrozenMap(c) for c in calls),
        _usage(data.get("usageMetadata")),
        blocked or reason,
        model,
        end=end,
        refusal=refusal,
    )


def parse_response(data: Mapping | bytes | str) -> FrozenMap:
    """Return the normalized turn of a GenerateContentResponse (an object, or its JSON).

    An error envelope is a ProviderError with Google's message and status (see inband).

    >>> t = parse_response({"candidates": [{"content": {"role": "model", "parts": [
    ...     {"text": "hi"}]}, "finishReason": "STOP"}], "usageMetadata": {
    ...     "promptTokenCount": 3, "candidatesTokenCount": 1, "thoughtsTokenCount": 2}})
    >>> t["text"], t["usage"]["completion_tokens"], t["end"]
    ('hi', 3, None)
    """
    try:
        return _parse_response(response_object(data))
    except MALFORMED as e:
        raise malformed(e) from None


# ---- streaming -------------------------------------------------------------------------


class GeminiStream(NamedTuple):
    """The accumulator of a Gemini stream: an immutable value (see stream_event).

    Each SSE event is a whole GenerateContentResponse holding the next parts; `parts`
    joins them (text onto the text before it, unless a signature comes with it: a
    signature stays on the part it came on, an empty last part too); `last` is the
    latest chunk (usage, model, ids); `reason` the finishReason or blockReason that ends it.
    """

    parts: PVector = pvector()
    last: Mapping = FrozenMap()
    reason: str | None = None
    finish_message: str | None = None


def stream_start() -> GeminiStream:
    """Return the accumulator of a stream that has delivered nothing yet."""
    return GeminiStream()


def _delta(**fields: Any) -> Mapping:
    return MappingProxyType(fields)


def _joins(last: Mapping, p: Mapping) -> bool:
    """Return whether a streamed text part continues the text part before it."""
    plain = {"text", "thought", "thoughtSignature"}
    return (
        isinstance(p.get("text"), str)
        and isinstance(last.get("text"), str)
        and not p.get("thoughtSignature")
        and set(p) <= plain
        and set(last) <= plain
        and bool(p.get("thought")) == bool(last.get("thought"))
    )


def _add(acc: GeminiStream, p: Mapping, n: int) -> tuple[GeminiStream, tuple]:
    if not isinstance(p, Mapping):
        raise MalformedResponse("a streamed part is not an object")
    parts = acc.parts
    if parts and _joins(parts[-1], p):
        last = parts[-1]
        parts = parts.set(-1, {**last, "text": last["text"] + p["text"]})
    else:
        parts = parts.append(p)
    acc = acc._replace(parts=parts)
    if isinstance(p.get("functionCall"), Mapping):
        call = p["functionCall"]
        return acc, (
            _delta(
                type="tool_call_start", index=n, id=call.get("id"), name=name_text(call.get("name"))
            ),
        )
    if isinstance(p.get("text"), str) and p["text"]:
        kind = "thinking" if p.get("thought") is True else "text"
        return acc, (_delta(type=kind, delta=p["text"]),)
    return acc, ()


def stream_event(acc: GeminiStream, event: Mapping) -> tuple[GeminiStream, tuple[Mapping, ...]]:
    """Return the accumulator after one SSE event and the deltas it carries ("text",
    "thinking", "tool_call_start"). An error chunk raises a ProviderError with Google's
    message; anything malformed is one too."""
    try:
        return _stream_event(acc, event)
    except MALFORMED as e:
        raise malformed(e, "stream event") from None


def _stream_event(acc: GeminiStream, event: Mapping) -> tuple[GeminiStream, tuple]:
    raw = event["data"]
    if not raw.strip() or raw.strip() == "[DONE]":
        return acc, ()
    data = load_json(raw)
    if "error" in data:
        raise stream_error(data)
    deltas: tuple = ()
    candidates = data.get("candidates") or ()
    first = candidates[0] if isinstance(candidates, _LIST) and candidates else {}
    content = first.get("content") if isinstance(first.get("content"), Mapping) else {}
    for p in content.get("parts") or ():
        acc, more = _add(acc, p, sum(1 for q in acc.parts if "functionCall" in q))
        deltas += more
    reason = first.get("finishReason") or _blocked(data)
    said = first.get("finishMessage")
    acc = acc._replace(
        last=data,
        reason=reason if isinstance(reason, str) else acc.reason,
        finish_message=said if isinstance(said, str) else acc.finish_message,
    )
    return acc, deltas


def stream_turn(acc: GeminiStream) -> FrozenMap:
    """Return the normalized turn of a finished stream: `parse_response` of the answer it
    stands for. A stream with no finishReason (cut short, or a 200 with no event) is a
    ProviderError marked `network` (see common.stream_cut)."""
    if acc.reason is None:
        raise stream_cut("no finishReason")
    candidate: dict = {"content": {"role": "model", "parts": list(acc.parts)}}
    if _blocked(acc.last) is None:
        candidate["finishReason"] = acc.reason
    if acc.finish_message:
        candidate["finishMessage"] = acc.finish_message
    response = {**acc.last, "candidates": [candidate]}
    return parse_response(response)
