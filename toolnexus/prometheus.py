"""Metrics as a pure fold over metric events, rendered in the Prometheus text format.

    state = metrics_state()
    state = record(state, {"event": "llm", "model": "m", "status": 200, "duration_s": 0.4,
                           "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
    print(render(state))

Events (other keys are dropped, so a conversation id or a key never becomes a label):
  {"event": "llm", "model", "status", "duration_s", "usage": {prompt_tokens, completion_tokens}}
  {"event": "tool", "tool", "source", "is_error", "duration_s"}
  {"event": "run", "model", "error": bool}
`metrics_sink()` is the thread-safe holder a client keeps: {"on_metric", "render", "state"}.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from pyrsistent import PMap, pmap

__all__ = ["BUCKETS", "FAMILIES", "metrics_state", "record", "render", "metrics_sink"]

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, math.inf)

# name -> (type, label names, help): the contract's series, as data.
FAMILIES = {
    "toolnexus_llm_requests_total": (
        "counter", ("model", "status"), "LLM requests, by model and response status."),
    "toolnexus_llm_tokens_total": (
        "counter", ("type",), "Tokens used by LLM requests, by type (prompt or completion)."),
    "toolnexus_llm_request_duration_seconds": (
        "histogram", ("model",), "Duration of LLM requests in seconds."),
    "toolnexus_tool_calls_total": (
        "counter", ("tool", "source", "is_error"), "Tool calls, by tool, source and outcome."),
    "toolnexus_tool_duration_seconds": (
        "histogram", ("tool",), "Duration of tool calls in seconds."),
    "toolnexus_run_errors_total": (
        "counter", ("model",), "Runs that ended with an error, by model."),
}  # fmt: skip

_EMPTY_HISTOGRAM = pmap({"buckets": (0,) * len(BUCKETS), "sum": 0.0, "count": 0})


def metrics_state() -> PMap:
    """Return an empty metrics state: {"counters": {}, "histograms": {}}."""
    return pmap({"counters": pmap(), "histograms": pmap()})


def _label(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _amount(value: Any) -> float | int | None:
    # Only finite, non-negative numbers move a counter or a histogram: counters are monotone.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _add(state: PMap, name: str, labels: tuple, amount: Any) -> PMap:
    amount = _amount(amount)
    if amount is None:
        return state
    counters = state["counters"]
    key = (name, labels)
    return state.set("counters", counters.set(key, counters.get(key, 0) + amount))


def _observe(state: PMap, name: str, labels: tuple, seconds: Any) -> PMap:
    seconds = _amount(seconds)
    if seconds is None:
        return state
    histograms = state["histograms"]
    h = histograms.get((name, labels), _EMPTY_HISTOGRAM)
    # Stored cumulative, as rendered: every bucket whose bound holds the value counts it.
    buckets = tuple(n + (seconds <= le) for n, le in zip(h["buckets"], BUCKETS, strict=True))
    h = pmap({"buckets": buckets, "sum": h["sum"] + seconds, "count": h["count"] + 1})
    return state.set("histograms", histograms.set((name, labels), h))


def _llm(state: PMap, e: Mapping) -> PMap:
    model = _label(e.get("model"))
    state = _add(state, "toolnexus_llm_requests_total", (model, _label(e.get("status"))), 1)
    usage = e.get("usage")
    if isinstance(usage, Mapping):
        for kind in ("prompt", "completion"):
            state = _add(
                state, "toolnexus_llm_tokens_total", (kind,), usage.get(f"{kind}_tokens") or 0
            )
    return _observe(state, "toolnexus_llm_request_duration_seconds", (model,), e.get("duration_s"))


def _tool(state: PMap, e: Mapping) -> PMap:
    tool = _label(e.get("tool"))
    labels = (tool, _label(e.get("source")), _label(bool(e.get("is_error"))))
    state = _add(state, "toolnexus_tool_calls_total", labels, 1)
    return _observe(state, "toolnexus_tool_duration_seconds", (tool,), e.get("duration_s"))


def _run(state: PMap, e: Mapping) -> PMap:
    # A clean run adds 0, so the error series exists (and reads 0) from the first run.
    return _add(
        state, "toolnexus_run_errors_total", (_label(e.get("model")),), int(bool(e.get("error")))
    )


_RECORDERS: dict[str, Callable[[PMap, Mapping], PMap]] = {"llm": _llm, "tool": _tool, "run": _run}


def record(state: PMap, event: Mapping) -> PMap:
    """Return the state after one metric event; unknown events change nothing (never raises).

    >>> s = record(metrics_state(), {"event": "run", "model": "m", "error": True})
    >>> s["counters"][("toolnexus_run_errors_total", ("m",))]
    1
    """
    name = event.get("event") if isinstance(event, Mapping) else None
    recorder = _RECORDERS.get(name) if isinstance(name, str) else None
    return recorder(state, event) if recorder else state


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


def _family(state: PMap, name: str) -> list[str]:
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


def render(state: PMap) -> str:
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

    A client keeps one and passes events to `on_metric` from any thread; `render`
    reads a consistent snapshot (states are immutable values).
    """
    lock = threading.Lock()
    cell = [metrics_state()]

    def on_metric(event: Mapping) -> None:
        with lock:
            cell[0] = record(cell[0], event)

    return {"on_metric": on_metric, "render": lambda: render(cell[0]), "state": lambda: cell[0]}
