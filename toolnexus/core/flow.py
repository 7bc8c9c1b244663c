"""The whole exchange as one generator of effects: lock, load, model turns, tools, hooks,
save, log and release, with one exit point. No I/O here: a driver performs the effects.

Like httpx's auth_flow, the flow yields effect tuples and receives their results (or has
the effect's exception thrown in). The sync, streaming and async drivers are tables of
handlers for these kinds; none holds exchange logic:

  ("clock",)              -> a monotonic time in seconds
  ("now",)                -> the current UTC datetime (log stamps)
  ("wallclock",)          -> the epoch seconds (an HTTP-date Retry-After)
  ("remaining",)          -> the seconds left before the run's deadline, or None
  ("io", ops)             -> one outcome per op: ("ok", value) | ("error", exc) | ("skipped",)
                             ops is a tuple of Op(fn, args, always), run in order, in one
                             hand-off (a worker thread under asyncio); after an error only
                             `always` ops run. Store, lock, log and wait_for calls go here.
  ("hook", fn, arg)       -> fn(arg), awaited when it returns an awaitable (hooks,
                             on_error, body_transform); run inline, not in a worker.
  ("llm", request)        -> the decoded turn; request is {body, content, turn}: `content`
                             holds the JSON bytes to POST (None for an in-process model)
  ("tools", tk, calls)    -> [(result, seconds), ...] in call order; calls overlap
  ("sleep", seconds)      -> None (a retry's backoff)
  ("event", event)        -> None (a stream event for the consumer)
  ("metric", event)       -> None (an on_metric record)
  ("warn", text)          -> None (a warning the host should see; nothing raised)
  ("recall", id)          -> the runtime's memo of a conversation or None: {messages (what
                             was saved), history (it, replayable), texts (of history),
                             facts (of messages: core.loading)}
  ("remember", id, memo)  -> None

and three intents, the exchange's store calls, which toolnexus/exchange.py performs as
"io" effects (fused calls where the store declares them, else separate ones); a driver
never sees them:

  ("take", id, load)      -> (held, transcript | None): the lock taken (and the load)
  ("commit", id, messages, held, log, loaded)
                          -> the (save, release, log...) outcomes; log: an Op or None
  ("release", held, *ops) -> the outcomes of releasing `held`, then of `ops`

A driver that must stop (a deadline, a cancel, a consumer that closed the stream) throws
the reason into the flow and keeps performing what the flow yields until it ends: the
flow itself releases the lock, writes the log and emits the run metric, so no exit path
forgets them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from . import failover, loading, steps
from .errors import ProviderError
from .frozen import FrozenMap
from .output import read_output
from .retry import decide, error_info, plan
from .tool import as_result, tool_result
from .transcript import freeze_transcript, readable
from .wire import DIALECTS
from .wire.common import message_text
from .wire.parts import prompt_text
from .wire.sse import whole_characters

__all__ = ["Op", "exchange_flow", "run_flow", "rebase", "value_of"]


class Op(NamedTuple):
    """One call of an "io" effect: fn(*args); `always` runs it even after an earlier error.
    `kind` says what it is, for whoever watches (lock, load, lock+load, save, log,
    release; "" for anything else)."""

    fn: Callable
    args: tuple
    always: bool = False
    kind: str = ""


def value_of(outcome: tuple) -> Any:
    """Return an io outcome's value, or raise its error."""
    if outcome[0] == "error":
        raise outcome[1]
    return outcome[1] if outcome[0] == "ok" else None


# ---- one model turn, one turn's tools ----------------------------------------------


