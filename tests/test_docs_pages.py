"""The python blocks of the docs pages this suite owns run, each alone in a fresh process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = ["forget.md", "observability.md", "portable.md"]
BLOCKS = [(page, n, block) for page in PAGES
          for n, block in enumerate(re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S))]  # fmt: skip  # noqa: E501


@pytest.mark.parametrize(("page", "n", "block"), BLOCKS, ids=[f"{p}-{n}" for p, n, _ in BLOCKS])
def test_docs_block_runs(page, n, block, tmp_path):
    if "opentelemetry" in block:
        pytest.importorskip("opentelemetry.sdk")
    done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"{page} block {n + 1} failed:\n{done.stderr}"
    expected = re.findall(r"^# (\[.*\])$", block, re.M)
    if expected:  # a printed value the page shows
        assert done.stdout.strip().splitlines()[-1] == expected[-1]
