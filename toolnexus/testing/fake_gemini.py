"""The fake provider's Gemini dialect (`POST .../models/{model}:generateContent`, and
`:streamGenerateContent?alt=sse`), whole and streamed (pure), and its request rules.

The script's replies are the fake provider's neutral ones ("content", "tool_calls",
"usage", "raw_usage", "finish"), plus Gemini's shapes, as the live API sends them:
  "thinking": [{"thinking": str}, ...]   `thought: true` parts before the answer
  "signature": str | False   the thoughtSignature of the turn's first call (or of the
                             text when there is no call); default "sig-<n>", False: none
  "blocked": reason          no candidate: `promptFeedback.blockReason`
  "refusal": str             finishReason SAFETY, the text as its finishMessage
A call has an `id` only where the script gives one (the Developer API mostly sends none).
Neutral finishes are Gemini's: "length" is MAX_TOKENS, "content_filter" SAFETY.
A streamed reply's text comes in pieces, one chunk each, its signature on the first
("signature_apart": True: on an empty part of its own after them, as Gemini 3 sends
it); "stream_error" becomes an error chunk halfway through.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from . import gemini_schema
from .fakes import Fake, Flourishes

__all__ = [
    "gemini_response",
    "gemini_stream",
    "gemini_error",
    "validate_gemini_request",
    "is_gemini_path",
    "is_stream_path",
    "gemini_refusal",
    "FAKE",
]

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}
_FINISH = {
    "length": "MAX_TOKENS",
    "max_tokens": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "stop": "STOP",
    "end_turn": "STOP",
    "tool_calls": "STOP",
    "tool_use": "STOP",
}
# A Google RPC status for each HTTP status the fake answers with.
STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def is_gemini_path(path: str) -> bool:
    """Return whether a request path is a Gemini model method."""
    return ":generateContent" in path or ":streamGenerateContent" in path


def is_stream_path(path: str) -> bool:
    """Return whether a Gemini request asks for a stream (by its URL, not its body)."""
    return ":streamGenerateContent" in path


def _signature(reply: Mapping, seq: int) -> str | None:
    given = reply.get("signature")
    if given is False:
        return None
    return given or base64.b64encode(f"sig-{seq}".encode()).decode()


def _args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return {"raw": arguments}
    return arguments


def _parts(reply: Mapping, seq: int) -> list[dict]:
    out: list[dict] = [
        {"text": t["thinking"], "thought": True} for t in reply.get("thinking") or ()
    ]
    sig = _signature(reply, seq)
    if reply.get("content"):
        out.append({"text": reply["content"]})
    for i, c in enumerate(reply.get("tool_calls") or ()):
        call = {"name": c["name"], "args": _args(c["arguments"])}
        if c.get("id"):
            call = {"id": c["id"], **call}
        part: dict = {"functionCall": call}
        if i == 0 and sig:
            part["thoughtSignature"] = sig
        out.append(part)
    if sig and not reply.get("tool_calls") and reply.get("content"):
        out[-1] = {**out[-1], "thoughtSignature": sig}
    return out


def _usage(reply: Mapping) -> dict:
    if reply.get("raw_usage"):
        return dict(reply["raw_usage"])
    u = reply.get("usage") or DEFAULT_USAGE
    return {
        "promptTokenCount": u["prompt_tokens"],
        "candidatesTokenCount": u["completion_tokens"],
        "totalTokenCount": u["prompt_tokens"] + u["completion_tokens"],
    }


def gemini_response(reply: Mapping, model: str = "fake-model", seq: int = 0) -> dict:
    """Return the GenerateContentResponse of a reply."""
    out: dict = {
        "candidates": [],
        "usageMetadata": _usage(reply),
        "modelVersion": model,
        "responseId": f"fake{seq}resp",
    }
    if reply.get("blocked"):
        out["promptFeedback"] = {"blockReason": reply["blocked"]}
        return out
    finish = reply.get("finish") or ("SAFETY" if reply.get("refusal") else None)
    content: dict = {"role": "model", "parts": _parts(reply, seq)}
    out["candidates"] = [
        {"content": content, "finishReason": _FINISH.get(finish, finish or "STOP"), "index": 0}
    ]
    if reply.get("refusal"):  # what a blocked answer says (finishMessage)
        out["candidates"][0]["finishMessage"] = reply["refusal"]
    return out


def _sse(data: Mapping) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\r\n\r\n".encode()


def gemini_stream(
    reply: Mapping, model: str = "fake-model", seq: int = 0, *, piece: int = 5
) -> list[bytes]:
    """Return the SSE events (bytes each) of a Gemini stream of a reply: one chunk per
    piece of text, each call whole in its own chunk, the finishReason on the last."""
    whole = gemini_response(reply, model, seq)
    if not whole["candidates"]:
        return [_sse(whole)]
    candidate = whole["candidates"][0]
    chunks: list[list] = []
    for p in candidate["content"]["parts"]:
        text, sig = p.get("text"), p.get("thoughtSignature")
        if isinstance(text, str) and "functionCall" not in p:
            bare = {k: v for k, v in p.items() if k not in ("text", "thoughtSignature")}
            pieces = [{**bare, "text": text[i : i + piece]} for i in range(0, len(text), piece)]
            if sig and reply.get("signature_apart"):  # Gemini 3: on an empty last part
                pieces.append({"text": "", "thoughtSignature": sig})
            elif sig:  # on the first piece of the text, as gemini-2.5 sends it
                pieces[0] = {**pieces[0], "thoughtSignature": sig}
            chunks += [[x] for x in pieces]
        else:
            chunks.append([p])
    chunks = chunks or [[{"text": ""}]]
    # A first chunk of metadata only: a failure cued after it reaches no consumer.
    out = [_sse({k: v for k, v in whole.items() if k != "candidates"})]
    for n, parts in enumerate(chunks):
        c: dict = {"content": {"role": "model", "parts": parts}, "index": 0}
        if n == len(chunks) - 1:
            c["finishReason"] = candidate["finishReason"]
            c.update({k: v for k, v in candidate.items() if k == "finishMessage"})
        out.append(_sse({**whole, "candidates": [c]}))
    if reply.get("stream_error") is not None:
        err = reply["stream_error"]
        data = {"error": {"code": 500, "message": err.get("message"), "status": "INTERNAL"}}
        out = [*out[: max(1, len(out) // 2)], _sse(data)]
    return out


def gemini_error(status: int, message: str) -> bytes:
    """Return an error body in Google's envelope."""
    error = {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}
    return json.dumps({"error": error}).encode()


