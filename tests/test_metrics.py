"""The metrics fold and its Prometheus text, read back by a tiny exposition parser."""

from __future__ import annotations

import math
import re
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.prometheus import BUCKETS, FAMILIES, metrics_sink, metrics_state, record, render

LE = ["0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"]


def parse(text: str) -> tuple[dict, dict, list]:
    """Return ({(name, labels): value}, {family: type}, sample keys in order) of an exposition."""
    samples, types, order = {}, {}, []
    assert text.endswith("\n")
    for line in text[:-1].split("\n"):  # not splitlines(): "\x1e" is no line end here
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if line.startswith("#"):
            continue
        m = re.match(r"([a-z_]+)(\{.*\})? (\S+)$", line)
        assert m, f"not a sample line: {line!r}"
        key = (m.group(1), labels_of(m.group(2) or ""))
        assert key not in samples, f"duplicate series {key}"
        samples[key] = float(m.group(3))
        order.append(key)
    return samples, types, order


def labels_of(text: str) -> tuple:
    """Parse {a="x",b="y\\"z"} into (("a", 'x'), ("b", 'y"z')), undoing the three escapes."""
    out, i = [], 1
    while i < len(text) - 1:
        eq = text.index("=", i)
        name, i, value = text[i:eq], eq + 2, []
        while text[i] != '"':
            if text[i] == "\\":
                value.append({"\\": "\\", '"': '"', "n": "\n"}[text[i + 1]])
                i += 2
            else:
                value.append(text[i])
                i += 1
        out.append((name, "".join(value)))
        i += 2 if text[i + 1 : i + 2] == "," else 1
    return tuple(out)


names = st.text(max_size=8) | st.sampled_from(['a"b', "c\\d", "e\nf", "", "\\n", "é✓"])
seconds = st.floats(allow_nan=True) | st.floats(0, 100) | st.none() | st.integers(-5, 100)
events = st.one_of(
    st.fixed_dictionaries(
        {"event": st.just("llm"), "model": names, "status": st.sampled_from([200, 429, "error"])},
        optional={
            "duration_s": seconds,
            "usage": st.fixed_dictionaries(
                {
                    "prompt_tokens": st.integers(-3, 10**6),
                    "completion_tokens": st.integers(0, 10**6),
                }
            ),
            "conversation_id": st.just("conv-SECRET"),
        },
    ),
    st.fixed_dictionaries(
        {"event": st.just("tool"), "tool": names, "source": st.sampled_from(["local", "mcp"])},
        optional={
            "is_error": st.booleans(),
            "duration_s": seconds,
            "api_key": st.just("sk-SECRET"),
        },
    ),
    st.fixed_dictionaries({"event": st.just("run"), "model": names, "error": st.booleans()}),
    st.fixed_dictionaries({"event": st.sampled_from(["other", None])}),
)


@settings(max_examples=30)
@given(st.lists(events, max_size=15))
def test_counters_are_monotone_and_histograms_cumulative(evs):
    state, previous = metrics_state(), {}
    for event in evs:
        before = state
        state = record(state, event)
        assert record(before, event) == state  # pure: the old state is untouched
        samples, types, _ = parse(render(state))
        for key, value in samples.items():
            if types.get(key[0]) == "counter":
                assert value >= previous.get(key, 0)
        previous = samples
    samples, _, _ = parse(render(state))
    for (name, labels), count in samples.items():
        if not name.endswith("_count"):
            continue
        family = name[: -len("_count")]
        cumulative = [samples[(f"{family}_bucket", (*labels, ("le", le)))] for le in LE]
        assert cumulative == sorted(cumulative) and cumulative[-1] == count
        assert samples[(f"{family}_sum", labels)] >= 0


@given(st.lists(events, max_size=25))
def test_labels_round_trip_and_nothing_secret_leaks(evs):
    state = metrics_state()
    for event in evs:
        state = record(state, event)
    text = render(state)
    assert "SECRET" not in text
    samples, types, order = parse(text)
    assert set(types) == set(FAMILIES)
    expected_models = {e["model"] for e in evs if e.get("event") in ("llm", "run")}
    seen_models = {dict(labels)["model"] for (_, labels) in samples if "model" in dict(labels)}
    assert seen_models == expected_models
    for name, labels in samples:
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        label_names = [n for n, _ in labels if n != "le"]
        assert label_names == list(FAMILIES.get(family, FAMILIES.get(name))[1])


def test_series_are_sorted_within_each_family():
    state = metrics_state()
    for model in ["zeta", "alpha", "mid"]:
        state = record(state, {"event": "llm", "model": model, "status": 200, "duration_s": 1})
    _, _, order = parse(render(state))
    families = [name for name, _ in order]
    assert families == sorted(families, key=lambda n: sorted(FAMILIES).index(
        re.sub(r"_(bucket|sum|count)$", "", n)))  # fmt: skip
    models = [dict(labels)["model"] for name, labels in order if name.endswith("_count")]
    assert models == ["alpha", "mid", "zeta"]


@given(st.lists(st.floats(0, 120), max_size=20))
def test_bucket_counts_match_the_observations(durations):
    state = metrics_state()
    for d in durations:
        state = record(state, {"event": "tool", "tool": "t", "source": "local", "duration_s": d})
    samples, _, _ = parse(render(state))
    if not durations:
        assert ("toolnexus_tool_duration_seconds_count", (("tool", "t"),)) not in samples
        return
    for le, bound in zip(LE, BUCKETS, strict=True):
        key = ("toolnexus_tool_duration_seconds_bucket", (("tool", "t"), ("le", le)))
        assert samples[key] == sum(d <= bound for d in durations)
    total = samples[("toolnexus_tool_duration_seconds_sum", (("tool", "t"),))]
    assert math.isclose(total, sum(durations), rel_tol=1e-9, abs_tol=1e-9)