def _llm_turn(cfg: Mapping, codec: Any, state: steps.State, body: Mapping, turn_no: int,
              known: Mapping):  # fmt: skip
    """Yield effects until one model turn is decoded, retrying as the policy says.

    The body_transform hook runs first, on the body as sent: it sees (and may change)
    everything the loop adds, `stream` too."""
    if cfg["events"]:
        body = codec.stream_body(body)
    if cfg["transform"] is not None:
        body = yield ("hook", cfg["transform"], body)
    encode = cfg["encode"]
    content = steps.request_content(state, body, known) if encode else None
    # "leg": the client of a fallback chain that sends it (core.failover), and who it is.
    # "messages": the transcript the body carries, in the client's dialect (what the
    # GenAI content capture reads through the neutral view, whatever the body's shape)
    request = {"body": body, "content": content, "turn": turn_no, "leg": cfg.get("leg", 0),
               "client": cfg.get("served_by"), "messages": state["messages"]}  # fmt: skip
    attempt = 0
    while True:
        attempt += 1
        t0 = yield ("clock",)
        try:
            turn = yield ("llm", request)
        except ProviderError as e:
            t1 = yield ("clock",)
            status = str(e.status) if e.status is not None else "error"
            yield ("metric", {"event": "llm", "model": cfg["model"], "status": status,
                              "duration_s": t1 - t0})  # fmt: skip
            if getattr(e, "streamed", False):  # text reached the consumer: never repeat it
                raise
            info = error_info(e, attempt)
            choice = (yield ("hook", cfg["on_error"], info)) if cfg["on_error"] else None
            if decide(info, cfg["retries"], lambda _, c=choice: c) == "fail":
                raise
            remaining = yield ("remaining",)
            now = yield ("wallclock",)
            wait = plan(e, attempt, retries=cfg["retries"], base_ms=cfg["retry_base_ms"],
                        on_error=lambda _, c=choice: c, rng=cfg["rng"],
                        max_wait_s=cfg["max_wait_s"], remaining_s=remaining, now=now)  # fmt: skip
            yield ("sleep", wait)
            continue
        t1 = yield ("clock",)
        yield ("metric", {"event": "llm", "model": cfg["model"], "status": "ok",
                          "duration_s": t1 - t0, "usage": turn["usage"]})  # fmt: skip
        # An emoji split across two stream deltas arrives as two surrogate halves: joined
        # here, and a half with no partner is a clear error before anything is saved.
        return whole_characters(turn)


def _stated_turn(cfg: Mapping, codec: Any, state: steps.State, full: Mapping, turn_no: int,
                 known: Mapping):  # fmt: skip
    """Return the generator of effects that decodes the next model turn: `_llm_turn`
    itself (no generator level in between), or with server_state `_server_state_turn`."""
    if not cfg.get("server_state"):
        return _llm_turn(cfg, codec, state, full, turn_no, known)
    return _server_state_turn(cfg, codec, state, full, turn_no, known)


def _server_state_turn(cfg: Mapping, codec: Any, state: steps.State, full: Mapping,
                       turn_no: int, known: Mapping):  # fmt: skip
    """Yield effects until a model turn is decoded, the request naming the previous
    response and sending only the new items; when the server has forgotten that response
    it is sent once more with the whole transcript (`full`)."""
    stated = codec.server_state_body(full, state["messages"])
    try:
        return (yield from _llm_turn(cfg, codec, state, stated, turn_no, known))
    except ProviderError as e:
        if stated is full or not codec.forgotten(e):
            raise
    yield ("metric", {"event": "server_state_fallback", "model": cfg["model"]})
    return (yield from _llm_turn(cfg, codec, state, codec.stored(full), turn_no, known))


def _as_result(value: Any) -> FrozenMap:
    if isinstance(value, Mapping) and "output" in value:
        value = {"is_error": False, **value}  # a hook's result may leave is_error out
    return as_result(value)  # data as JSON text, content parts as parts (core.tool)


def _before_tool(hook: Callable, call: Mapping, turn_no: int):
    """Yield the hook; return the (maybe rewritten) call and a short-circuit result, if any."""
    if call["error"] is not None:
        return call, None
    payload = {"name": call["name"], "args": call["args"], "id": call["id"], "turn": turn_no}
    out = yield ("hook", hook, payload)
    if not out:
        return call, None
    if "result" in out:
        return call, _as_result(out["result"])
    if "args" in out:
        from .frozen import freeze

        return {**call, "args": freeze(dict(out["args"]))}, None
    return call, None


