"""Shared pure helpers of the wire codecs: usage maps, JSON encoding of frozen values,
and the boundary that turns anything malformed a provider sends into a ProviderError."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from json.encoder import c_make_encoder, encode_basestring
from operator import is_
from typing import Any

from pyrsistent import PVector, pvector

from ..errors import ProviderError
from ..frozen import _PVECTOR, FrozenMap, freeze, keep_json, known_json
from .inband import inband_error
from .jsonload import load

_VECTORS = frozenset({list, tuple, _PVECTOR})  # what a body's "messages" may be

__all__ = [
    "sanitize",
    "refusal_text",
    "usage",
    "add_usage",
    "ZERO_USAGE",
    "DETAILS",
    "stream_cut",
    "to_json",
    "encode_body",
    "message_text",
    "turn",
    "frozen_turn",
    "MalformedResponse",
    "MALFORMED",
    "malformed",
    "response_object",
    "text_of",
    "name_text",
    "is_empty_answer",
    "is_empty_text_block",
    "EMPTY_ANSWER",
    "replayable_with",
    "is_forced_choice",
    "unique_id",
    "merge_extra",
]


class MalformedResponse(ProviderError, ValueError):
    """A provider's bytes that are not what its dialect says (bad JSON, wrong shapes).

    A ProviderError, and a ValueError too, so a driver that catches ValueError around
    decoding still wraps it with its URL and status. Its message never quotes the
    payload (a codec does not know the secrets a payload may echo).
    """


# What a decoder may raise on a wrong shape: converted at each public decode function.
MALFORMED = (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError,
             RecursionError)  # fmt: skip


def malformed(e: BaseException, what: str = "response") -> ProviderError:
    """Return the ProviderError for an exception raised while decoding a provider's `what`."""
    if isinstance(e, ProviderError):
        return e
    return MalformedResponse(f"malformed {what}: {type(e).__name__}")


def response_object(data: Any) -> Mapping:
    """Return a response body as a JSON object: decoded (bounded) when given as text/bytes.

    An error envelope in place of an answer is the ProviderError it describes (inband)."""
    if isinstance(data, (bytes, bytearray, str)):
        try:
            data = load(data)
        except ValueError as e:
            raise MalformedResponse(f"response is not readable JSON ({e})") from None
    if type(data) is not dict and not isinstance(data, Mapping):  # exact type first: no ABC
        raise MalformedResponse(f"response is a JSON {type(data).__name__}, not an object")
    failed = inband_error(data)  # a 200 whose body is an error envelope (OpenRouter, vLLM)
    if failed is not None:
        raise failed
    return data


