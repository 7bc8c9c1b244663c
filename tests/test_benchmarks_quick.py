"""Quick modes of the benchmarks, so they cannot rot (figures are printed, not asserted)."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name):
    """Import benchmarks/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_overhead_quick(capsys):
    report = load("overhead").main(["--quick"])
    assert set(report["median_ms"]) == {
        "run", "httpx", "http.client", "stream", "httpx-sse", "arun", "httpx-async",
        "httpx-async+threads",
    }  # fmt: skip
    assert all(v > 0 for v in report["median_ms"].values())
    assert "run/httpx" in capsys.readouterr().out


def test_history_search_quick(capsys):
    report = load("history_search").main(["--quick", "--no-postgres"])
    assert set(report["median_ms"]) == {"memory", "sqlite"}
    assert all(t["rare"] > 0 and t["range"] > 0 for t in report["median_ms"].values())
    assert {"scan/sqlite rare", "sqlite record 2000/200"} <= set(report["ratios"])
    assert "scan/sqlite rare" in capsys.readouterr().out


def test_store_growth_quick(capsys):
    report = load("store_growth").main(["--quick"])
    assert {"memory", "file", "sqlite"} <= set(report["ratio"])
    assert all(r > 0 for r in report["ratio"].values())
    assert all(m[1_000]["save"] > 0 and m[1_000]["get"] > 0 for m in report["ms"].values())
    assert set(report["lock_ms"]) == set(report["ratio"])  # the protection's own cost
    assert all(ms > 0 for ms in report["lock_ms"].values())
    out = capsys.readouterr().out
    assert "save(1,000) / save(10)" in out and "lock take+release per save" in out


@pytest.mark.parametrize("app", ["tuned", "example"])
def test_service_load_quick(app, capsys):
    report = load("service/load").main(["--quick", "--app", app])
    (point,) = report["points"]
    assert point["workers"] == 1 and point["rps"] > 0 and point["errors"] == 0
    assert point["p50_ms"] >= 50  # the fake model's latency is a floor
    assert point["worker_cpu_ms_per_request"] > 0 and point["database_cpu_pct"] >= 0
    assert "of ideal" in capsys.readouterr().out


def test_service_load_reads_callgrind_totals():
    """--instructions (too slow for the suite under valgrind) rests on this reader."""
    import doctest

    failed, tried = doctest.testmod(load("service/load"))
    assert tried >= 1 and failed == 0