def _after_tool(hook: Callable, call: Mapping, result: FrozenMap, turn_no: int):
    payload = {"name": call["name"], "args": call["args"], "result": result, "id": call["id"]}
    out = yield ("hook", hook, {**payload, "turn": turn_no})
    return _as_result(out["result"]) if out and "result" in out else result


def _source(tk: Any, call: Mapping) -> str:
    t = tk["index"].get(call["name"]) if tk else None
    return t["source"] if t is not None else "unknown"


def _run_calls(cfg: Mapping, tk: Any, calls: Sequence[Mapping], turn_no: int):
    """Yield effects to run one turn's calls (hooks, concurrency, suspension); return
    (results in call order, the pending request or None)."""
    # Each hook's step is a generator of effects: a run without that hook makes none.
    before, after = cfg["hooks"].get("before_tool"), cfg["hooks"].get("after_tool")
    if before is None:
        prepared = [(c, None) for c in calls]
    else:
        prepared = []
        for c in calls:
            prepared.append((yield from _before_tool(before, c, turn_no)))
    to_run = [c for c, short in prepared if short is None]
    ran = iter((yield ("tools", tk, to_run)) if to_run else ())
    results, pending = [], None
    for call, short in prepared:
        result = short
        if result is None:
            result, seconds = next(ran)
            yield ("metric", {"event": "tool", "tool": call["name"], "source": _source(tk, call),
                              "is_error": result["is_error"], "duration_s": seconds})  # fmt: skip
        request = steps.pending_request(result)
        if request is not None:
            if pending is not None:
                result = tool_result("Not run: another request of this turn is pending.", True)
            elif cfg["wait_for"] is None:
                pending = request
                if cfg["events"]:
                    yield ("event", FrozenMap({"type": "pending", "request": request}))
            else:
                result = yield from _resume(cfg, tk, call, request)
        if after is not None:
            result = yield from _after_tool(after, call, result, turn_no)
        results.append(result)
    return results, pending


def _resume(cfg: Mapping, tk: Any, call: Mapping, request: Mapping):
    """Yield effects to wait for the host's answer and re-run the suspended call once."""
    if cfg["events"]:  # a stream shows the request before the host is asked
        yield ("event", FrozenMap({"type": "pending", "request": request}))
    (outcome,) = yield ("io", (Op(cfg["wait_for"], (request,)),))
    answer = value_of(outcome)
    if not answer or not answer.get("ok"):
        return tool_result(f"Request {request['id']!r} was declined or not answered.", True)
    again = {**call, "args": call["args"].set("_resume", FrozenMap(answer))}
    ((result, _),) = yield ("tools", tk, [again])
    if steps.pending_request(result) is not None:
        return tool_result(f"Tool {call['name']!r} suspended again after its answer.", True)
    return result


# ---- the model/tool loop -------------------------------------------------------------


def _before_llm(cfg: Mapping, hook: Callable, state: steps.State, tk: Any):
    payload = {"messages": state["messages"], "tools": tk, "model": cfg["model"],
               "turn": state["turns"] + 1, "client": cfg.get("served_by")}  # fmt: skip
    out = yield ("hook", hook, payload)
    if not out:
        return state, tk
    if "messages" in out:
        state = steps.with_messages(state, freeze_transcript(out["messages"]))
    return state, out.get("tools", tk)


def _tools_text(tk: Any, tools: Any, codec: Any) -> str:
    """Return the JSON text of a request's tools: the toolkit keeps it (see register)."""
    dialect = codec.name
    if tk and tools is (tk.get("wire") or {}).get(dialect):
        return tk["wire_json"][dialect]
    return message_text(tools)