def gemini_refusal(problems: Sequence[str]) -> bytes:
    """Return the 400 body of an invalid request, in Google's envelope."""
    return gemini_error(400, "; ".join(problems))


def _served_stream(reply: Mapping, body: Mapping, model: str, seq: int) -> list[bytes]:
    return gemini_stream(reply, model, seq)


# ---- the documented rules (what the schema cannot say) ---------------------------------


def _list(value: Any) -> list:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _calls(content: Any) -> list:
    parts = _list(content.get("parts")) if isinstance(content, Mapping) else []
    return [
        p["functionCall"]
        for p in parts
        if isinstance(p, Mapping) and isinstance(p.get("functionCall"), Mapping)
    ]


def _answers(content: Any) -> list:
    parts = _list(content.get("parts")) if isinstance(content, Mapping) else []
    return [
        p["functionResponse"]
        for p in parts
        if isinstance(p, Mapping) and isinstance(p.get("functionResponse"), Mapping)
    ]


def _key(x: Mapping) -> Any:
    return x.get("id") or x.get("name")


def validate_gemini_request(body: Mapping) -> list[str]:
    """Return the problems of a generateContent body (empty when valid): contents is a
    non-empty list of "user"/"model" contents with parts; every functionCall is answered
    by a functionResponse (its id, else its name) in the next content, a user one, and
    every functionResponse answers a call of the content before it, with a name.

    >>> validate_gemini_request({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    []
    """
    contents = _list(body.get("contents"))
    if not contents:
        return ["contents: must be a non-empty list"]
    problems = []
    for i, c in enumerate(contents):
        if not isinstance(c, Mapping) or c.get("role") not in ("user", "model"):
            problems.append(f"contents[{i}].role: must be 'user' or 'model'")
            continue
        if not _list(c.get("parts")):
            problems.append(f"contents[{i}].parts: must not be empty")
        before = _calls(contents[i - 1]) if i else []
        asked = [_key(x) for x in before]
        for a in _answers(c):
            if not a.get("name"):
                problems.append(f"contents[{i}]: a functionResponse needs its function's name")
            if _key(a) in asked:
                asked.remove(_key(a))
            else:
                problems.append(
                    f"contents[{i}]: functionResponse {_key(a)!r} answers no"
                    " functionCall of the content before it"
                )
        if before and (c.get("role") != "user" or asked):
            problems.append(
                f"contents[{i - 1}]: functionCall {asked or [_key(x) for x in before]!r}"
                " not answered in the next (user) content"
            )
    last = contents[-1]
    if _calls(last):
        problems.append(f"contents[{len(contents) - 1}]: its functionCall parts are not answered")
    return problems


# ---- drawn transcripts (testing.strategies) ------------------------------------------


def _tool_round(draw: Any, ids: list[str], kit: Any) -> list[dict]:
    """Return a tool round: maybe a thought and text, the calls (the first signed), then
    one message of their functionResponse parts."""
    st = kit.st
    made = [{"functionCall": {"id": i, "name": draw(kit.names), "args": draw(kit.args)}}
            for i in ids]  # fmt: skip
    made[0] = {**made[0], "thoughtSignature": "c2lnbmVk"}
    lead = [{"text": draw(kit.text), "thought": True}] if draw(st.booleans()) else []
    lead += [{"text": draw(kit.text)}] if draw(st.booleans()) else []
    answers = [{"functionResponse": {"id": c["functionCall"]["id"], "name": c["functionCall"][
        "name"], "response": {"output": draw(kit.text)}}} for c in made]  # fmt: skip
    return [{"role": "assistant", "parts": [*lead, *made]}, {"role": "tool", "parts": answers}]


def _answer(draw: Any, n: int, kit: Any) -> dict | None:
    """Return, half the time, a final answer of its parts, a signature on the text."""
    if not draw(kit.st.booleans()):
        return None
    return {"role": "assistant", "parts": [{"text": draw(kit.text), "thoughtSignature": "c2ln"}]}


FAKE = Fake(
    name="gemini",
    path=":generateContent",  # .../models/{model}:generateContent, the model in the path
    serves=is_gemini_path,
    stream_path=is_stream_path,  # :streamGenerateContent?alt=sse
    response=gemini_response,
    stream=_served_stream,
    refusal=gemini_refusal,
    rules=validate_gemini_request,
    spec=(gemini_schema.DOCUMENT, "GenerateContentRequest"),
    spec_validator=gemini_schema.schema_validator,  # JSON Schema $defs, read closed
    spec_problems=gemini_schema.schema_problems,
    flourishes=Flourishes(calls=_tool_round, answer=_answer),
)
