"""The per-turn growth benchmark's quick mode runs, so it cannot rot (figures: README)."""

import importlib.util
import os
import pathlib

BENCH = pathlib.Path(__file__).parent.parent / "benchmarks" / "turn_growth.py"


def test_turn_growth_quick_mode_runs_and_reports_each_path(capsys):
    spec = importlib.util.spec_from_file_location("turn_growth", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = bench.main(["--quick"])
    stores = ["sqlite"] + [
        name
        for name, var in (
            ("postgres", "TOOLNEXUS_TEST_POSTGRES_DSN"),
            ("redis", "TOOLNEXUS_TEST_REDIS_URL"),
        )  # fmt: skip
        if os.environ.get(var)
    ]
    paths = [(p,) for p in ("memo", "history")]
    paths += [(s, p) for s in stores for p in ("own", "other")]
    assert set(figures) == {(*p, n) for p in paths for n in (10, 1000)}
    assert all(f["cpu_ms"] > 0 for f in figures.values())
    out = capsys.readouterr().out
    assert "json.dumps" in out and "sqlite other" in out