def _body(cfg: Mapping, codec: Any, state: steps.State, tools: Any, tk: Any, params: Mapping,
          omitted: frozenset):  # fmt: skip
    """Return the request body of the next model call, without what the server refuses
    (`omitted`: see the codecs' `omit`); the body_transform runs last (`_final`)."""
    body = steps.request(state, cfg["model"], tools, cfg["system"](tk), params)
    if cfg.get("prompt_cache"):  # breakpoints / cache key (the codec's own way)
        body = codec.cache_body(body, cfg.get("conversation_id"))
    return codec.omit(body, omitted) if omitted else body


def _answer(cfg: Mapping, codec: Any, state: steps.State, asked: tuple, turn_no: int,
            known: Mapping):  # fmt: skip
    """Yield effects until the next model turn is decoded; return it and the cfg of the
    run's later turns (`asked`: the request's tools, toolkit and params).

    A server that refuses a part of the request it cannot take (encrypted reasoning asked
    of a model without it, unsigned thinking, another provider's fields: the codec's
    `refused_part`) is asked once more without it; once that is answered, the part is
    remembered per client and model and left out of the run's later requests."""
    omitted = cfg.get("omitted") or frozenset()
    body = _body(cfg, codec, state, *asked, omitted)
    try:
        return (yield from _stated_turn(cfg, codec, state, body, turn_no, known)), cfg
    except ProviderError as e:
        part = codec.refused_part(e)
        if part is None or part in omitted or codec.omit(body, frozenset({part})) is body:
            raise  # (a request without that part would be the same one)
    cfg = {**cfg, "omitted": omitted | {part}}
    body = _body(cfg, codec, state, *asked, cfg["omitted"])
    turn = yield from _stated_turn(cfg, codec, state, body, turn_no, known)
    if cfg.get("remember_omission") is not None:
        yield ("hook", cfg["remember_omission"], part)
    yield ("metric", {"event": "omitted", "model": cfg["model"], "part": part})
    return turn, cfg


def run_flow(cfg: Mapping, state: steps.State, tk: Any):
    """The model/tool loop as a generator of effects; returns the final state.

    `cfg` holds model, system (a function of the toolkit), params, hooks, max_turns,
    retries, retry_base_ms, rng, on_error, wait_for, transform (a function or None),
    events (whether to yield stream events) and encode (whether to build the bytes);
    optionally omitted (what requests leave out: see the codecs' `omit`),
    remember_omission (called with what a refusal added to it), served_by (the client,
    named in the result), legs and fails_over (a fallback chain: core.failover), and
    progress (called with the state after each model turn: what the run has said).
    """
    state, cfg = yield from _loop(cfg, state, tk)
    return failover.finished(cfg, state)


def _params(cfg: Mapping, codec: Any) -> tuple[Mapping, Mapping]:
    """Return the params of a run's first model turn and of the later ones."""
    first = cfg["params"]
    if cfg.get("output") is not None:  # structured output (core.output)
        first = codec.with_output(first, cfg["output"])
    return first, codec.later_params(first)  # a forced tool_choice: the first turn only


