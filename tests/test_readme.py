"""The README teaches: each `python` block runs alone in a fresh process, and links stay inside."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, re.S | re.M)  # ```py: illustrative


def test_there_are_blocks():
    assert len(BLOCKS) >= 5  # tools, memory by id, a store on disk, streaming, the message log


def test_readme_is_short():
    """The README teaches in at most 300 lines; the rest lives under docs/."""
    assert len(TEXT.splitlines()) <= 300


def test_readme_has_no_instruction_counts():
    """Instruction counts are a benchmark's figures: they live on docs/performance.md."""
    counts = re.findall(
        r"\d[\d.,]*\s*[MKk]?\s+instructions|instructions (?:per|a) \w+"
        r"|\b\d+(?:\.\d+)?M\b|callgrind",  # a count, its unit, a figure in millions, the tool
        TEXT,
        re.I,
    )
    assert not counts, counts


@pytest.mark.parametrize("n", range(len(BLOCKS)), ids=lambda n: f"block{n + 1}")
def test_each_python_block_runs_alone_in_a_fresh_process(n, tmp_path):
    """A block copied into a fresh file runs: its imports and setup are inside it."""
    script = tmp_path / f"block{n + 1}.py"
    script.write_text(BLOCKS[n])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
           os.environ.get("PYTHONPATH")]))}  # fmt: skip
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        env.pop(key, None)  # a reader's fresh shell has none
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"README block {n + 1} failed:\n{done.stderr}"


def test_links_stay_inside_the_repository():
    """A clone has only the repository: every link is a relative path to a file in it."""
    prose = re.sub(r"^```.*?^```", "", TEXT, flags=re.S | re.M)  # links live in prose only
    prose = re.sub(r"`[^`]*`", "", prose)
    links = re.findall(r"\]\(([^)\s]+)\)", prose)
    assert links, "expected at least the architecture link"
    for link in links:
        target = link.split("#", 1)[0]
        assert not re.match(r"[a-z]+:", target), f"link outside the repository: {link}"
        assert target and (ROOT / target).resolve().is_relative_to(ROOT), link
        assert (ROOT / target).exists(), f"dead link: {link}"
    assert "../shared" not in TEXT


def test_readme_shows_the_two_commands():
    assert "pip install -e . && python -m toolnexus demo" in TEXT
    assert "pip install -e '.[test]' && python -m pytest" in TEXT
