"""The agent loop as pure step functions (sans-I/O); `flow.py` strings them together.

state = start(dialect, history, prompt)
while True:
    body  = request(state, ...)                # what to POST
    state, calls = on_turn(state, turn)        # the decoded model turn
    if not calls: break                        # status "done"
    state = on_results(state, calls, results, max_turns)  # may end "incomplete"
    if is_finished(state): break
result(state)

A state may carry "texts": the JSON of each message (UTF-8 bytes), parallel to
"messages", kept by the steps themselves so a request re-encodes only what is new (see
`request_content`). It is None for a client that never encodes (an in-process model).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PVector, pvector

from .calls import name_error, parse_arguments
from .frozen import _PVECTOR, FrozenMap, known_jsons
from .tool import tool_result
from .transcript import readable
from .wire import DIALECTS
from .wire.common import ZERO_USAGE, add_usage, encode_body, message_json, message_text
from .wire.view import prompt_message

# A loop state: a plain dict that no step mutates (each returns a new one). It lives for
# one run; everything that escapes it (messages, tool call records, the RunResult) is
# frozen. A dict copy costs a fraction of a pmap update, and this runs every turn.
State = Mapping[str, Any]  # pragma: no mutate (a type alias: read before a mutant is in)

__all__ = [
    "start",
    "request",
    "request_content",
    "with_messages",
    "on_turn",
    "on_results",
    "is_finished",
    "result",
    "parse_arguments",
    "invalid_result",
    "pending_request",
    "texts_of",
    "text_of",
    "fresh_messages",
    "kept_messages",
    "replayable_history",
]


def _vector(items: Sequence) -> PVector:
    return items if type(items) is _PVECTOR or isinstance(items, PVector) else pvector(items)


def texts_of(messages: Sequence[Mapping]) -> PVector:
    """Return the JSON of each message, UTF-8 (what a request body carries for it): the
    text a message keeps (read from a store's row, or encoded before) when it has one."""
    known = known_jsons(messages)
    if None not in known:  # the usual case after a load: nothing to encode
        return pvector(known)
    pairs = zip(known, messages, strict=True)
    return pvector([k if k is not None else text_of(m) for k, m in pairs])


def text_of(message: Mapping, what: str = "a message") -> bytes:
    """Return the JSON of one message, UTF-8; one holding a lone surrogate (half of a
    character, not UTF-8) is a TranscriptFormatError naming `what`."""
    try:
        return message_json(message)
    except UnicodeEncodeError:
        readable(message_text(message), what)  # raises, naming the surrogate
        raise


def start(
    dialect: str,
    history: Sequence,
    prompt: str | Sequence[Mapping],
    texts: Sequence[str] | None = None,
    *,
    on_unsupported_part: str = "error",
    max_part_bytes: int | None = None,
) -> State:
    """Return the initial loop state: `history` plus the user's prompt (text or parts).

    `texts`, when given, is the JSON text of each history message: the state then keeps
    the text of every message it gains, for `request_content`.
    """
    user = prompt_message(dialect, prompt, on_unsupported_part=on_unsupported_part,
                          max_part_bytes=max_part_bytes)  # fmt: skip
    return {
        "dialect": dialect,
        # A frozen history is shared, not copied: O(1) however long it is.
        "messages": _vector(history).append(user),
        "texts": None if texts is None else _vector(texts).append(text_of(user, "the prompt")),
        "fresh": 1,  # how many messages at the end this run added (the prompt, so far)
        "said": pvector(),  # every non-empty assistant text of the run, in order
        "turns": 0,
        "tool_calls": pvector(),
        "usage": ZERO_USAGE,
        "text": "",
        "model": None,
        "status": None,
        "limit": None,
        "pending": None,
        "stop_reason": None,  # the last model turn's own, verbatim
        "refusal": None,
        "paused": False,  # the last turn paused (pause_turn): the next one continues it
    }


def _grow(state: State, new: Sequence[Mapping]) -> dict:
    """Return the "messages" (and "texts") of `state` with `new` messages appended."""
    texts = state["texts"]
    return {
        "messages": state["messages"].extend(new),
        "texts": None if texts is None else texts.extend(map(text_of, new)),
        "fresh": state["fresh"] + len(new),
    }


def with_messages(state: State, messages: PVector) -> State:
    """Return the state with its messages replaced (a hook's rewrite), made replayable;
    texts follow."""
    messages = DIALECTS[state["dialect"]].replayable(messages)
    texts = None if state["texts"] is None else texts_of(messages)
    fresh = min(state["fresh"], len(messages))  # a rewrite keeps the run's own tail
    # A rewrite may change the history the run started from: its facts (core.loading)
    # no longer hold.
    # A rewrite replaces what the run saves, also after a failover (core.failover).
    return {**state, "messages": messages, "texts": texts, "fresh": fresh, "facts": None,
            "made": None}  # fmt: skip


def request(state: State, model: str, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return the request body for the next model call (`tools` in wire shape)."""
    return DIALECTS[state["dialect"]].body(model, state["messages"], tools, system, params)


def request_content(state: State, body: Mapping, known: Mapping | None = None) -> bytes:
    """Return the JSON bytes of `body` (as sent: streamed or not, transformed), reusing the
    state's text of each message it holds.

    Only messages of the state that the body still holds (the same values: a
    `body_transform` may have replaced some) reuse their text; anything else is encoded.
    `known` maps other keys to (value, text) already encoded (the run's tools).
    """
    return encode_body(body, state["messages"], state["texts"], known)


def _call(c: Mapping) -> dict:
    # A call lives for one turn inside the loop (hooks and events get their own maps):
    # a plain dict, read often, never changed (a rewrite makes a new one).
    args, error = parse_arguments(c["arguments"])
    name = c["name"]
    why = name_error(name)
    if why is not None:  # a model may send anything: never let it crash the run
        name, error = json.dumps(name, default=str)[:100], why
    return {"id": c["id"], "name": name, "args": args, "error": error}


def on_turn(
    state: State, turn: Mapping, max_turns: int | None = None, max_calls: int | None = None
) -> tuple[State, tuple[dict, ...]]:
    """Return the state after a model turn and the tool calls to run.

    Each call is {id, name, args, error}; a call with an `error` (bad arguments) is
    not executed: `invalid_result` is fed back instead. Without calls the run ends:
    "done", or "incomplete" when the answer was cut short (limit "max_tokens",
    "content_filter", or None for another truncation a provider names); a
    paused turn (turn["end"] == "pause") is continued (not finished) while turns are
    left under `max_turns`, else it ends "incomplete" with limit "max_turns"; the text
    of a continued answer is joined across its turns. Calls past `max_calls` are not run
    (`capped`): each is answered with an error result.
    """
    calls = capped(tuple([_call(c) for c in turn["tool_calls"]]), max_calls)
    turns = state["turns"] + 1
    paused = not calls and turn.get("end") == "pause"
    # A paused answer goes on in the next turn: its text is one answer across them.
    text = state["text"] + turn["text"] if state.get("paused") else turn["text"]
    changes = {
        **_grow(state, (turn["message"],)),
        "turns": turns,
        "usage": add_usage(state["usage"], turn["usage"]),
        "text": text,
        "paused": paused,
        "said": _said(state["said"], turn),
        "model": turn["model"] or state["model"],
        "stop_reason": turn.get("finish"),
        "refusal": turn.get("refusal"),
    }
    if not calls:
        changes.update(_ending(turn.get("end"), turns, max_turns))
    return {**state, **changes}, calls


# A turn's `end` (see wire.common.turn) that cuts the answer short -> the run's limit.
_TRUNCATED = {"max_tokens": "max_tokens", "content_filter": "content_filter", "incomplete": None}


def _said(said: PVector, turn: Mapping) -> PVector:
    """Return the run's assistant texts after a turn's (a refusal's text where it has no
    other: the message log keeps what the model said)."""
    spoken = turn["text"] or turn.get("refusal")
    return said.append(spoken) if spoken else said


def _ending(end: str | None, turns: int, max_turns: int | None) -> dict:
    """Return the status (and limit) of a turn without tool calls (none: continue)."""
    if end in _TRUNCATED:  # the answer was cut short: never "done"
        return {"status": "incomplete", "limit": _TRUNCATED[end]}
    if end == "pause":
        if max_turns is not None and turns >= max_turns:
            return {"status": "incomplete", "limit": "max_turns"}
        return {}
    return {"status": "done"}


def capped(calls: tuple[dict, ...], max_calls: int | None) -> tuple[dict, ...]:
    """Return the calls with those past `max_calls` marked not to run (an error each).

    >>> [c["error"] for c in capped(({"error": None}, {"error": None}), 1)]
    [None, 'not run: a model turn may call at most 1 tool(s)']
    """
    if max_calls is None or len(calls) <= max_calls:
        return calls
    why = f"not run: a model turn may call at most {max_calls} tool(s)"
    return calls[:max_calls] + tuple({**c, "error": why, "capped": True} for c in calls[max_calls:])


def invalid_result(call: Mapping) -> FrozenMap:
    """Return the error result fed back for a call that is not run: its arguments could
    not be used, or it was past the turn's cap on calls."""
    if call.get("capped"):
        return tool_result(f"Tool call {call['name']!r} {call['error']}", True)
    return tool_result(f"Invalid arguments for tool {call['name']!r}: {call['error']}", True)


def on_results(
    state: State, calls: Sequence[Mapping], results: Sequence[Mapping], max_turns: int
) -> State:
    """Return the state after the turn's tool results (in call order); may end `incomplete`."""
    codec = DIALECTS[state["dialect"]]
    records = [
        FrozenMap(
            {
                "id": c["id"],
                "name": c["name"],
                "args": c["args"] if c["args"] is not None else FrozenMap(),
                "output": r["output"],
                "is_error": r["is_error"],
                "metadata": r.get("metadata", FrozenMap()),
            }
        )
        for c, r in zip(calls, results, strict=True)
    ]
    changes = {
        **_grow(state, codec.tool_result_messages(calls, results)),
        "tool_calls": state["tool_calls"].extend(records),
    }
    if state["turns"] >= max_turns:
        changes.update(status="incomplete", limit="max_turns")
    return {**state, **changes}


def is_finished(state: State) -> bool:
    """Return whether the run has ended."""
    return state["status"] is not None


def replayable_history(state: State) -> tuple[PVector, PVector | None]:
    """Return (the run's transcript as the next request would replay it, its texts).

    The history a run started from was made replayable when loaded; of the messages the
    run added only an empty final answer may not be (it is left out), so only those are
    cleaned: O(new messages).
    """
    messages, texts = state["messages"], state["texts"]
    fresh = fresh_messages(state)
    clean = DIALECTS[state["dialect"]].replayable(fresh)
    if clean is fresh:
        return messages, texts
    start = len(messages) - len(fresh)
    kept = messages[:start].extend(clean)
    return kept, None if texts is None else texts[:start].extend(map(text_of, clean))


def kept_messages(state: State, keep_refused: bool = False) -> tuple[PVector, PVector]:
    """Return (the transcript to save, the messages of this run it holds): the whole one,
    or, when the run ended in a refusal, the one it started from (a refused exchange
    would be the next turn's context, and refused again) unless `keep_refused`."""
    messages = state["messages"]
    if state.get("refusal") is None or keep_refused:
        return messages, fresh_messages(state)
    return messages[: len(messages) - state["fresh"]], pvector()


def fresh_messages(state: State) -> PVector:
    """Return the messages this run added (its prompt, turns and tool results)."""
    messages = state["messages"]
    return messages[len(messages) - state["fresh"] :]


def result(state: State, model: str) -> FrozenMap:
    """Return the RunResult of a finished state."""
    return FrozenMap(
        {
            "text": state["text"],
            "messages": state["messages"],
            "tool_calls": state["tool_calls"],
            "tool_call_count": len(state["tool_calls"]),
            "turns": state["turns"],
            "usage": state["usage"],
            "model": state["model"] or model,
            "status": state["status"],
            "limit": state["limit"],
            "pending": state["pending"],
            "output": state.get("output"),  # structured output, parsed (core.output)
            "stop_reason": state.get("stop_reason"),
            "refusal": state.get("refusal"),
            "served_by": state.get("served_by"),  # the client of the last turn (failover)
        }
    )


def pending_request(result: Mapping) -> FrozenMap | None:
    """Return the suspension request a tool result carries (metadata.pending), if any."""
    req = (result.get("metadata") or {}).get("pending")
    if req is None:  # the usual result: no ABC look
        return None
    return req if isinstance(req, Mapping) and req.get("id") is not None else None