def _loop(cfg: Mapping, state: steps.State, tk: Any):
    """The loop of `run_flow`; returns the final state and the cfg of its last turn."""
    codec = DIALECTS[state["dialect"]]
    hooks, events = cfg["hooks"], cfg["events"]
    encoded_for, tools, known = None, None, {}
    first, later = _params(cfg, codec)
    while True:
        hook = cfg["hooks"].get("before_llm")
        if hook is not None:  # (a generator of effects: a hook-less turn makes none)
            state, tk = yield from _before_llm(cfg, hook, state, tk)
        if tk is not encoded_for:  # once per run (again only if a hook swaps the tools)
            encoded_for, tools = tk, codec.encode_tools(tk)
            tools = codec.cache_tools(tools) if cfg.get("prompt_cache") else tools
            known = {"tools": (tools, _tools_text(tk, tools, codec))} if cfg["encode"] else {}
        params = first if state["turns"] == 0 else later
        turn_no = state["turns"] + 1
        try:
            turn, cfg = yield from _answer(cfg, codec, state, (tools, tk, params), turn_no, known)
        except ProviderError as e:  # after the client's own retries: the next one's turn?
            if not (yield from failover.can_fail_over(cfg, e)):
                raise
            cfg, state = yield from failover.switch(cfg, state, e, turn_no)
            codec, encoded_for = DIALECTS[state["dialect"]], None
            first, later = _params(cfg, codec)
            continue  # the same turn, asked of the next client (its hooks see it)
        if hooks.get("after_llm"):
            yield ("hook", hooks["after_llm"], {"response": turn, "model": cfg["model"],
                                                "turn": turn_no,
                                                "client": cfg.get("served_by")})  # fmt: skip
        state, calls = steps.on_turn(state, turn, cfg["max_turns"], cfg.get("max_tool_calls"))
        if cfg.get("progress") is not None:  # what the run has said, if it raises later
            cfg["progress"](state)
        if events:
            yield ("event", FrozenMap({"type": "usage", "usage": turn["usage"]}))
        if not calls:
            if steps.is_finished(state):
                return state, cfg
            continue  # a paused turn (pause_turn): the same transcript, sent again
        for c in calls if events else ():
            yield ("event", FrozenMap({"type": "tool_call", "id": c["id"], "name": c["name"],
                                       "args": c["args"]}))  # fmt: skip
        to_exec = [c for c in calls if c["error"] is None]
        results, pending = yield from _run_calls(cfg, tk, to_exec, state["turns"])
        ran = iter(results)
        ordered = [next(ran) if c["error"] is None else steps.invalid_result(c) for c in calls]
        for c, r in zip(calls, ordered, strict=True) if events else ():
            yield ("event", FrozenMap({"type": "tool_result", "id": c["id"], "name": c["name"],
                                       "output": r["output"],
                                       "is_error": r["is_error"]}))  # fmt: skip
        state = steps.on_results(state, calls, ordered, cfg["max_turns"])
        if pending is not None:
            return {**state, "status": "pending", "pending": pending}, cfg
        if steps.is_finished(state):
            return state, cfg


# ---- the exchange ---------------------------------------------------------------------


def rebase(base: Any, current: Any, messages: Sequence, fresh: Sequence) -> Any:
    """Return what to save when the stored transcript may have moved since it was loaded.

    `base` is what was loaded, `current` what is stored now, `messages` the run's whole
    transcript and `fresh` the messages the run added. Unchanged: `messages`. Moved on
    (another exchange saved meanwhile): `current` plus `fresh`, so neither exchange is
    lost. Does not modify its inputs.

    >>> u = lambda text: {"role": "user", "content": text}
    >>> rebase(None, None, [u("q")], [u("q")]) == [u("q")]
    True
    >>> moved = rebase([u("1")], [u("1"), u("2")], [u("1"), u("3")], [u("3")])
    >>> [m["content"] for m in moved]
    ['1', '2', '3']
    """
    if current is base or current == base:
        return messages
    return freeze_transcript(current).extend(fresh)


def _release(held: Any):
    """Release a held lock; a failure is reported (a warning and a metric), never raised."""
    (outcome,) = yield ("release", held)
    yield from _released(outcome)


def _released(outcome: tuple):
    if outcome[0] == "error":
        e = outcome[1]
        yield ("warn", f"releasing the conversation lock failed: {type(e).__name__}: {e}")
        yield ("metric", {"event": "lock_error", "error": type(e).__name__})


def _start(cfg: Mapping, cid: str | None, prompt: Any, loaded: Any):
    """Return the loop's first state over a loaded transcript, and the system text lifted
    out of it (a transcript of the other dialect is translated: see wire.translate).

    A transcript this runtime saved itself (the same value, see "recall") is used as it
    is, with the text of each message kept then; one that goes on from it (the store
    handed back those very messages plus what another worker added) has only its new
    messages made ready (core.loading.extended); anything else is translated, repaired
    and encoded once here, never per turn.
    """
    memo = (yield ("recall", cid)) if cid is not None and loaded is not None else None
    ready = _ready(cfg, memo, loaded)
    state = steps.start(cfg["dialect"], ready.history, prompt, ready.texts,
                        on_unsupported_part=cfg["on_unsupported_part"],
                        max_part_bytes=cfg["max_part_bytes"])  # fmt: skip
    state = {**state, "facts": ready.facts}
    if cid is not None:  # a prompt no store could read back: refused before the model is paid
        texts = state["texts"]  # the prompt's JSON text, when the state keeps texts
        readable(texts[-1] if texts else message_text(state["messages"][-1]), "the prompt")
    return state, ready.lifted


