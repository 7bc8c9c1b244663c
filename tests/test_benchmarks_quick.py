"""Quick modes of the benchmarks, so they cannot rot (figures are printed, not asserted)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolnexus.testing import fake_provider

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name):
    """Import benchmarks/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_overhead_quick(capsys, monkeypatch):
    """Quick mode runs without upstream installed: its arm is skipped, with the reason."""
    monkeypatch.delenv("TOOLNEXUS_UPSTREAM_DIR", raising=False)
    report = load("overhead").main(["--quick"])
    assert set(report["median_ms"]) == {
        "run", "run-inline", "run-responses", "httpx", "http.client", "stream", "httpx-sse",
        "arun", "httpx-async", "httpx-async+threads",
    }  # fmt: skip
    assert report["run-responses/run"] > 0
    assert all(v > 0 for v in report["median_ms"].values())
    assert set(report["worker_median_ms"]) == {
        "run", "run-inline", "arun", "arun-inline", "stream", "httpx", "httpx-sse", "httpx-async",
        "httpx-async+threads",
    }  # fmt: skip
    assert set(report["worker_cpu_median_ms"]) == set(report["worker_median_ms"])
    for ratio in ("run/httpx", "run-inline/httpx", "stream/httpx-sse", "arun/httpx-async",
                  "arun/httpx-async+threads", "arun-inline/httpx-async"):  # fmt: skip
        assert report[f"worker {ratio}"] > 0 and report[f"worker {ratio} cpu"] > 0
    assert all(v > 0 for v in report["worker_median_ms"].values())
    assert all(v > 0 for v in report["worker_cpu_median_ms"].values())
    assert report["upstream"] == {"skipped": "no --upstream DIR and no TOOLNEXUS_UPSTREAM_DIR"}
    assert "run/upstream" not in report
    out = capsys.readouterr().out
    assert "run/httpx" in out and "upstream arm skipped: no --upstream DIR" in out


def test_the_arms_compared_with_upstream_run_the_scenario():
    """Our arms that only run beside upstream (Anthropic, whole and streamed) answer the
    scenario right: start_worker refuses a worker whose first answer or tool outputs
    differ from the scenario's."""
    overhead = load("overhead")
    with fake_provider(overhead.script, validate=False) as fp:
        for arm in ("anthropic", "anthropic-stream"):
            proc, hello = overhead.start_worker(arm, fp.url, None)
            proc.stdin.close()
            proc.wait()
            assert hello["text"] == overhead.ANSWER["content"]
            assert hello["outputs"] == overhead.EXPECTED_OUTPUTS


def test_the_floor_declares_the_tools_the_library_declares():
    """The floor's worker writes the tools out (it imports no toolnexus): they must be
    what tn.to_openai gives for the scenario's functions, or the arms send other bodies."""
    from toolnexus.core.frozen import thaw

    overhead = load("overhead")
    worker = load("overhead_worker")
    assert thaw(overhead.TOOL_DEFS) == worker.TOOL_DEFS


def test_overhead_upstream_dir_without_the_package_is_skipped(tmp_path):
    src = load("overhead").upstream_source
    hint = f"pip install --target {tmp_path} toolnexus==0.21.0"
    assert src(str(tmp_path)) == (None, f"{tmp_path} holds no toolnexus package ({hint})")
    (tmp_path / "toolnexus").mkdir()
    (tmp_path / "toolnexus" / "__init__.py").write_text("")
    assert src(str(tmp_path)) == (str(tmp_path), "")


