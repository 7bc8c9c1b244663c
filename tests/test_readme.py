"""The README's `python` blocks run, in order, in one namespace: the front door stays true."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    assert len(blocks) >= 5
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md block {i + 1}", "exec"), namespace)  # noqa: S102


def test_readme_shows_the_two_commands():
    text = README.read_text()
    assert "pip install -e . && python -m toolnexus demo" in text
    assert "pip install -e '.[test]' && python -m pytest" in text
