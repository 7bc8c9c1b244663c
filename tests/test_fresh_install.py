"""The README's first command alone, as a newcomer runs it: a new virtual environment,
`pip install -e <checkout>` (runtime dependencies only, from the package index), then
every `python` block of the README and docs, and mypy --strict over the README's typed
example. Slow (a venv and downloads, about 20-60 s) and it needs the package index: it
is marked `fresh_install`, and skips, saying why, when pip cannot reach an index."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
NEEDS = re.compile(r"\A# needs: pip install (.*?)(?:\s+\(.*\))?$", re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks() -> list[tuple[str, int, str]]:
    """Return (page, number, code) of every python block of the README and docs."""
    return [(p.name, n + 1, b) for p in PAGES for n, b in enumerate(FENCE.findall(p.read_text()))]


def _clean_env() -> dict[str, str]:
    """This environment without what would point a child at the checkout or a key."""
    drop = ("PYTHONPATH", "PYTHONHOME", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
            "OPENROUTER_API_KEY")  # fmt: skip
    return {**{k: v for k, v in os.environ.items() if k not in drop},
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip


def _sh(*cmd: str | Path, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                          env=_clean_env(), timeout=timeout)  # fmt: skip


def _checkout_copy(top: Path) -> Path:
    """Copy what `pip install -e .` reads, so the build leaves nothing in the checkout."""
    src = top / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toolnexus", src / "toolnexus",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    return src


def _run_block(python: Path, code: str, where: Path) -> subprocess.CompletedProcess:
    where.mkdir()
    return _sh(python, "-c", code, cwd=where, timeout=120)


def _the_demo_runs_and_continues(python: Path, top: Path) -> None:
    """The rest of the README's first command: `python -m toolnexus demo`, twice."""
    env = {**_clean_env(), "XDG_DATA_HOME": str(top / "data")}
    runs = [subprocess.run([str(python), "-m", "toolnexus", "demo"], capture_output=True,
                           text=True, cwd=top, env=env, timeout=120) for _ in range(2)]  # fmt: skip
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert "remembered 5 messages" in runs[1].stdout


@pytest.mark.fresh_install
def test_the_tour_runs_and_types_check_after_the_first_command_alone(tmp_path):
    pytest.importorskip("mypy")
    src, venv = _checkout_copy(tmp_path), tmp_path / "venv"
    assert _sh(sys.executable, "-m", "venv", venv, cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    done = _sh(python, "-m", "pip", "install", "-q", "-e", src, cwd=tmp_path)
    if done.returncode != 0:
        if re.search(r"No matching distribution|Could not find a version|connection", done.stderr,
                     re.I):  # fmt: skip
            pytest.skip(f"pip could not reach a package index: {done.stderr[-300:]}")
        pytest.fail(f"pip install -e failed:\n{done.stderr[-2000:]}")
    found = _sh(python, "-c", "import toolnexus, sys; print(toolnexus.__file__)", cwd=tmp_path)
    assert found.stdout.strip() == str(src / "toolnexus" / "__init__.py")
    _the_demo_runs_and_continues(python, tmp_path)

    needing, failed = [], []
    for page, n, code in blocks():
        if NEEDS.search(code):
            needing.append((page, n, code))
            continue
        out = _run_block(python, code, tmp_path / f"run-{page}-{n}")
        if out.returncode != 0:
            failed.append(f"{page} block {n}: {out.stderr.strip()[-600:]}")
    assert not failed, "\n".join(failed)
    assert len(needing) <= 4, [f"{p} {n}" for p, n, _ in needing]  # the rest need no extra

    # mypy, beside the editable install, finds the package (a plain path entry) and its
    # py.typed; the README's typed example passes --strict, with toolkit= as a list too.
    typed = next(code for page, _, code in blocks() if page == "README.md")
    user = tmp_path / "user"
    user.mkdir()
    (user / "example.py").write_text(typed)
    (user / "as_list.py").write_text(
        typed.replace("toolkit=toolkit(get_weather, add)", "toolkit=[get_weather, add]")
    )
    assert "toolkit=[get_weather, add]" in (user / "as_list.py").read_text()
    checked = _sh(sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                  "--python-executable", python, "example.py", "as_list.py", cwd=user)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # The blocks that name an extra run once it is installed as they say.
    wanted = sorted({arg for _, _, code in needing
                     for arg in shlex.split(NEEDS.search(code)[1])})  # fmt: skip
    extras = [a.replace("toolnexus[", f"{src}[") for a in wanted]
    done = _sh(python, "-m", "pip", "install", "-q", *extras, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for page, n, code in needing:
        out = _run_block(python, code, tmp_path / f"extra-{page}-{n}")
        assert out.returncode == 0, f"{page} block {n}: {out.stderr[-600:]}"
