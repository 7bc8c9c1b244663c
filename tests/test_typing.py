"""mypy over tests/typing/, as a user's project sees toolnexus after a regular install.

The package is installed (pip, not editable) into a temporary target directory and mypy
runs from outside the repository, so what it reads is the installed copy: its py.typed and
its annotations. Correct user code is clean (ok.py; strict_ok.py under --strict), wrong
user code is reported line by line (bad.py).
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import toolnexus

pytest.importorskip("mypy")

HERE = Path(__file__).resolve().parent / "typing"
ROOT = HERE.parents[1]
MARK = re.compile(r"#\s*(E|E-typed-options):\s*([a-z-]+)")
ERROR = re.compile(r"^([^:]+):(\d+): error: .*\[([a-z-]+)\]$")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a directory outside the repository holding the user files and, in `site/`,
    toolnexus installed from a copy of the checkout by pip (a regular install)."""
    top = tmp_path_factory.mktemp("typing-user")
    src = top / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toolnexus", src / "toolnexus",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    # Offline, a build that needs an index fails fast instead of waiting on the network.
    env = {**os.environ, "PIP_DEFAULT_TIMEOUT": "15", "PIP_RETRIES": "0"}
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
               str(top / "site"), str(src)]  # fmt: skip
    # This environment's own setuptools first (no download); else pip's isolated build.
    for extra in (["--no-build-isolation"], []):
        out = subprocess.run([*install, *extra], capture_output=True, text=True, timeout=120,
                             env=env)  # fmt: skip
        if out.returncode == 0:
            break
    else:
        pytest.skip(f"pip could not build and install toolnexus here: {out.stderr[-400:]}")
    shutil.rmtree(src)  # only the installed copy is left to find
    for f in HERE.glob("*.py"):
        shutil.copy(f, top / f.name)
    return top


def mypy(where: Path, *names: str, strict: bool = False) -> dict[str, set[tuple[int, str]]]:
    """Return mypy's (line, error code) pairs per user file (none inside toolnexus)."""
    env = {**os.environ, "PYTHONPATH": str(where / "site")}
    flags = ["--strict"] if strict else []
    out = subprocess.run(
        [sys.executable, "-m", "mypy", *flags, "--follow-imports=silent", "--no-incremental",
         "--show-error-codes", "--no-error-summary", "--python-version", "3.11", *names],
        capture_output=True, text=True, cwd=where, env=env, timeout=300,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr or out.stdout
    found: dict[str, set[tuple[int, str]]] = {n: set() for n in names}
    for line in out.stdout.splitlines():
        if m := ERROR.match(line):
            found.setdefault(m[1], set()).add((int(m[2]), m[3]))
    return found


@pytest.fixture(scope="module")
def found(installed: Path) -> dict[str, set[tuple[int, str]]]:
    return mypy(installed, "ok.py", "bad.py")


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


def test_the_installed_copy_is_what_mypy_reads(installed):
    assert not (installed / "site" / "toolnexus" / "__editable__").exists()
    assert (installed / "site" / "toolnexus" / "py.typed").exists()
    assert (installed / "site" / "toolnexus" / "api.py").read_text() == (
        ROOT / "toolnexus" / "api.py"
    ).read_text()
    assert not (installed / "toolnexus").exists()  # nothing but site/ to import it from


def test_correct_user_code_type_checks_clean(found):
    assert found["ok.py"] == set()


def test_the_verbs_results_are_typed_under_strict(installed):
    assert mypy(installed, "strict_ok.py", strict=True) == {"strict_ok.py": set()}


def test_wrong_user_code_is_reported_where_marked(found):
    now, later = marked(HERE / "bad.py")
    assert len(now) >= 8
    expected = now | later if typed_options() else now
    assert expected <= found["bad.py"], f"not reported: {sorted(expected - found['bad.py'])}"
    unmarked = {(no, code) for no, code in found["bad.py"] if (no, code) not in now | later}
    assert not unmarked, f"errors on unmarked lines: {sorted(unmarked)}"


def test_the_package_says_it_is_typed():
    assert (ROOT / "toolnexus" / "py.typed").exists()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()
