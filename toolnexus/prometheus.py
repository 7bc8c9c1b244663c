"""Metrics as a pure fold over metric events, rendered in the Prometheus text format.

    state = metrics_state()
    state = record(state, {"event": "llm", "model": "m", "status": 200, "duration_s": 0.4,
                           "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
    print(render(state))

Events (other keys are dropped, so a conversation id or a key never becomes a label):
  {"event": "llm", "model", "status", "duration_s", "usage": {prompt_tokens, completion_tokens,
   and cache_read_tokens, cache_write_tokens, reasoning_tokens where reported}}
  {"event": "tool", "tool", "source", "is_error", "duration_s"}
  {"event": "run", "model", "error": bool}
  {"event": "failover", "model", "to_model", "kind"}  (a fallback chain: toolnexus.fallback)
`metrics_sink()` is the thread-safe holder a client keeps: {"on_metric", "render", "state"}.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any

from .core.frozen import FrozenMap, freeze
from .core.toolkit import UNKNOWN_TOOL

__all__ = [
    "BUCKETS", "FAMILIES", "metrics_state", "observations", "record", "render", "metrics_sink",
]  # fmt: skip

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, math.inf)

# name -> (type, label names, help): the contract's series, as data.
FAMILIES = {
    "toolnexus_llm_requests_total": (
        "counter", ("model", "status"), "LLM requests, by model and response status."),
    "toolnexus_llm_tokens_total": (
        "counter", ("type",),
        "Tokens used by LLM requests, by type (prompt, completion; cache_read, cache_write"
        " and reasoning where reported, parts of prompt and completion)."),
    "toolnexus_llm_request_duration_seconds": (
        "histogram", ("model",), "Duration of LLM requests in seconds."),
    "toolnexus_tool_calls_total": (
        "counter", ("tool", "source", "is_error"), "Tool calls, by tool, source and outcome."),
    "toolnexus_tool_duration_seconds": (
        "histogram", ("tool",), "Duration of tool calls in seconds."),
    "toolnexus_run_errors_total": (
        "counter", ("model",), "Runs that ended with an error, by model."),
    "toolnexus_failovers_total": (
        "counter", ("model", "to_model", "kind"),
        "Exchanges that went on with the next client of a fallback chain, by the model that"
        " failed, the one asked next and the failure's kind."),
}  # fmt: skip

_EMPTY_HISTOGRAM = FrozenMap({"buckets": (0,) * len(BUCKETS), "sum": 0.0, "count": 0})


def metrics_state() -> FrozenMap:
    """Return an empty metrics state: {"counters": {}, "histograms": {}}."""
    return FrozenMap({"counters": FrozenMap(), "histograms": FrozenMap()})


def _label(value: Any) -> str:
    if type(value) is str:  # the usual label: as it is (the checks below cost more)
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _amount(value: Any) -> float | int | None:
    # Only finite, non-negative numbers move a counter or a histogram: counters are monotone.
    kind = type(value)
    if kind is int:  # exact types first: most amounts are a count or a duration
        return value if value >= 0 else None
    if kind is not float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return None
    return value if math.isfinite(value) and value >= 0 else None


# An observation is ("count", name, labels, amount) or ("time", name, labels, seconds):
# what one event means for the series, computed once and applied to either state. Each
# observer checks the amounts it reads from the event (`_amount`) and leaves out one that
# may not move a series; its own constants (a count of 1) need no check.


def _llm(e: Mapping) -> list[tuple]:
    model = _label(e.get("model"))
    out = [("count", "toolnexus_llm_requests_total", (model, _label(e.get("status"))), 1)]
    usage = e.get("usage")
    if type(usage) is FrozenMap or isinstance(usage, Mapping):
        for labels, key in _TOKENS:
            tokens = usage.get(key) or 0
            if _amount(tokens) is not None:
                out.append(("count", "toolnexus_llm_tokens_total", labels, tokens))
        for labels, key in _DETAIL_TOKENS:  # only where the provider reported them
            if key in usage and _amount(tokens := usage[key] or 0) is not None:
                out.append(("count", "toolnexus_llm_tokens_total", labels, tokens))
    seconds = e.get("duration_s")
    if _amount(seconds) is not None:
        out.append(("time", "toolnexus_llm_request_duration_seconds", (model,), seconds))
    return out


# Usage details: cache_read and cache_write are part of prompt, reasoning of completion.
_DETAILS = ("cache_read", "cache_write", "reasoning")
# (the series' labels, the usage key): built once, not per event.
_TOKENS = tuple(((kind,), f"{kind}_tokens") for kind in ("prompt", "completion"))
_DETAIL_TOKENS = tuple(((kind,), f"{kind}_tokens") for kind in _DETAILS)


def _tool(e: Mapping) -> list[tuple]:
    tool = UNKNOWN_TOOL if e.get("source") == "unknown" else _label(e.get("tool"))
    labels = (tool, _label(e.get("source")), _label(bool(e.get("is_error"))))
    out = [("count", "toolnexus_tool_calls_total", labels, 1)]
    seconds = e.get("duration_s")
    if _amount(seconds) is not None:
        out.append(("time", "toolnexus_tool_duration_seconds", (tool,), seconds))
    return out


def _run(e: Mapping) -> list[tuple]:
    # A clean run adds 0, so the error series exists (and reads 0) from the first run.
    labels = (_label(e.get("model")),)
    return [("count", "toolnexus_run_errors_total", labels, int(bool(e.get("error"))))]


def _failover(e: Mapping) -> list[tuple]:
    labels = (_label(e.get("model")), _label(e.get("to_model")), _label(e.get("kind")))
    return [("count", "toolnexus_failovers_total", labels, 1)]


_OBSERVERS: dict[str, Callable[[Mapping], list]] = {
    "llm": _llm, "tool": _tool, "run": _run, "failover": _failover,
}  # fmt: skip


def observations(event: Any) -> list[tuple]:
    """Return what an event adds to the series; unknown events add nothing (never raises).

    >>> observations({"event": "run", "model": "m", "error": True})
    [('count', 'toolnexus_run_errors_total', ('m',), 1)]
    """
    name = event.get("event") if type(event) is dict or isinstance(event, Mapping) else None
    observer = _OBSERVERS.get(name) if isinstance(name, str) else None
    if observer is None:
        return []
    return observer(event)  # (each keeps only the amounts that may move a series)


def _histogram(h: Mapping, seconds: float) -> dict:
    # Stored cumulative, as rendered: every bucket whose bound holds the value counts it.
    buckets = tuple(n + (seconds <= le) for n, le in zip(h["buckets"], BUCKETS, strict=True))
    return {"buckets": buckets, "sum": h["sum"] + seconds, "count": h["count"] + 1}


def record(state: FrozenMap, event: Mapping) -> FrozenMap:
    """Return the state after one metric event; unknown events change nothing (never raises).

    >>> s = record(metrics_state(), {"event": "run", "model": "m", "error": True})
    >>> s["counters"][("toolnexus_run_errors_total", ("m",))]
    1
    """
    counters, histograms = state["counters"], state["histograms"]
    for kind, name, labels, amount in observations(event):
        key = (name, labels)
        if kind == "count":
            counters = counters.set(key, counters.get(key, 0) + amount)
        else:
            h = _histogram(histograms.get(key, _EMPTY_HISTOGRAM), amount)
            histograms = histograms.set(key, FrozenMap(h))
    return state.update({"counters": counters, "histograms": histograms})


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names: tuple, values: tuple) -> str:
    pairs = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}" if pairs else ""


def _number(x: float | int) -> str:
    if x == math.inf:
        return "+Inf"
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return str(int(x))
    return repr(float(x))


def _family(state: FrozenMap, name: str) -> list[str]:
    kind, names, help_ = FAMILIES[name]
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
    if kind == "counter":
        series = sorted((k[1], v) for k, v in state["counters"].items() if k[0] == name)
        return lines + [f"{name}{_labels(names, labels)} {_number(v)}" for labels, v in series]
    for labels, h in sorted((k[1], h) for k, h in state["histograms"].items() if k[0] == name):
        for le, n in zip(BUCKETS, h["buckets"], strict=True):
            lines.append(f"{name}_bucket{_labels((*names, 'le'), (*labels, _number(le)))} {n}")
        lines.append(f"{name}_sum{_labels(names, labels)} {_number(h['sum'])}")
        lines.append(f"{name}_count{_labels(names, labels)} {h['count']}")
    return lines


def render(state: FrozenMap) -> str:
    """Return the Prometheus text exposition of a state: families and series sorted.

    >>> text = render(record(metrics_state(), {"event": "run", "model": 'say "hi"'}))
    >>> print(*(line for line in text.splitlines() if "run_errors" in line), sep="\\n")
    # HELP toolnexus_run_errors_total Runs that ended with an error, by model.
    # TYPE toolnexus_run_errors_total counter
    toolnexus_run_errors_total{model="say \\"hi\\""} 0
    """
    return "\n".join(line for name in sorted(FAMILIES) for line in _family(state, name)) + "\n"


def metrics_sink() -> dict:
    """Return a thread-safe holder: {"on_metric": fn(event), "render": fn() -> str, "state": fn()}.

    A client keeps one and passes events to `on_metric` from any thread. It folds into
    plain dicts under a lock (the hot path of every run); `state` and `render` read an
    immutable snapshot.
    """
    lock = threading.Lock()
    counters: dict = {}
    histograms: dict = {}  # key -> [per-bucket counts (not cumulative), sum, count]

    def on_metric(event: Mapping) -> None:
        obs = observations(event)
        with lock:
            for kind, name, labels, amount in obs:
                key = (name, labels)
                if kind == "count":
                    counters[key] = counters.get(key, 0) + amount
                    continue
                h = histograms.get(key)
                if h is None:
                    h = histograms[key] = [[0] * len(BUCKETS), 0.0, 0]
                h[0][bisect_left(BUCKETS, amount)] += 1  # the first bucket that holds it
                h[1] += amount
                h[2] += 1

    def state() -> FrozenMap:
        with lock:
            hs = {k: (tuple(accumulate(b)), total, n) for k, (b, total, n) in histograms.items()}
            snapshot = {
                "counters": dict(counters),
                "histograms": {
                    k: {"buckets": b, "sum": total, "count": n} for k, (b, total, n) in hs.items()
                },
            }
        return freeze(snapshot)

    return {"on_metric": on_metric, "render": lambda: render(state()), "state": state}
