"""The agent loop as pure step functions (sans-I/O); drivers post, execute and store.

state = start(dialect, history, prompt)
while True:
    body  = request(state, ...)                # what to POST
    state, calls = on_turn(state, turn)        # the decoded model turn
    if not calls: break                        # status "done"
    state = on_results(state, calls, results, max_turns)  # may end "incomplete"
    if is_finished(state): break
result(state)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyrsistent import PMap, PVector, pmap, pvector

from .tool import tool_result
from .wire import DIALECTS
from .wire.common import ZERO_USAGE, add_usage

# A loop state: a plain dict that no step mutates (each returns a new one). It lives for
# one run; everything that escapes it (messages, tool call records, the RunResult) is
# frozen. A dict copy costs a fraction of a pmap update, and this runs every turn.
State = Mapping[str, Any]

__all__ = [
    "start",
    "request",
    "on_turn",
    "on_results",
    "is_finished",
    "result",
    "parse_arguments",
]


def _vector(items: Sequence) -> PVector:
    return items if isinstance(items, PVector) else pvector(items)


def start(dialect: str, history: Sequence, prompt: str) -> State:
    """Return the initial loop state: `history` plus the user's prompt.

    A state is a plain dict that no step mutates: each returns a new one (cheaper than
    a pmap for a value that lives for one run; what escapes a run is frozen).
    """
    return {
        "dialect": dialect,
        # A frozen history is shared, not copied: O(1) however long it is.
        "messages": _vector(history).append(DIALECTS[dialect].user_message(prompt)),
        "turns": 0,
        "tool_calls": pvector(),
        "usage": ZERO_USAGE,
        "text": "",
        "model": None,
        "status": None,
        "limit": None,
        "pending": None,
    }


def request(state: State, model: str, tools: Sequence, system: str, params: Mapping) -> dict:
    """Return the request body for the next model call (`tools` in wire shape)."""
    return DIALECTS[state["dialect"]].body(model, state["messages"], tools, system, params)


def parse_arguments(raw: Any) -> tuple[PMap | None, str | None]:
    """Return (args, None) for a JSON object, else (None, why) the model can read.

    >>> parse_arguments('{"a": 1}')[0]["a"], parse_arguments("")[0]
    (1, pmap({}))
    >>> parse_arguments("[1]")[1]
    'arguments must be a JSON object, got list'
    """
    if isinstance(raw, str):
        if not raw.strip():
            return pmap(), None
        try:
            raw = json.loads(raw)
        except ValueError as e:
            return None, f"arguments are not valid JSON ({e})"
    if not isinstance(raw, Mapping):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}"
    if all(type(v) in _SCALARS for v in raw.values()):
        return pmap(raw), None  # flat, the usual case: nothing nested to freeze
    from pyrsistent import freeze

    return freeze(dict(raw), strict=False), None


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _call(c: Mapping) -> dict:
    # A call lives for one turn inside the loop (hooks and events get their own maps):
    # a plain dict, read often, never changed (a rewrite makes a new one).
    args, error = parse_arguments(c["arguments"])
    return {"id": c["id"], "name": c["name"], "args": args, "error": error}


def on_turn(state: State, turn: Mapping) -> tuple[State, tuple[dict, ...]]:
    """Return the state after a model turn and the tool calls to run (none: the run is done).

    Each call is {id, name, args, error}; a call with an `error` (bad arguments) is
    not executed: `invalid_result` is fed back instead.
    """
    calls = tuple(_call(c) for c in turn["tool_calls"])
    changes = {
        "messages": state["messages"].append(turn["message"]),
        "turns": state["turns"] + 1,
        "usage": add_usage(state["usage"], turn["usage"]),
        "text": turn["text"],
        "model": turn["model"] or state["model"],
    }
    if not calls:
        changes["status"] = "done"
    return {**state, **changes}, calls


def invalid_result(call: Mapping) -> PMap:
    """Return the error result fed back for a call whose arguments could not be used."""
    return tool_result(f"Invalid arguments for tool {call['name']!r}: {call['error']}", True)


def on_results(
    state: State, calls: Sequence[Mapping], results: Sequence[Mapping], max_turns: int
) -> State:
    """Return the state after the turn's tool results (in call order); may end `incomplete`."""
    codec = DIALECTS[state["dialect"]]
    records = [
        pmap(
            {
                "id": c["id"],
                "name": c["name"],
                "args": c["args"] if c["args"] is not None else pmap(),
                "output": r["output"],
                "is_error": r["is_error"],
                "metadata": r.get("metadata", pmap()),
            }
        )
        for c, r in zip(calls, results, strict=True)
    ]
    changes = {
        "messages": state["messages"].extend(codec.tool_result_messages(calls, results)),
        "tool_calls": state["tool_calls"].extend(records),
    }
    if state["turns"] >= max_turns:
        changes.update(status="incomplete", limit="max_turns")
    return {**state, **changes}


