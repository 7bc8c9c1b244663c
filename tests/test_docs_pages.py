"""Every docs page's python blocks run, each alone in a fresh process, and its links resolve.

A ```python block must run offline (the loopback fake provider, an in-process model, tmp
dirs). A ```py block is illustrative and is not run: only for examples that need a real
endpoint or files of yours (a CA bundle, a picture).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
BLOCKS = [(page.name, n, block) for page in PAGES
          for n, block in enumerate(FENCE.findall(page.read_text()))]  # fmt: skip


def test_the_pages_are_there():
    names = {p.name for p in PAGES}
    for page in ("guide.md", "stores.md", "deployment.md", "performance.md", "ARCHITECTURE.md"):
        assert page in names
    assert len(BLOCKS) >= 16  # the README tour moved here, whole


@pytest.mark.parametrize(("page", "n", "block"), BLOCKS, ids=[f"{p}-{n + 1}" for p, n, _ in BLOCKS])
def test_docs_block_runs(page, n, block, tmp_path):
    """A block copied into a fresh file runs: its imports and setup are inside it."""
    if "opentelemetry" in block:
        pytest.importorskip("opentelemetry.sdk")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
           os.environ.get("PYTHONPATH")]))}  # fmt: skip
    for key in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    ):
        env.pop(key, None)  # a reader's fresh shell has none
    done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"{page} block {n + 1} failed:\n{done.stderr}"
    expected = re.findall(r"^# (\[.*\])$", block, re.M)
    if expected:  # a printed value the page shows
        assert done.stdout.strip().splitlines()[-1] == expected[-1]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    """A relative link of a page names a file of the repository that exists."""
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    prose = re.sub(r"`[^`]*`", "", prose)
    for link in re.findall(r"\]\(([^)\s]+)\)", prose):
        target = link.split("#", 1)[0]
        if re.match(r"[a-z]+:", link) or not target:
            continue  # a web address, or an anchor of the page itself
        path = (page.parent / target).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{page.name}: dead link {link}"
