"""Issue 39, item 1: every check on untrusted bytes runs in linear time.

The JSON depth pre-check used to be quadratic on a string of escaped quotes that never
closes (a model's 120 KB tool arguments held the interpreter for 68 s). The timed cases
run in a child process: on the old code they would hold the GIL for hours inside one C
call, which no in-process timeout can interrupt, so the child is killed at the bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.calls import ARGUMENT_BYTES
from toolnexus.core.wire.jsonload import MAX_BYTES, JSONLimitError, load, nesting_exceeds

# Linear cases take well under a second each at 4 MiB; a loaded 2-core machine gets a
# wide margin. The quadratic code needed 5.4 s for 40 KB, i.e. hours at 4 MiB.
CASE_SECONDS = 6.0
CHILD_SECONDS = 60.0

# Each adversarial text is ARGUMENT_BYTES long (the bound on a tool call's arguments),
# built in the child from this spec: (prefix, repeated unit, suffix).
ADVERSARIAL = {
    "escaped quotes, never closed": ("[" * 101 + '"', '\\"', ""),
    "escaped backslashes then quotes": ("[" * 101 + '"', '\\\\\\"', ""),
    "quote soup": ("[" * 101, '"', ""),
    "backslash soup": ("[" * 101, "\\", ""),
    "deep pairs repeated": ("", "[" * 100 + "]" * 100, ""),
    "a million empty strings": ("[" * 101, '"",', "]"),
    "brackets inside one open string": ('["', "[{", ""),
    "100,000 deep": ("", "[", ""),
}

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from toolnexus.core.wire.jsonload import load
    size, cases = json.loads(sys.stdin.read())
    out = {}
    for name, (head, unit, tail) in cases.items():
        body = unit * ((size - len(head) - len(tail)) // len(unit))
        text = head + body + tail
        t0 = time.perf_counter()
        try:
            load(text, max_bytes=size)
            what = "decoded"
        except ValueError as e:
            what = type(e).__name__
        out[name] = [time.perf_counter() - t0, what, len(text)]
        print(json.dumps({name: out[name]}), flush=True)
    """
)


def _child(code: str, payload: object, seconds: float) -> list[dict]:
    """Run `code` in a fresh interpreter (this checkout's package); its JSON lines."""
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(payload), capture_output=True,
            text=True, timeout=seconds, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        seen = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"still running after {seconds} s (finished: {seen.strip() or 'none'})")
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_json_depth_check_is_linear_on_adversarial_text_at_the_argument_bound():
    """Every adversarial shape at 4 MiB is answered (decoded or refused) in seconds."""
    lines = _child(_CHILD, [ARGUMENT_BYTES, ADVERSARIAL], CHILD_SECONDS)
    seen = {k: v for line in lines for k, v in line.items()}
    assert set(seen) == set(ADVERSARIAL)
    for name, (seconds, what, size) in seen.items():
        assert size > ARGUMENT_BYTES - 300, name
        assert what in ("decoded", "JSONDecodeError", "JSONLimitError"), (name, what)
        assert seconds < CASE_SECONDS, f"{name}: {seconds:.2f} s"
    assert seen["100,000 deep"][1] == "JSONLimitError"
    assert seen["escaped quotes, never closed"][1] == "JSONLimitError"


_LOOP_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from toolnexus import create_client, define_tool, run, toolkit
    from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
    size = json.loads(sys.stdin.read())
    arguments = '{"q": [' + "[" * 101 + '"' + '\\\\"' * ((size - 120) // 2)

    @define_tool
    def lookup(q: str) -> str:
        "Look q up."
        return q

    script = [tool_calls_reply({"name": "lookup", "arguments": arguments}), text_reply("ok")]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k", retries=0)
        t0 = time.perf_counter()
        r = run(c, "go", toolkit=toolkit(lookup))
        took = time.perf_counter() - t0
        c.close()
    call = r["tool_calls"][0]
    print(json.dumps({"seconds": took, "text": r["text"], "is_error": call["is_error"],
                      "output": str(call["output"])[:200], "size": len(arguments)}))
    """
)


def test_json_depth_check_is_linear_at_the_body_bound():
    """The same check reads provider bodies, SSE events and structured output, bounded at
    MAX_BYTES (32 MiB): the worst shapes there stay in seconds too."""
    worst = {k: ADVERSARIAL[k] for k in ("escaped quotes, never closed",)}  # the bug's shape
    lines = _child(_CHILD, [MAX_BYTES, worst], CHILD_SECONDS)
    seen = {k: v for line in lines for k, v in line.items()}
    assert set(seen) == set(worst)
    for name, (seconds, what, size) in seen.items():
        assert size > MAX_BYTES - 300 and what != "decoded", name
        assert seconds < 4 * CASE_SECONDS, f"{name}: {seconds:.2f} s"


def test_a_model_answer_of_adversarial_arguments_does_not_stall_a_run():
    """Over loopback: 4 MiB of never-closed escaped quotes as a tool call's arguments
    become an error result the model reads, within seconds (68 s for 120 KB before)."""
    (out,) = _child(_LOOP_CHILD, ARGUMENT_BYTES, CHILD_SECONDS)
    assert out["size"] > ARGUMENT_BYTES - 200
    assert out["text"] == "ok" and out["is_error"]
    assert "not valid JSON" in out["output"]
    assert out["seconds"] < 4 * CASE_SECONDS, out


# ---- the pure check, exactly --------------------------------------------------------


def _reference_depth(text: str) -> int:
    """A plain scanner with the check's reading of malformed text: a backslash escapes
    the next character anywhere; a string never closed leaves its brackets counted."""
    best = depth = 0
    in_string = escaped = False
    open_at = -1
    i = 0
    while i < len(text):
        c = text[i]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            in_string, open_at = (not in_string), i
        elif not in_string and c in "[{":
            depth += 1
            best = max(best, depth)
        elif not in_string and c in "]}":
            depth -= 1
        i += 1
    if in_string:  # read again from the open quote as if it were not there
        rest = _reference_depth_from(text[open_at + 1 :], depth)
        best = max(best, rest)
    return best


def _reference_depth_from(text: str, depth: int) -> int:
    best, escaped = depth, False
    for c in text:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth -= 1
    return best


@given(st.text(alphabet='[]{}"\\a', max_size=400), st.integers(0, 8))
def test_nesting_check_matches_a_plain_scanner_on_any_soup(text, limit):
    assert nesting_exceeds(text, limit) == (_reference_depth(text) > limit)


json_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='[]{}"\\/ab'))
json_values = st.recursive(
    json_leaves,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3)
    ),
    max_leaves=20,
)


def _depth(v) -> int:
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    return 0


@given(json_values, st.booleans(), st.integers(0, 6))
def test_nesting_check_is_exact_for_json_with_escapes(value, ascii_only, limit):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert nesting_exceeds(text, limit) == (_depth(value) > limit)
    if _depth(value) > limit:
        with pytest.raises(JSONLimitError):
            load(text, max_depth=limit)