def text_of(content: Any, where: str = "content") -> str:
    """Return message content as text: a string, None (""), or a list of text parts joined.

    Parts that are not text (images, refusals, ...) are skipped.

    >>> text_of([{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}])
    'Hello, world'
    >>> text_of(None), text_of("hi")
    ('', 'hi')
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, (list, tuple, PVector)):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping) and part.get("type") in ("text", "output_text"):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
        return "".join(out)
    raise MalformedResponse(f"{where} is a JSON {type(content).__name__}, not text")


def name_text(name: Any) -> str:
    """Return a tool name as a string: JSON text for a non-string (then an unknown tool).

    >>> name_text("add"), name_text(["a", 1]), name_text(None)
    ('add', '["a",1]', '')
    """
    if isinstance(name, str):
        return name
    if name is None:
        return ""
    return to_json(name).decode("utf-8")


def _count(x: Any) -> int:
    # Token counts from a provider: junk (a string, NaN, 1e400, a list) counts as 0.
    if type(x) is int:  # the usual count: no ABC look
        return max(x, 0)
    if isinstance(x, bool):
        return 0
    if isinstance(x, int):
        return max(x, 0)
    if isinstance(x, float) and math.isfinite(x):
        return max(int(x), 0)
    return 0


ZERO_USAGE = FrozenMap({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})

# The usage details a provider may report beside the three counts: kept only where given.
DETAILS = ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def usage(
    prompt: Any,
    completion: Any,
    *,
    cache_read: Any = None,
    cache_write: Any = None,
    reasoning: Any = None,
) -> FrozenMap:
    """Return a usage map from token counts (missing or junk counts are 0).

    `prompt` counts every input token (cached ones included); the details
    (`cache_read_tokens`, `cache_write_tokens`, `reasoning_tokens`) are present only when
    the provider reported them (not None).

    >>> usage(3, None) == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
    True
    >>> usage(3, 1, cache_read=2)["cache_read_tokens"]
    2
    """
    p, c = _count(prompt), _count(completion)
    out = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    if cache_read is None and cache_write is None and reasoning is None:
        return FrozenMap(out)  # the usual case: no details reported
    for key, value in zip(DETAILS, (cache_read, cache_write, reasoning), strict=True):
        if value is not None:
            out[key] = _count(value)
    return FrozenMap(out)


def add_usage(a: Mapping, b: Mapping) -> FrozenMap:
    """Return the sum of two usage maps (a detail either reports is summed, missing is 0)."""
    out = {k: a.get(k, 0) + b.get(k, 0) for k in ("prompt_tokens", "completion_tokens")}
    out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    for key in DETAILS:
        if key in a or key in b:
            out[key] = a.get(key, 0) + b.get(key, 0)
    return FrozenMap(out)


def _plain(o: Any) -> Any:
    # json's C encoder calls this only for values it cannot encode itself (a FrozenMap
    # is a dict to it): vectors become a shallow list and it recurses on.
    if type(o) is _PVECTOR or isinstance(o, (PVector, tuple)):  # the exact type: no ABC look
        return list(o)
    if isinstance(o, Mapping):  # a read-only map kept in its order (a provider tool's)
        return dict(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=_plain, allow_nan=False
)
# json's C encoder made once: JSONEncoder.encode builds a new one per call (and a dict of
# markers for its circularity check), which costs more than encoding a short message.
# Frozen values cannot hold a cycle; a plain one that did would raise RecursionError.
_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, _plain, encode_basestring, None, ":", ",", False, False, False)
)


def _encode(value: Any) -> str:
    # NaN and Infinity are refused (allow_nan off): json would write them bare, which no
    # provider parses, so a request holding one would be refused with 400 on every turn.
    try:
        if _C_ENCODE is None:  # pragma: no cover - an interpreter without json's C speedups
            return _ENCODER.encode(value)
        return "".join(_C_ENCODE(value, 0))
    except ValueError as e:
        raise ValueError(f"not JSON: a value is NaN or Infinity ({e})") from None


def to_json(value: Any) -> bytes:
    """Return compact UTF-8 JSON of a value that may hold pmaps and pvectors (a RunResult,
    a stream event, a transcript): one pass of json's C encoder, nothing thawed first.

    >>> from pyrsistent import pvector
    >>> from toolnexus.core.frozen import FrozenMap
    >>> to_json({"usage": FrozenMap({"prompt_tokens": 1}), "calls": pvector(["é"])}).decode()
    '{"usage":{"prompt_tokens":1},"calls":["é"]}'
    """
    return _encode(value).encode("utf-8")


def message_text(value: Any) -> str:
    """Return the compact JSON text of one value (a message) as a request body carries it."""
    return _encode(value)


def message_json(value: Any) -> bytes:
    """Return `message_text(value)` as UTF-8: what a request body carries for a message,
    kept once per message so a body is one join of them (a lone surrogate raises
    UnicodeEncodeError). A FrozenMap keeps its text (see `keep_json`): encoded once."""
    if type(value) is FrozenMap:
        text = known_json(value)
        return text if text is not None else keep_json(value, _encode(value).encode("utf-8"))
    return _encode(value).encode("utf-8")


def _message_texts(items: Sequence, messages: Sequence | None, texts: Sequence | None) -> list:
    # The JSON (UTF-8) of each of the body's messages. They end with the state's (a system
    # message may lead), so item k is message k - lead: one that is still the state's
    # own value reuses its text.
    if texts is None or messages is None:
        return [*map(message_json, items)]
    if items is messages:  # the body holds the state's own messages: every text is theirs
        return [*texts]
    lead = len(items) - len(messages)
    if lead >= 0 and all(map(is_, itertools.islice(items, lead, None), messages)):
        # The usual case, checked and gathered at C speed: the body holds the state's own
        # messages after its lead (a system message), so every text is reused.
        return [*map(message_json, items[:lead]), *texts]
    # Some items moved (a lifted system message, a body_transform): each message of the
    # state the body still holds reuses its text, wherever it now stands.
    # Both keep their order, so one forward scan (a few messages ahead at most) finds it.
    parts, j, n = [], 0, len(messages)
    for m in items:
        k = next((k for k in range(j, min(j + _AHEAD, n)) if messages[k] is m), None)
        if k is None:
            parts.append(message_json(m))
        else:
            parts.append(texts[k])
            j = k + 1
    return parts


_AHEAD = 8  # how far past the last match a moved message is looked for


def encode_body(
    body: Mapping,
    messages: Sequence | None = None,
    texts: Sequence[bytes] | None = None,
    known: Mapping[str, tuple[Any, str | bytes]] | None = None,
) -> bytes:
    """Return the JSON of a request body; `texts[i]` (`message_json` of `messages[i]`) is
    reused for `messages[i]` when given.

    `known` maps a key to (value, its JSON text): the text is reused while the body still
    holds that very value (a run's tools, encoded once per run).

    >>> from pyrsistent import pvector
    >>> from toolnexus.core.frozen import FrozenMap
    >>> m = FrozenMap({"content": "hi"})
    >>> encode_body({"model": "m", "messages": pvector([m])}, pvector([m]), [b'{"content":"hi"}'])
    b'{"model":"m","messages":[{"content":"hi"}]}'
    >>> encode_body({"messages": [], "n": 1})
    b'{"messages":[],"n":1}'
    """
    # The messages' JSON (most of the body: the whole history) is joined ONCE, by ",", with
    # the rest of the body glued to the first and the last: the body is the one copy of
    # the history made per request.
    before: list[str] = []
    after: list[str] = []
    texts_at, key_at = None, ""
    for key, value in body.items():
        # A key is a string: json's own C function writes it (what _encode would call).
        name = (encode_basestring(key) if type(key) is str else _encode(key)) + ":"
        hit = known.get(key) if known else None
        if hit is not None and hit[0] is value:
            text = hit[1] if type(hit[1]) is str else hit[1].decode()
        elif (
            key == "messages"
            and texts_at is None
            and (type(value) in _VECTORS or isinstance(value, (list, tuple, PVector)))
        ):
            texts_at, key_at = _message_texts(value, messages, texts), name
            continue
        else:
            text = _encode(value)
        (before if texts_at is None else after).append(name + text)
    if texts_at is None:
        return ("{" + ",".join(before) + "}").encode("utf-8")
    head = ("{" + ",".join([*before, key_at + "["])).encode("utf-8")
    tail = (",".join(["]", *after]) + "}").encode("utf-8")
    if not texts_at:
        return head + tail
    texts_at[0] = head + texts_at[0]
    texts_at[-1] = texts_at[-1] + tail
    return b",".join(texts_at)


def turn(
    message: Mapping,
    text: str,
    tool_calls,
    use: Mapping,
    finish: Any,
    model: Any,
    *,
    end: str | None = None,
    refusal: str | None = None,
) -> FrozenMap:
    """Return a normalized model turn, the one shape every codec decodes into.

    `message` is the assistant message to append to the transcript (provider shape);
    `tool_calls` is a sequence of {id, name, arguments} where `arguments` is raw: a
    JSON string (openai) or a mapping (anthropic); the loop parses it. `finish` is the
    provider's own stop reason, verbatim; `end` says what it means to the loop when the
    turn has no tool calls: None (the answer), "max_tokens" or "content_filter" (cut
    short by the token limit or a content filter: the run ends incomplete), "incomplete"
    (cut short for another reason) or "pause" (the provider paused a long turn: the loop
    continues it).
    `refusal` is the text of a refusal (None: not one).
    """
    calls = freeze(tool_calls if isinstance(tool_calls, PVector) else list(tool_calls))
    return frozen_turn(freeze(message), text, calls, use, finish, model, end, refusal)


def frozen_turn(
    message: FrozenMap,
    text: str,
    tool_calls: PVector,
    use: Mapping,
    finish: Any,
    model: Any,
    end: str | None,
    refusal: str | None,
) -> FrozenMap:
    """Return the model turn of `turn` from values already frozen (no walk, no copy)."""
    # A decoder that builds its maps frozen calls this: freezing them again would walk
    # every map of the turn only to find nothing to change.
    return FrozenMap(
        {
            "message": message,
            "text": text,
            "tool_calls": tool_calls,
            "usage": use,
            "finish": finish,
            "model": model,
            "end": end,
            "refusal": refusal,
        }
    )


def refusal_text(error: Any) -> str | None:
    """Return a 400's words (its body and message, lower-cased), else None: what the
    codecs' `refused_part` reads to tell which part of a request a server refused.

    >>> refusal_text(ProviderError("Bad Thing", status=400)), refusal_text(ValueError())
    ('bad thing', None)
    """
    if getattr(error, "status", None) != 400:
        return None
    return f"{getattr(error, 'body', '') or ''} {error}".strip().lower()


def stream_cut(what: str) -> ProviderError:
    """Return the error of a stream that ended before its dialect's final event.

    Marked a network failure: the flow retries it while nothing reached the consumer.
    """
    return ProviderError(f"the stream ended before its final event ({what})", network=True)


_CONCAT = frozenset({"text", "summary", "data", "content", "thinking", "transcript"})


def _same_index(last: Any, item: Any) -> bool:
    return (
        isinstance(item, Mapping)
        and isinstance(last, Mapping)
        and item.get("index") is not None
        and item.get("index") == last.get("index")
    )


def merge_extra(old: Any, new: Any, concat: bool = True) -> Any:
    """Return a stream's field `old` extended by a delta's `new` (plain values).

    Strings are joined when `concat` (`reasoning_content` arrives in pieces), else the
    new one wins; lists extend, an item with the `index` of the last one merging into
    it (OpenRouter's `reasoning_details` fragments: their text joined); maps merge key
    by key (only text-like fields joined: text, data, transcript, ...), a None never
    erasing what came.

    >>> merge_extra("Let me ", "think")
    'Let me think'
    >>> merge_extra([{"index": 0, "type": "reasoning.text", "text": "a"}],
    ...             [{"index": 0, "type": "reasoning.text", "text": "b"}])
    [{'index': 0, 'type': 'reasoning.text', 'text': 'ab'}]
    """
    if new is None:
        return old
    if old is None:
        return new
    if isinstance(old, str) and isinstance(new, str):
        return old + new if concat else new
    if isinstance(old, (list, tuple, PVector)) and isinstance(new, (list, tuple, PVector)):
        out = list(old)
        for item in new:
            if _same_index(out[-1] if out else None, item):
                last = out[-1]
                out[-1] = {**last, **{k: merge_extra(last.get(k), v, k in _CONCAT)
                                      for k, v in item.items()}}  # fmt: skip
            else:
                out.append(item)
        return out
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        # Inside a map only text-like fields join (an `id` repeated per chunk must not).
        return {**old, **{k: merge_extra(old.get(k), v, k in _CONCAT) for k, v in new.items()}}
    return new


# An empty answer (no text, no tool calls) is kept in a transcript in this one shape,
# valid in both dialects' message formats; `body()` of each codec leaves it out of a
# request, since neither API accepts an assistant message without content.
EMPTY_ANSWER = FrozenMap({"role": "assistant", "content": ""})


def is_empty_answer(message: Mapping) -> bool:
    """Return whether a message is an assistant message with no content and no tool calls.

    >>> is_empty_answer({"role": "assistant", "content": []})
    True
    >>> is_empty_answer({"role": "assistant", "content": [{"type": "text", "text": ""}]})
    True
    >>> is_empty_answer({"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]})
    False
    """
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return False
    content = message.get("content")
    if isinstance(content, str) or content is None:
        return not content
    if isinstance(content, (list, tuple, PVector)):
        return all(is_empty_text_block(b) for b in content)
    return False  # some other shape: not ours to judge


def is_empty_text_block(block: Any) -> bool:
    """Return whether a content block is a text block without text, or only whitespace
    (APIs reject those: "text content blocks must contain non-whitespace text")."""
    if not isinstance(block, Mapping) or block.get("type") != "text":
        return False
    text = block.get("text")
    return not text or (isinstance(text, str) and not text.strip())


def replayable_with(
    messages: Sequence, needs_cleaning: Any, fix_block: Any = None, fix_message: Any = None
) -> Sequence:
    """Return `messages` without empty answers and empty text blocks (what providers
    reject), each kept block passed through `fix_block(block)` when given; the same object
    when `needs_cleaning(message)` finds nothing to clean.

    `fix_message(message)`, when given, may return the request shape of a message that
    needs cleaning (a stored refusal), kept in its place; None lets the usual cleaning apply.
    """
    bad = [i for i, m in enumerate(messages) if needs_cleaning(m)]
    if not bad:  # the usual case: one cheap pass, no copy
        return messages
    out = list(messages)
    for i in reversed(bad):
        m = out[i]
        fixed = fix_message(m) if fix_message is not None else None
        if fixed is not None:
            out[i] = fixed
        elif is_empty_answer(m):
            del out[i]
        elif isinstance(m.get("content"), (list, tuple, PVector)):
            parts = [p for p in m["content"] if not is_empty_text_block(p)]
            if fix_block is not None:  # None: a block the provider would refuse, dropped
                fixed_parts = (fix_block(p) for p in parts)
                parts = [freeze(p) for p in fixed_parts if p is not None]
            out[i] = FrozenMap(m).set("content", pvector(parts)) if parts else m
    return out


def is_forced_choice(choice: Any) -> bool:
    """Return whether a `tool_choice` (either dialect's shape) forces a tool call: anything
    but auto and none ("required", "any", a named tool, OpenAI's allowed_tools).

    >>> is_forced_choice("required"), is_forced_choice({"type": "tool", "name": "x"})
    (True, True)
    >>> is_forced_choice("auto"), is_forced_choice({"type": "none"}), is_forced_choice(None)
    (False, False, False)
    """
    if choice is None:
        return False
    kind = choice.get("type") if isinstance(choice, Mapping) else choice
    if isinstance(choice, Mapping) and kind == "allowed_tools":
        return (choice.get("allowed_tools") or {}).get("mode") == "required"
    return kind not in ("auto", "none")


def unique_id(id: str, taken: set, limit: int = 40) -> str:
    """Return `id`, or when `taken` holds it already a variant that it does not hold
    (`id_2`, `id_3`, ... cut to `limit` characters); add the result to `taken`.

    Two calls of one turn sharing an id would go out with the same id (Anthropic refuses
    duplicate tool_use ids) and their results could not be told apart.

    >>> taken = set()
    >>> unique_id("call_1", taken), unique_id("call_1", taken), unique_id("call_1", taken)
    ('call_1', 'call_1_2', 'call_1_3')
    """
    new, n = id, 1
    while new in taken:
        n += 1
        suffix = f"_{n}"
        new = id[: limit - len(suffix)] + suffix
    taken.add(new)
    return new


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize(s: str) -> str:
    """Return `s` with every character outside [a-zA-Z0-9_-] replaced by '_'.

    >>> sanitize("get weather/v2")
    'get_weather_v2'
    """
    return _UNSAFE.sub("_", s)
