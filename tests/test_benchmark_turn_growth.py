"""The per-turn growth benchmark's quick mode runs, so it cannot rot (figures: README)."""

import importlib.util
import pathlib

BENCH = pathlib.Path(__file__).parent.parent / "benchmarks" / "turn_growth.py"


def test_turn_growth_quick_mode_runs_and_reports_each_path(capsys):
    spec = importlib.util.spec_from_file_location("turn_growth", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = bench.main(["--quick"])
    assert set(figures) == {(p, n) for p in ("memo", "history") for n in (10, 1000)}
    assert all(f["cpu_ms"] > 0 for f in figures.values())
    assert "json.dumps" in capsys.readouterr().out