def _ready(cfg: Mapping, memo: Mapping | None, loaded: Any) -> loading.Loaded:
    """Return the loaded transcript made ready to replay: the memo's own when it is what
    this runtime saved, else its new messages alone when it goes on from that, else whole."""
    dialect, encode = cfg["dialect"], cfg["encode"]
    if memo is not None and memo.get("dialect", dialect) != dialect:
        memo = None  # made ready for another client of a fallback chain (core.failover)
    if memo is not None and memo["messages"] is loaded:
        facts = memo.get("facts") if memo["history"] is loaded else None
        return loading.Loaded(memo["history"], "", memo["texts"], facts)
    got = loading.extended(memo, loaded, dialect, encode)
    if got is not None:
        return got
    return loading.whole(loaded, dialect, cfg["on_unsupported_part"], encode)


def _memo(state: steps.State, messages: Any) -> dict:
    """Return what the runtime remembers of a conversation just saved as `messages` (the
    run's own transcript): it, its replayable history and texts, and its facts."""
    history, texts = steps.replayable_history(state)
    added = steps.fresh_messages(state)
    facts = loading.facts_after(state.get("facts"), added, state["dialect"])
    return {"messages": messages, "history": history, "texts": texts, "facts": facts,
            "dialect": state["dialect"]}  # fmt: skip


def _with_system(cfg: Mapping, lifted: str) -> Mapping:
    """Return cfg whose system text leads with `lifted` (a translated history's system)."""
    if not lifted:
        return cfg
    system = cfg["system"]
    return {
        **cfg,
        "lifted": lifted,  # a failover's next client leads with it too
        "system": lambda tk: "\n\n".join(x for x in (lifted, system(tk)) if x),
    }


def _finish(cfg: Mapping, cid: str | None, held: Any, loaded: Any, state: steps.State, log):
    """Save (rebased when the lock was not held), release and log; raise a save's error.

    A run that ended in a refusal saves the transcript it started from (see
    steps.kept_messages; the client's keep_refused saves it whole)."""
    messages, fresh = steps.kept_messages(state, bool(cfg.get("keep_refused")))
    if cid is None:
        outcomes = (yield ("io", (log,))) if log is not None else ()
        return messages, outcomes, None
    if held is None:  # optimistic: take the lock for the save alone
        held, current = yield ("take", cid, cfg["loaded_from_store"])
        if cfg["loaded_from_store"]:
            messages = rebase(loaded, current, messages, fresh)
    outcomes = yield ("commit", cid, messages, held, log, cfg["loaded_from_store"])
    return messages, outcomes, outcomes[0]


