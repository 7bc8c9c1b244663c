"""The suite is parametrized over the dialect registry: no test module names a list of
dialects by hand (a new row would silently skip it), and the kit the tests read requests
with (tests/dialect_kit.py) reads every row's request as its transcript reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from dialect_kit import RING, STYLES, calls, covers, mixed, others, results, said, sent

from toolnexus import create_client, define_tool, run, toolkit
from toolnexus.core.wire import DIALECTS, view
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

TESTS = Path(__file__).resolve().parent
NAMES = frozenset(DIALECTS)

# Literals of dialect names a test module may keep, by (module, the names in order), and
# why. A test about a specific set of dialects belongs here; one meant for every dialect
# reads the registry (dialect_kit.STYLES, others(), mixed(), RING) instead.
ALLOWED = {
    # The recorded SSE fixtures (tests/data/fixtures/sse) were captured from these two APIs
    # only: the table maps a fixture's dialect to its codec module, not a parametrization.
    ("test_sse.py", ("openai", "anthropic")): "the recorded streams' own dialects",
}


def literals(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """Return (line, names) of each list, tuple or set literal of two or more dialect names
    and nothing else, and of each dict literal keyed by dialect names that names some
    rows but not all (a partial table: a new row would be skipped, not fail)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict) and None not in node.keys:
            items = node.keys
        else:
            continue
        names = tuple(e.value for e in items if isinstance(e, ast.Constant))
        if len(names) < 2 or len(names) != len(items) or not set(names) <= NAMES:
            continue
        if isinstance(node, ast.Dict) and set(names) == NAMES:
            continue  # a whole table: a new row fails on it (KeyError, or covers())
        found.append((node.lineno, names))
    return found


def test_no_test_module_hard_codes_a_list_of_dialects():
    seen, unused = [], dict(ALLOWED)
    for path in sorted(TESTS.glob("*.py")):
        if path.name == Path(__file__).name:
            continue  # this module's literals are the scan's own examples
        for line, names in literals(path.read_text(encoding="utf-8")):
            if (path.name, names) in ALLOWED:
                unused.pop((path.name, names), None)
            else:
                seen.append(f"{path.name}:{line}: {list(names)}")
    assert seen == [], "parametrize over the registry (tests/dialect_kit.py), or allow it"
    assert unused == {}, "an allowed literal no test module has any more"


@pytest.mark.parametrize(
    "source, found",
    [
        ('STYLES = ["openai", "anthropic"]', [(1, ("openai", "anthropic"))]),
        ('@pytest.mark.parametrize("s", ("gemini", "responses"))\ndef t(s): pass',
         [(1, ("gemini", "responses"))]),
        ('for style in {"anthropic", "gemini"}: pass', [(1, ("anthropic", "gemini"))]),
        ('T = {"openai": 1, "anthropic": 2}', [(1, ("openai", "anthropic"))]),
        ('T = {"openai": 1, "anthropic": 2, "responses": 3, "gemini": 4}', []),
        ('S = ["openai"]', []),
        ('S = ["openai", "cohere"]', []),
        ('S = ("openai", style)', []),
    ],
)  # fmt: skip
def test_the_scan_finds_a_hand_list_and_only_that(source, found):
    assert literals(source) == found


def test_a_table_missing_a_row_fails_loudly():
    whole = {d: d for d in DIALECTS}
    assert covers(whole) is whole
    with pytest.raises(AssertionError, match="must cover the registry"):
        covers({d: d for d in list(DIALECTS)[:-1]})
    with pytest.raises(AssertionError, match="must cover the registry"):
        covers({**whole, "cohere": 1})


def test_the_kit_s_row_helpers_are_the_registry():
    assert STYLES == tuple(DIALECTS) and len(RING) == len(STYLES)
    assert sorted(a for a, _ in RING) == sorted(b for _, b in RING) == sorted(STYLES)
    assert all(a != b for a, b in RING)
    assert set(mixed(len(STYLES), 2)) == set(STYLES) and mixed(2, 1) == STYLES[1:3]
    assert all(set(others(d)) == set(STYLES) - {d} for d in STYLES)


@define_tool
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@pytest.mark.parametrize("style", STYLES)
def test_the_kit_reads_a_request_as_its_transcript_reads(style):
    script = [tool_calls_reply(("add", {"a": 1, "b": 2}), ("add", {"a": 2, "b": 2})),
              text_reply("3 and 4")]  # fmt: skip
    history = [{"role": "system", "content": "Be brief."}]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", api_key="k")
        r = run(c, "1+2 and 2+2?", toolkit=toolkit(add), history=history)
    asked = sent(fp.requests[1]["body"])
    stored = view.items(r["messages"])[:-1]  # the answer came after the request
    assert asked[0] == ("system", "Be brief.")
    assert said(asked) == said(stored) == ["1+2 and 2+2?", ""]
    assert calls(asked) == calls(stored) and len(calls(asked)) == 2
    ids = [i for i, _ in calls(asked)]
    assert results(asked) == results(stored) == list(zip(ids, ["3", "4"], strict=True))