def is_finished(state: State) -> bool:
    """Return whether the run has ended."""
    return state["status"] is not None


def result(state: State, model: str) -> PMap:
    """Return the RunResult of a finished state."""
    return pmap(
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
        }
    )


# ---- the whole run as a generator of effects (one loop for every driver) ------
#
# `run_flow` is the loop with hooks, retries, suspension and metrics, written once.
# It does no I/O: it yields effect tuples and receives their results, like httpx's
# auth_flow. The sync, streaming and async drivers differ only in how they perform:
#
#   ("clock",)                -> a monotonic time in seconds
#   ("llm", body, turn_no)    -> the decoded turn (a driver throws ProviderError in)
#   ("sleep", seconds)        -> None (a retry's backoff)
#   ("tools", toolkit, calls) -> [(result, seconds), ...] in call order, run concurrently
#   ("wait_for", request)     -> the host's answer {id, ok, data?}
#   ("event", event)          -> None (a stream event for the consumer)
#   ("metric", event)         -> None (an on_metric record)
#
# The generator returns the final state.


def _event(kind: str, **fields: Any) -> PMap:
    return pmap({"type": kind, **fields})


def _apply_before_llm(hooks: Mapping, state: State, tk: Any, model: str) -> tuple[State, Any]:
    hook = hooks.get("before_llm")
    if hook is None:
        return state, tk
    out = hook(
        {"messages": state["messages"], "tools": tk, "model": model, "turn": state["turns"] + 1}
    )
    if not out:
        return state, tk
    if "messages" in out:
        from .transcript import freeze_transcript

        state = {**state, "messages": freeze_transcript(out["messages"])}
    if "tools" in out:
        tk = out["tools"]
    return state, tk


def _before_tool(hooks: Mapping, call: Mapping, turn_no: int) -> tuple[Mapping, PMap | None]:
    """Return the (maybe rewritten) call and a short-circuit result, if the hook gave one."""
    hook = hooks.get("before_tool")
    if hook is None or call["error"] is not None:
        return call, None
    out = hook({"name": call["name"], "args": call["args"], "id": call["id"], "turn": turn_no})
    if not out:
        return call, None
    if "result" in out:
        return call, _as_result(out["result"])
    if "args" in out:
        from pyrsistent import freeze

        return {**call, "args": freeze(dict(out["args"]), strict=False)}, None
    return call, None


def _after_tool(hooks: Mapping, call: Mapping, result: PMap, turn_no: int) -> PMap:
    hook = hooks.get("after_tool")
    if hook is None:
        return result
    payload = {"name": call["name"], "args": call["args"], "result": result, "id": call["id"]}
    out = hook({**payload, "turn": turn_no})
    return _as_result(out["result"]) if out and "result" in out else result


def _as_result(value: Any) -> PMap:
    if isinstance(value, Mapping) and "output" in value:
        return tool_result(value["output"], value.get("is_error", False), value.get("metadata"))
    return tool_result(value if isinstance(value, str) else json.dumps(value, default=str))


def pending_request(result: Mapping) -> PMap | None:
    """Return the suspension request a tool result carries (metadata.pending), if any."""
    req = (result.get("metadata") or {}).get("pending")
    return req if isinstance(req, Mapping) and req.get("id") is not None else None


def _llm_turn(cfg: Mapping, body: Mapping, turn_no: int):
    """Yield effects until one model turn is decoded, retrying as the policy says."""
    from .errors import ProviderError
    from .retry import plan

    attempt = 0
    while True:
        attempt += 1
        t0 = yield ("clock",)
        try:
            turn = yield ("llm", body, turn_no)
        except ProviderError as e:
            t1 = yield ("clock",)
            status = str(e.status) if e.status is not None else "error"
            yield ("metric", {"event": "llm", "model": cfg["model"], "status": status,
                              "duration_s": t1 - t0})  # fmt: skip
            wait = plan(e, attempt, retries=cfg["retries"], base_ms=cfg["retry_base_ms"],
                        on_error=cfg.get("on_error"))  # fmt: skip
            if wait is None:
                raise
            yield ("sleep", wait)
            continue
        t1 = yield ("clock",)
        yield ("metric", {"event": "llm", "model": cfg["model"], "status": "ok",
                          "duration_s": t1 - t0, "usage": turn["usage"]})  # fmt: skip
        return turn


