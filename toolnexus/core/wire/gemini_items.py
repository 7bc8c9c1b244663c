"""Gemini's messages <-> translation's neutral items (see translate.py and writers.py).

Reading keeps what another dialect can carry: text and media parts, calls with their
ids, results. A `thought` part and every `thoughtSignature` are Gemini's own reasoning:
they never reach another dialect. Writing makes Gemini parts of another dialect's turns:
its reasoning (Anthropic thinking, Responses reasoning) is dropped, and the first call
of a turn no Gemini model made carries the documented placeholder signature, which
Gemini 3 needs on a replayed call ("skip_thought_signature_validator").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from ..frozen import FrozenMap
from . import gemini as G
from . import parts as P
from . import responses as R
from .common import to_json
from .responses_items import closer, keeper

__all__ = ["items", "native", "write", "gathers", "close", "keep_results",
           "FOREIGN_SIGNATURE"]  # fmt: skip

FOREIGN_SIGNATURE = "skip_thought_signature_validator"
_LIST = (list, tuple, PVector)
_REASONING = frozenset({"thinking", "redacted_thinking", "reasoning", "gemini_parts"})


# ---- reading -------------------------------------------------------------------------


def native(message: Mapping) -> bool:
    """Return whether a message is right for Gemini as it is: its own shape, or plain
    non-empty text of a user or the assistant."""
    if G.owns(message):
        return True
    if set(message) - {"role", "content"} or message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    return isinstance(content, str) and bool(content)


def _result(answer: Mapping, ids: Mapping) -> tuple:
    i = answer.get("id")
    response = answer.get("response") if isinstance(answer.get("response"), Mapping) else {}
    error = "error" in response and "output" not in response
    value = response.get("error" if error else "output", response or "")
    if _text_blocks(value):  # a result that was a list of text parts: kept a list
        return ("result", ids.get(i, i), pvector(FrozenMap(b) for b in value), error)
    text = value if isinstance(value, str) else to_json(value).decode("utf-8")
    media = [G.from_part(p) for p in answer.get("parts") or () if isinstance(p, Mapping)]
    media = [m for m in media if m is not None]
    if not media:
        return ("result", ids.get(i, i), text, error)
    blocks = [P.to_anthropic(FrozenMap({"type": "text", "text": text}))] if text else []
    blocks += [P.to_anthropic(m, "text") for m in media]
    return ("result", ids.get(i, i), pvector(blocks), error)


def items(m: Mapping, ids: Mapping) -> list[tuple]:
    """Return the neutral items of a Gemini message (a prompt, a turn, its results)."""
    parts = [p for p in m.get("parts") or () if isinstance(p, Mapping)]
    role = m.get("role")
    if role == "tool":
        return [
            _result(p["functionResponse"], ids)
            for p in parts
            if isinstance(p.get("functionResponse"), Mapping)
        ]
    content = [c for c in map(G.from_part, parts) if c is not None]
    if role != "assistant":
        return [("user", content)] if content else []
    calls = []
    for p in parts:
        call = p.get("functionCall")
        if isinstance(call, Mapping):
            i = call.get("id")
            args = call.get("args") if isinstance(call.get("args"), Mapping) else FrozenMap()
            calls.append((ids.get(i, i), call.get("name") or "", args, {}))
    # The turn as it came, for a rewrite back to Gemini (ids remapped): thoughts and
    # signatures stay where they were. Every other writer drops it (writers._REASONING_OF).
    thought = "".join(p["text"] for p in parts
                      if p.get("thought") is True and isinstance(p.get("text"), str))  # fmt: skip
    mine = {"type": "gemini_parts", "parts": pvector(parts)}
    kept = [FrozenMap({**mine, "thinking": thought} if thought else mine)]  # (core.genai reads it)
    return [("assistant", content, calls, kept, {})]


def gathers(message: Mapping) -> bool:
    """Return True: a results message holds all of its turn's functionResponse parts."""
    return True


# Error answers for calls left open: merged into the turn's results message, or a new one.
close = closer(G.output_item, G.results_message, G.result_items)


def _is_answer(part: object) -> bool:
    return isinstance(part, Mapping) and isinstance(part.get("functionResponse"), Mapping)


# A results message with only the answers `wanted(call_id)` accepts (None: none left).
keep_results = keeper("parts", _is_answer, lambda part: part["functionResponse"].get("id"))


# ---- writing -------------------------------------------------------------------------


def _args(raw: Any) -> Mapping:
    if isinstance(raw, Mapping):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return FrozenMap()
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    return value if isinstance(value, Mapping) else FrozenMap({"INVALID_JSON": raw})


def _parts(parts: Sequence[Mapping], policy: str) -> list:
    out = []
    for p in parts:
        if p.get("type") == "text":
            if p.get("text"):
                out.append(G.to_part(FrozenMap({"type": "text", "text": p["text"]}), policy))
        elif p.get("type") in P.MEDIA:
            out.append(G.to_part(p, policy))
        else:
            out.append(G.to_part(P.unsupported(p, "gemini", policy, "no such content there")))
    return out


