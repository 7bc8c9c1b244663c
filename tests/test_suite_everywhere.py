"""The suite is the same everywhere: its data lives in the repository, skips say why and
what to set, and the summary shows them (`-rs`)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_summary_prints_skip_reasons():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "-rs" in options["ini_options"]["addopts"].split()


def test_nothing_in_the_tests_reads_outside_the_repository():
    """Data the tests read is under tests/data/, never in a folder beside the clone."""
    for path in ROOT.joinpath("tests").glob("*.py"):
        if path.name == Path(__file__).name:
            continue  # its own patterns
        text = path.read_text()
        assert "parents[2]" not in text and '"shared" /' not in text, path.name


def _skips_of(test: str, env: dict) -> str:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", test]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    return out.stdout


def test_a_skipped_server_test_names_the_variable_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLNEXUS_")}
    env["PYTHONPATH"] = str(ROOT)
    shown = _skips_of("tests/test_backends.py", env)
    assert "SKIPPED" in shown  # -rs: the reasons are in the summary
    assert "set TOOLNEXUS_TEST_REDIS_URL, e.g. TOOLNEXUS_TEST_REDIS_URL=redis://" in shown
    assert (
        "set TOOLNEXUS_TEST_POSTGRES_DSN, e.g. TOOLNEXUS_TEST_POSTGRES_DSN=postgresql://" in shown
    )


def test_a_run_leaves_nothing_in_the_temporary_directory(tmp_path):
    """Failed before: README and docs blocks (tempfile.mkdtemp, as a reader writes it),
    the notebooks' kernels and a benchmark's doctest left ~22 entries per run. Here a
    run of the README's and stores.md's blocks, in a private temporary directory, leaves
    only pytest's own basetemp there."""
    private = tmp_path / "tmp"
    private.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(private)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_readme.py",
               "tests/test_docs_pages.py", "-k", "readme or stores"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:]
    assert {p.name for p in private.iterdir()} == {f"pytest-of-{getpass.getuser()}"}


def test_the_license_is_an_spdx_expression():
    """Failed before: `license = { text = "MIT" }`, which setuptools deprecates (a table
    of warnings in every build, an error from 2027-02-18)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT"
    assert "setuptools>=77" in meta["build-system"]["requires"]  # PEP 639 support
    assert not any("License ::" in c for c in meta["project"].get("classifiers", []))