def exchange_flow(cfg: Mapping, prompt: Any, tk: Any, history: Any, cid: str | None):
    """One exchange as a generator of effects; returns the RunResult.

    With a conversation id: the lock is taken (held for the whole exchange when
    cfg["hold_lock"], else only around the load and around a rebased save), the
    transcript loaded unless `history` is given, and the whole exchange saved at the
    end, or nothing if the run raised. The message log (cfg["log"]) records the prompt
    and every assistant text, also when the run failed. The run metric comes last.
    The lock, load, save and release are intents ("take", "commit", "release"): which
    store calls make them (fused or separate) is the exchange module's business.
    """
    t0 = yield ("clock",)
    # When the prompt was asked: the message log's stamp, so asked only when one is kept.
    asked_at = (yield ("now",)) if cfg["log"] is not None else None
    hold = cfg["hold_lock"]
    reached: list = []  # the loop's state after each turn: what a run that raised said
    cfg = {**cfg, "loaded_from_store": history is None, "conversation_id": cid,
           "progress": reached.append}  # fmt: skip
    held, loaded, state = None, history, None
    try:
        if cid is not None:
            held, got = yield ("take", cid, history is None)
            loaded = got if history is None else history
            if not hold:
                yield from _release(held)
                held = None
        state, lifted = yield from _start(cfg, cid, prompt, loaded)
        cfg = _with_system(cfg, lifted)
        # run_flow's two steps, inline: one generator level fewer for every effect.
        state, last = yield from _loop(cfg, state, tk)
        state = _with_output(cfg, failover.finished(last, state))
    except BaseException as e:
        said = reached[-1] if reached else state
        yield from _fail(cfg, cid, held, prompt, said, asked_at, t0, e)
        raise
    log = _log_op(cfg, cid, prompt, state, asked_at)
    try:
        messages, outcomes, saved = yield from _finish(cfg, cid, held, loaded, state, log)
    except BaseException as e:  # the optimistic re-take failed: nothing was saved
        yield from _fail(cfg, cid, None, prompt, state, asked_at, t0, e, logged=False)
        raise
    result = steps.result(state, cfg["model"])
    if saved is not None and saved[0] == "error":
        t1 = yield ("clock",)
        yield ("metric", _run_metric(cfg, None, t1 - t0, saved[1]))
        raise saved[1]
    if cid is not None:
        yield from _released(outcomes[1])
        # Saved as it is (not rebased) and in one dialect (no failover): remember it.
        if messages is state["messages"] and not state.get("failed_over"):
            yield ("remember", cid, _memo(state, messages))
    t1 = yield ("clock",)
    yield ("metric", _run_metric(cfg, state, t1 - t0))
    if log is not None and outcomes[-1][0] == "error":
        raise outcomes[-1][1]  # a strict log's failure, once the run is accounted for
    return result


def _with_output(cfg: Mapping, state: steps.State) -> steps.State:
    """Return the state with its answer read by the run's output_schema, if it has one:
    an answer that does not fit raises OutputError (so the exchange is not saved)."""
    spec = cfg.get("output")
    if spec is None or state["status"] != "done" or state.get("refusal"):
        return state  # no schema, no answer yet (max_turns, pending), or a refusal
    return {**state, "output": read_output(spec, state["text"])}


def _log_op(cfg: Mapping, cid: str | None, prompt: Any, state: Any, asked_at: Any) -> Op | None:
    if cfg["log"] is None:
        return None
    texts = tuple(state["said"]) if state is not None else ()
    return Op(cfg["log"], (cid, prompt_text(prompt), texts, asked_at), always=True, kind="log")


def _fail(cfg, cid, held, prompt, state, asked_at, t0, error, logged: bool = True):
    """The exit of a run that raised: release, log what was said, emit the run metric."""
    log = _log_op(cfg, cid, prompt, state, asked_at) if logged else None
    said = (Op(_quiet, (log.fn, *log.args), always=True, kind="log"),) if log else ()
    if held is not None:
        outcomes = yield ("release", held, *said)
        yield from _released(outcomes[0])
    elif said:
        yield ("io", said)
    t1 = yield ("clock",)
    yield ("metric", _run_metric(cfg, None, t1 - t0, error))


def _quiet(fn: Callable, *args: Any) -> Any:
    """Call fn; its failure is the log's own business (reported there), never the run's."""
    try:
        return fn(*args)
    except Exception:
        return None


def _run_metric(cfg: Mapping, state: Any, seconds: float, error: Any = None) -> dict:
    """Return the run's metric event (never a conversation id or key)."""
    event = {"event": "run", "model": cfg["model"], "duration_s": seconds,
             "error": error is not None}  # fmt: skip
    if state is not None:
        event.update(status=state["status"], turns=state["turns"])
    return event