def test_upstream_worker_never_reaches_our_package(tmp_path):
    """A stand-in upstream without `core`: after isolate(), `toolnexus.core` must not resolve.

    Fails without dropping our editable finder from sys.meta_path: that finder resolves
    the children of a `toolnexus` it did not load to our files (checked first below).
    """
    (tmp_path / "toolnexus").mkdir()
    (tmp_path / "toolnexus" / "__init__.py").write_text("STAND_IN = True\n")
    probe = (
        "import importlib.util, json, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "import overhead_worker as w\n"
        "if sys.argv[1] == 'isolate':\n"
        f"    w.isolate({str(tmp_path)!r})\n"
        "else:\n"
        f"    sys.path.insert(0, {str(tmp_path)!r})\n"
        "import toolnexus\n"
        "spec = importlib.util.find_spec('toolnexus.core')\n"
        "print(json.dumps([toolnexus.__file__, spec and spec.origin]))\n"
    )

    def run(mode):
        out = subprocess.run(
            [sys.executable, "-c", probe, mode],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout
        return json.loads(out)

    editable = any("__editable__" in (getattr(f, "__module__", None) or "") for f in sys.meta_path)
    stand_in = str(tmp_path / "toolnexus" / "__init__.py")
    if editable:  # the hazard is real here: a bare path insert leaks our submodules
        leaked = run("path-only")
        assert leaked[0] == stand_in and leaked[1] and "core" in leaked[1]
    assert run("isolate") == [stand_in, None]


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


def test_prompt_cache_quick(capsys):
    report = load("prompt_cache").main(["--quick"])
    arms = report["arms"]
    assert set(arms) == {"capped_store(40)", "capped_store(40, keep=30)"}
    assert all(0 < a["share"] < 1 and a["prompt_tokens"] > 0 for a in arms.values())
    # keep=30 holds the front for ten messages between cuts: far more of it is reusable
    assert arms["capped_store(40, keep=30)"]["share"] > arms["capped_store(40)"]["share"] + 0.2
    assert "in a stable prefix" in capsys.readouterr().out


def test_turn_growth_quick(capsys):
    """Every path, and on each durable store configured here one client alone and two
    taking turns (PostgreSQL and Redis are skipped, with the reason, when not set)."""
    import os

    figures = load("turn_growth").main(["--quick"])
    stores = ["sqlite"] + [
        name
        for name, var in (
            ("postgres", "TOOLNEXUS_TEST_POSTGRES_DSN"),
            ("redis", "TOOLNEXUS_TEST_REDIS_URL"),
        )
        if os.environ.get(var)
    ]
    paths = [(p,) for p in ("memo", "history")]
    paths += [(s, p) for s in stores for p in ("own", "other", "cold", "unseen")]
    assert set(figures) == {(*p, n) for p in paths for n in (10, 1000)}
    assert all(f["cpu_ms"] > 0 for f in figures.values())
    out = capsys.readouterr().out
    assert "json.dumps" in out and "sqlite other" in out and "sqlite cold" in out
    assert "sqlite unseen" in out


def test_service_routing_quick(capsys):
    """Sticky and round-robin routing over two example workers (SQLite, a small memo)."""
    report = load("service/routing").main(["--quick"])
    modes = report["modes"]
    assert set(modes) == {"sticky", "round-robin"} and report["round-robin/sticky"] > 0
    for r in modes.values():
        assert r["errors"] == 0 and r["rps"] > 0 and r["worker_cpu_ms_per_request"] > 0
        assert r["p50_ms"] >= 50  # the fake model's latency is a floor
        assert len(r["peak_rss_mb"]) == 2 and all(m > 0 for m in r["peak_rss_mb"])
        assert sum(r["per_worker_requests"]) == r["requests"]  # both workers counted
    assert "round-robin / sticky" in capsys.readouterr().out


def test_instructions_quick(capsys):
    """Every arm's scenario of the instruction count runs (counting it takes minutes)."""
    ran = load("instructions").main(["--quick"])
    assert set(ran) == {"run-inline", "run", "arun-inline", "arun", "stream", "astream", "httpx",
                        "httpx-sse", "httpx-async", "httpx-async+threads"}  # fmt: skip
    out = capsys.readouterr().out
    assert out.count(" ran") == 10


def test_cold_instructions_quick(capsys):
    """The cold-exchange scenario counted by callgrind runs (here: SQLite and history=)."""
    load("cold_instructions").main(["--quick", "--stores", "history,sqlite"])
    assert capsys.readouterr().out.count(" ran") == 3


def test_cold_memory_quick(capsys):
    """What a fresh client keeps of conversations read cold is measured (here: SQLite)."""
    ratios = load("cold_memory").main(["--quick", "--stores", "sqlite"])
    assert set(ratios) == {("sqlite", "get"), ("sqlite", "run"), ("sqlite", "save")}
    assert all(r > 0 for r in ratios.values())
    assert capsys.readouterr().out.count("MB of JSON") == 3