def _text_blocks(value: Any) -> bool:
    return isinstance(value, (list, tuple, PVector)) and bool(value) and all(
        isinstance(b, Mapping) and set(b) == {"type", "text"} and b["type"] == "text"
        and isinstance(b["text"], str) for b in value)  # fmt: skip


def _result_value(content: Any, policy: str) -> tuple[Any, list]:
    if content is None or isinstance(content, str):
        return content or "", []
    parts = [_part_of(b) for b in content if isinstance(b, Mapping)]
    if parts and all(p.get("type") == "text" for p in parts):  # text parts stay a list
        said = [FrozenMap({"type": "text", "text": p.get("text") or ""}) for p in parts]
        return pvector(said), []
    text = "".join(p["text"] for p in parts if p.get("type") == "text" and p.get("text"))
    media = _parts([p for p in parts if p.get("type") != "text"], policy)
    return text, [m for m in media if "text" not in m]


def _part_of(block: Mapping) -> Mapping:
    """Return the neutral part of another dialect's result block (unknown: a bare part)."""
    part = P.from_anthropic(block) or P.from_openai(block) or R.from_part(block)
    return part if part is not None else FrozenMap({"type": block.get("type") or "unknown"})


def _as_it_came(given: Sequence, calls: list) -> list[FrozenMap]:
    """Return a Gemini turn's own parts with its calls' new ids, in order."""
    ids = iter(i for i, *_ in calls)
    out = []
    for p in given:
        call = p.get("functionCall") if isinstance(p, Mapping) else None
        if isinstance(call, Mapping):
            p = FrozenMap(p).set("functionCall", FrozenMap(call).set("id", next(ids)))
        out.append(p)
    return out


def _assistant(parts: list, calls: list, extras: list, own: Mapping, policy: str) -> list:
    mine = [b for b in extras if b.get("type") == "gemini_parts"]
    if mine:  # a Gemini turn rewritten for its new ids
        return [
            FrozenMap({"role": "assistant", "parts": pvector(_as_it_came(mine[0]["parts"], calls))})
        ]
    refusal = own.get("refusal")  # an OpenAI refusal is what the model said: text here
    if isinstance(refusal, str) and refusal:
        parts = [*parts, FrozenMap({"type": "text", "text": refusal})]
    for b in extras:
        kind = b.get("type")
        server = isinstance(kind, str) and (
            kind.endswith("_tool_result")
            or kind in ("server_tool_use", "mcp_tool_use", "container_upload")
        )
        if kind not in _REASONING and not server:  # (gemini_parts: handled above)
            parts = [
                *parts,
                P.unsupported(FrozenMap({"type": kind or "unknown"}), "gemini", policy),
            ]
    # Reasoning imported unsigned (core.genai) stays as a thought; a request leaves it out.
    made = [FrozenMap({"text": b["thinking"], "thought": True}) for b in extras
            if b.get("type") == "thinking" and not b.get("signature")
            and isinstance(b.get("thinking"), str) and b["thinking"]]  # fmt: skip
    made += _parts(parts, policy)
    for n, (i, name, raw, _) in enumerate(calls):
        call = {"functionCall": FrozenMap({"id": i, "name": name, "args": _args(raw)})}
        if n == 0:  # a call Gemini did not make has no signature of its own
            call["thoughtSignature"] = FOREIGN_SIGNATURE
        made.append(FrozenMap(call))
    return [FrozenMap({"role": "assistant", "parts": pvector(made)})] if made else []


def write(items: list[tuple], policy: str) -> tuple[list[FrozenMap], list[str]]:
    """Return neutral items as Gemini messages (system messages stay: the request lifts
    them into `systemInstruction`), and no system text lifted out."""
    out: list = []
    results: list = []  # the functionResponse parts waiting to go as one message

    def flush() -> None:
        if results:
            out.append(G.results_message(results))
            results.clear()

    for item in items:
        kind = item[0]
        if kind == "result":
            _, i, content, error = item
            text, media = _result_value(content, policy)
            made = G.output_item(i, text, "", bool(error))
            if media:
                made = made.set(
                    "functionResponse", made["functionResponse"].set("parts", pvector(media))
                )
            results.append(made)
            continue
        flush()
        if kind == "system":
            if item[1]:
                out.append(FrozenMap({"role": "system", "content": item[1]}))
        elif kind == "user":
            content = item[1]
            if isinstance(content, str):
                if content:
                    out.append(FrozenMap({"role": "user", "content": content}))
            elif made := _parts(content, policy):
                out.append(FrozenMap({"role": "user", "parts": pvector(made)}))
        else:
            out.extend(_assistant(*item[1:], policy))
    flush()
    return out, []