def test_exact_text_of_one_llm_call():
    state = record(
        metrics_state(),
        {"event": "llm", "model": "m", "status": 200, "duration_s": 0.2,
         "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
    )  # fmt: skip
    text = render(state)
    assert 'toolnexus_llm_requests_total{model="m",status="200"} 1\n' in text
    assert 'toolnexus_llm_tokens_total{type="completion"} 3\n' in text
    assert 'toolnexus_llm_request_duration_seconds_bucket{model="m",le="0.1"} 0\n' in text
    assert 'toolnexus_llm_request_duration_seconds_bucket{model="m",le="0.25"} 1\n' in text
    assert 'toolnexus_llm_request_duration_seconds_bucket{model="m",le="+Inf"} 1\n' in text
    assert 'toolnexus_llm_request_duration_seconds_sum{model="m"} 0.2\n' in text
    assert "# TYPE toolnexus_llm_request_duration_seconds histogram\n" in text


def test_bad_events_are_ignored():
    state = metrics_state()
    for bad in [None, "llm", 3, {}, {"event": []}, {"event": "tool", "duration_s": "slow"}]:
        state = record(state, bad)
    assert parse(render(state))[0] == {("toolnexus_tool_calls_total", (
        ("tool", ""), ("source", ""), ("is_error", "false")
    )): 1.0}  # fmt: skip


def test_sink_is_thread_safe():
    sink = metrics_sink()
    event = {"event": "tool", "tool": "t", "source": "local", "is_error": True, "duration_s": 0.01}

    def work() -> None:
        for _ in range(200):
            sink["on_metric"](event)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    samples, _, _ = parse(sink["render"]())
    key = ("toolnexus_tool_calls_total", (("tool", "t"), ("source", "local"), ("is_error", "true")))
    assert samples[key] == 1600
    assert (
        sink["state"]()["histograms"][("toolnexus_tool_duration_seconds", ("t",))]["count"] == 1600
    )


anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
keys = st.sampled_from(
    ["event", "model", "status", "duration_s", "usage", "tool", "source", "is_error", "error"]
)


@given(st.lists(st.dictionaries(keys, anything | st.sampled_from(["llm", "tool", "run"]))))
def test_record_never_raises_and_render_always_parses(evs):
    state = metrics_state()
    for event in evs:
        state = record(state, event)
    samples, _, _ = parse(render(state))
    assert all(v >= 0 and not math.isnan(v) for v in samples.values())


@given(st.lists(events, max_size=30))
def test_the_sink_agrees_with_the_pure_fold(evs):
    sink, state = metrics_sink(), metrics_state()
    for e in evs:
        sink["on_metric"](e)
        state = record(state, e)
    assert sink["render"]() == render(state)


def _observations_before(event):
    """The observations as first written (kept as the reference): every observation built,
    then those whose amount may not move a series left out."""
    import toolnexus.prometheus as P

    name = event.get("event") if isinstance(event, dict) else None
    if name not in ("llm", "tool", "run", "failover"):
        return []
    if name == "llm":
        model = P._label(event.get("model"))
        out = [("count", "toolnexus_llm_requests_total", (model, P._label(event.get("status"))), 1)]
        usage = event.get("usage")
        if isinstance(usage, dict):
            for kind in ("prompt", "completion"):
                out.append(("count", "toolnexus_llm_tokens_total", (kind,),
                            usage.get(f"{kind}_tokens") or 0))  # fmt: skip
            for kind in ("cache_read", "cache_write", "reasoning"):
                if f"{kind}_tokens" in usage:
                    out.append(("count", "toolnexus_llm_tokens_total", (kind,),
                                usage[f"{kind}_tokens"] or 0))  # fmt: skip
        out.append(("time", "toolnexus_llm_request_duration_seconds", (model,),
                    event.get("duration_s")))  # fmt: skip
    elif name == "tool":
        count = P._tool(event)[0]  # (a count of 1, as before: the time is the reference's)
        seconds = event.get("duration_s")
        out = [count, ("time", "toolnexus_tool_duration_seconds", count[2][:1], seconds)]
    else:
        out = P._OBSERVERS[name](event)
    return [o for o in out if P._amount(o[3]) is not None]


amounts = st.none() | st.booleans() | st.integers(-3, 10) | st.floats() | st.text(max_size=2)
usage_maps = st.dictionaries(
    st.sampled_from([f"{k}_tokens" for k in ("prompt", "completion", "cache_read",
                                              "cache_write", "reasoning", "total")]),
    amounts,
)  # fmt: skip


@given(st.one_of(
    events,
    st.fixed_dictionaries({"event": st.just("llm"), "model": names},
                          optional={"usage": usage_maps, "duration_s": amounts}),
    st.fixed_dictionaries({"event": st.just("tool"), "tool": names},
                          optional={"duration_s": amounts, "source": st.just("unknown")}),
))  # fmt: skip
def test_each_observer_keeps_the_amounts_the_first_filter_kept(event):
    from toolnexus.prometheus import observations

    assert observations(event) == _observations_before(event)
