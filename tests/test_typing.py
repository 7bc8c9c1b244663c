"""mypy over tests/typing/: correct user code is clean, wrong user code is reported line by line."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import toolnexus

pytest.importorskip("mypy")

HERE = Path(__file__).resolve().parent / "typing"
ROOT = HERE.parents[1]
MARK = re.compile(r"#\s*(E|E-typed-options):\s*([a-z-]+)")
ERROR = re.compile(r"^[^:]+:(\d+): error: .*\[([a-z-]+)\]$")


def mypy(path: Path) -> set[tuple[int, str]]:
    """Return mypy's (line, error code) pairs for one file (not those inside toolnexus)."""
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
         "--show-error-codes", "--no-error-summary", "--python-version", "3.11", str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr or out.stdout
    return {(int(m[1]), m[2]) for line in out.stdout.splitlines() if (m := ERROR.match(line))}


def typed_options() -> bool:
    """Whether create_client takes its options as named parameters (not **options)."""
    params = inspect.signature(toolnexus.create_client).parameters.values()
    return not any(p.kind is p.VAR_KEYWORD for p in params)


def marked(path: Path) -> tuple[set, set]:
    """Return the (line, code) pairs marked `# E:` and those marked `# E-typed-options:`."""
    now, later = set(), set()
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if m := MARK.search(line):
            (now if m[1] == "E" else later).add((no, m[2]))
    return now, later


def test_correct_user_code_type_checks_clean():
    assert mypy(HERE / "ok.py") == set()


def test_wrong_user_code_is_reported_where_marked():
    found = mypy(HERE / "bad.py")
    now, later = marked(HERE / "bad.py")
    assert len(now) >= 6
    expected = now | later if typed_options() else now
    assert expected <= found, f"not reported: {sorted(expected - found)}"
    unmarked = {(no, code) for no, code in found if (no, code) not in now | later}
    assert not unmarked, f"errors on unmarked lines: {sorted(unmarked)}"


def test_the_package_says_it_is_typed():
    assert (ROOT / "toolnexus" / "py.typed").exists()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()