def _run_calls(cfg: Mapping, tk: Any, calls: Sequence[Mapping], turn_no: int):
    """Yield effects to run one turn's calls (hooks, concurrency, suspension); return
    (results in call order, the pending request or None)."""
    hooks = cfg["hooks"]
    prepared = [_before_tool(hooks, c, turn_no) for c in calls]
    to_run = [c for c, short in prepared if short is None]
    ran = iter((yield ("tools", tk, to_run)) if to_run else ())
    results, pending = [], None
    for call, short in prepared:
        result = short
        if result is None:
            result, seconds = next(ran)
            yield ("metric", {"event": "tool", "tool": call["name"], "source": _source(tk, call),
                              "is_error": result["is_error"], "duration_s": seconds})  # fmt: skip
        request = pending_request(result)
        if request is not None:
            if pending is not None:
                result = tool_result("Not run: another request of this turn is pending.", True)
            elif cfg.get("wait_for") is None:
                pending = request
                if cfg["events"]:
                    yield ("event", _event("pending", request=request))
            else:
                result = yield from _resume(cfg, tk, call, request)
        result = _after_tool(hooks, call, result, turn_no)
        results.append(result)
    return results, pending


def _resume(cfg: Mapping, tk: Any, call: Mapping, request: Mapping):
    """Yield effects to wait for the host's answer and re-run the suspended call once."""
    if cfg["events"]:  # a stream shows the request before the host is asked
        yield ("event", _event("pending", request=request))
    answer = yield ("wait_for", request)
    if not answer or not answer.get("ok"):
        return tool_result(f"Request {request['id']!r} was declined or not answered.", True)
    again = {**call, "args": call["args"].set("_resume", pmap(answer))}
    ((result, _),) = yield ("tools", tk, [again])
    if pending_request(result) is not None:
        return tool_result(f"Tool {call['name']!r} suspended again after its answer.", True)
    return result


def _source(tk: Any, call: Mapping) -> str:
    t = tk["index"].get(call["name"]) if tk else None
    return t["source"] if t is not None else "unknown"


def run_flow(cfg: Mapping, state: State, tk: Any):
    """The whole run as a generator of effects; returns the final state.

    `cfg` holds model, system (a function of the toolkit), params, hooks, max_turns,
    retries, retry_base_ms, on_error, wait_for, transform (body -> body) and events
    (whether to yield stream events at all: a plain run skips building them).
    """
    codec = DIALECTS[state["dialect"]]
    hooks = cfg["hooks"]
    encoded_for, tools = None, None
    while True:
        state, tk = _apply_before_llm(hooks, state, tk, cfg["model"])
        if tk is not encoded_for:  # encoded once per run (again only if a hook swaps tools)
            encoded_for, tools = tk, codec.encode_tools(tk)
        body = cfg["transform"](
            request(state, cfg["model"], tools, cfg["system"](tk), cfg["params"])
        )
        turn = yield from _llm_turn(cfg, body, state["turns"] + 1)
        if hooks.get("after_llm"):
            hooks["after_llm"](
                {"response": turn, "model": cfg["model"], "turn": state["turns"] + 1}
            )
        state, calls = on_turn(state, turn)
        events = cfg["events"]
        if events:
            yield ("event", _event("usage", usage=turn["usage"]))
        if not calls:
            return state
        for c in calls if events else ():
            yield ("event", _event("tool_call", id=c["id"], name=c["name"], args=c["args"]))
        to_exec = [c for c in calls if c["error"] is None]
        results, pending = yield from _run_calls(cfg, tk, to_exec, state["turns"])
        ran = iter(results)
        ordered = [next(ran) if c["error"] is None else invalid_result(c) for c in calls]
        for c, r in zip(calls, ordered, strict=True) if events else ():
            yield ("event", _event("tool_result", id=c["id"], name=c["name"],
                                   output=r["output"], is_error=r["is_error"]))  # fmt: skip
        state = on_results(state, calls, ordered, cfg["max_turns"])
        if pending is not None:
            return {**state, "status": "pending", "pending": pending}
        if is_finished(state):
            return state
