"""tools/mutate.py, the mutation-testing command: its operators (pure: source in, mutants
out) and one whole run over a module of a few lines with a known survivor."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import mutate  # noqa: E402  (tools/ is not a package: a maintainer's script)

OPS = ["+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^"]
CMPS = ["==", "!=", "<", "<=", ">", ">=", "is", "is not", "in", "not in"]


@given(st.sampled_from(OPS), st.sampled_from(CMPS), st.integers(-5, 5), st.text(max_size=5))
def test_each_mutant_compiles_and_changes_exactly_one_site(op, cmp, n, s):
    source = f"def f(a, b, c=None):\n    x = a {op} {n}\n    return (x {cmp} b) and c != {s!r}\n"
    original = ast.unparse(ast.parse(source))
    found = mutate.mutants(source)
    # the operator, the comparison, the constant, the string, `and`, `!=`, the
    # assignment and the return: one mutant each
    assert len(found) == 8, [m.what for m in found]
    assert [m.index for m in found] == list(range(len(found)))
    shown = set()
    for m in found:
        tree = mutate.mutate(source, m.index)
        compile(tree, "<mutant>", "exec")
        text = ast.unparse(tree)
        assert text != original, m
        shown.add(text)
    assert len(shown) == len(found)  # no two mutants are the same change
    assert mutate.mutants(source) == found  # the numbering is stable


def test_what_is_left_alone():
    source = '''"""A module docstring."""
__all__ = ["f"]


def f(a: int = 1) -> "str":
    """A docstring."""
    name: "Alias" = f"{a + 1}"
    return g(a) if a else 0  # pragma: no mutate


class C:
    """Its docstring."""
'''
    # Docstrings, `__all__`, annotations, the f-string and the pragma's line are skipped:
    # only the default `1` is left.
    assert [(m.line, m.what) for m in mutate.mutants(source)] == [(5, "1 -> 2")]


def test_every_operator_named_in_the_docs_is_applied():
    source = "def f(a, b):\n    while a:\n        if not a or b:\n            break\n"
    source += "        a += 1\n        continue\n    return g(a, key=b)\n"
    whats = {m.what for m in mutate.mutants(source)}
    assert {"`not` dropped", "`or` -> `and`", "break -> continue", "`+` -> `-`", "1 -> 2",
            "continue -> break", "return None", "argument 1 -> None",
            "`key=` dropped"} <= whats  # fmt: skip


def test_a_whole_run_kills_what_the_tests_check_and_names_what_they_do_not(tmp_path):
    (tmp_path / "calc.py").write_text(
        "def clamp(x, low, high):\n"
        "    if x < low:\n"
        "        return low\n"
        "    return min(x, high)\n"
        "\n"
        "\n"
        "def unused():\n"
        "    return 1\n"
    )
    (tmp_path / "test_calc.py").write_text(
        "from calc import clamp\n\n\n"
        "def test_clamp():\n"
        "    assert clamp(-5, 0, 10) == 0 and clamp(5, 0, 10) == 5 and clamp(50, 0, 10) == 10\n"
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutate.py"), "calc.py", "test_calc.py",
         "--json", "report.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    survivors = [(m["line"], m["what"]) for m in report["survived"]]
    # `x < low` -> `x <= low` is equal at x == low, which no test tries; unused() is
    # run by no test at all.
    assert survivors == [(2, "`<` -> `<=`"), (8, "return None"), (8, "1 -> 2")]
    assert (report["mutants"], report["killed"]) == (7, 4)
    assert "calc.py: 4 of 7 mutants killed" in out.stdout


@pytest.mark.parametrize("module", ["toolnexus/core/retry.py", "toolnexus/core/transcript.py"])
def test_the_measured_modules_have_their_tests_named(module):
    assert all((ROOT / t).exists() for t in mutate.TESTS[module])
    assert mutate.mutants((ROOT / module).read_text())
