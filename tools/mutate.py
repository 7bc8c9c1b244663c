"""Mutation testing of one module: mutmut-style operators applied with `ast`, each mutant
run against the module's tests in a forked child.

    python tools/mutate.py toolnexus/core/retry.py            # its tests from TESTS below
    python tools/mutate.py toolnexus/store/_rows.py tests/test_rows.py -j 2 --json out.json

A mutant is one small change to the module's source (a comparison, an operator, a
constant, a string, a keyword argument dropped, a call's argument, a return value or an
assignment turned to None, `and`/`or`, `not` dropped, `break`/`continue`); it is killed
when a test fails (or the tests time out), and survives when they all pass: a survivor
names behaviour no test asserts. The library is imported once; each mutant runs in a
fork whose functions have their code objects replaced in place, so every reference to
them (`from x import f`, a table of functions, a partial) runs the mutant. Docstrings,
annotations, `__all__`, f-strings and lines marked `# pragma: no mutate` are left alone.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import signal
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

# The tests that exercise each module, for the modules measured in docs/testing.md.
TESTS = {
    "toolnexus/core/retry.py": [
        "tests/test_retry_survivors.py",
        "tests/test_retry_rules.py",
        "tests/test_retry_wait.py",
        "tests/test_resilience.py",
    ],
    "toolnexus/core/transcript.py": ["tests/test_transcript_rules.py", "tests/test_transcript.py"],
    "toolnexus/store/_rows.py": [
        "tests/test_rows_rules.py",
        "tests/test_rows.py",
        "tests/test_sqlite_store.py",
    ],
    "toolnexus/store/_encode.py": ["tests/test_rows_rules.py", "tests/test_rows.py"],
    "toolnexus/store/_split.py": ["tests/test_split_rules.py", "tests/test_rows_rules.py"],
    "toolnexus/store/forks.py": ["tests/test_forks_rules.py", "tests/test_fork.py"],
    "toolnexus/store/check.py": [
        "tests/test_check_rules.py",
        "tests/test_clear_errors.py",
        "tests/test_store_contract_messages.py",
    ],
    "toolnexus/store/document.py": ["tests/test_document_rules.py", "tests/test_file_store.py"],
    "toolnexus/store/scoped.py": ["tests/test_scoped_rules.py", "tests/test_tenant_scope.py"],
    "toolnexus/store/fused.py": ["tests/test_fused.py", "tests/test_fused_rules.py"],
    "toolnexus/store/locks.py": [
        "tests/test_locks_rules.py",
        "tests/test_locks.py",
        "tests/test_lost_locks.py",
    ],
    "toolnexus/store/decorators.py": [
        "tests/test_decorators_rules.py",
        "tests/test_decorators.py",
        "tests/test_decorator_signatures.py",
        "tests/test_fused_stacks.py",
        "tests/test_store_contract.py",
    ],
    "toolnexus/history/entry.py": [
        "tests/test_entry_rules.py",
        "tests/test_history.py",
        "tests/test_history_tool.py",
    ],
    "toolnexus/history/lazy.py": ["tests/test_lazy_rules.py"],
    "toolnexus/history/tool.py": ["tests/test_history_tool_rules.py", "tests/test_history_tool.py"],
    "toolnexus/history/wiring.py": [
        "tests/test_wiring_rules.py",
        "tests/test_history_tool.py",
        "tests/test_history.py",
        "tests/test_message_log_wiring.py",
    ],
    "toolnexus/core/scope.py": [
        "tests/test_scope_rules.py",
        "tests/test_tenant_scope.py",
        "tests/test_decorators.py",
    ],
    "toolnexus/core/calls.py": [
        "tests/test_calls_rules.py",
        "tests/test_untrusted_bounds.py",
        "tests/test_decoding.py",
        "tests/test_loop.py",
    ],
    "toolnexus/core/walk.py": [
        "tests/test_walk_rules.py",
        "tests/test_secrets.py",
        "tests/test_sse.py",
    ],
    "toolnexus/core/tool.py": [
        "tests/test_tool_rules.py",
        "tests/test_tool.py",
        "tests/test_tool_helpers.py",
    ],
    "toolnexus/core/steps.py": [
        "tests/test_steps_rules.py",
        "tests/test_loop.py",
        "tests/test_bounded_turns.py",
    ],
    "toolnexus/core/frozen.py": ["tests/test_frozen_rules.py"],
    "toolnexus/core/bounds.py": ["tests/test_bounds_rules.py", "tests/test_memo_bound.py"],
    "toolnexus/store/_ids.py": ["tests/test_ids_rules.py"],
    "toolnexus/store/_decode.py": [
        "tests/test_decode_rules.py",
        "tests/test_split_rules.py",
        "tests/test_rows.py",
        "tests/test_rows_rules.py",
    ],
    "toolnexus/core/wire/jsonload.py": ["tests/test_jsonload_rules.py"],
    "toolnexus/core/wire/generated.py": ["tests/test_generated_rules.py"],
    "toolnexus/core/wire/inband.py": ["tests/test_inband_rules.py"],
    "toolnexus/core/wire/sse.py": ["tests/test_sse_rules.py", "tests/test_sse.py"],
    "toolnexus/core/wire/parts.py": ["tests/test_parts_rules.py", "tests/test_parts.py"],
    "toolnexus/core/wire/common.py": ["tests/test_common_rules.py"],
    "toolnexus/core/failover.py": ["tests/test_failover_rules.py"],
    "toolnexus/core/genai.py": ["tests/test_genai_rules.py", "tests/test_genai.py"],
    "toolnexus/core/neutral.py": ["tests/test_neutral_rules.py", "tests/test_dialect_record.py"],
    "toolnexus/core/wire/dialect.py": [
        "tests/test_dialect_rules.py",
        "tests/test_dialect_record.py",
    ],
    "toolnexus/core/wire/view.py": ["tests/test_view_rules.py"],
    "toolnexus/core/wire/responses_items.py": ["tests/test_responses_items_rules.py"],
    "toolnexus/core/wire/chat.py": ["tests/test_chat_rules.py"],
    "toolnexus/core/wire/writers.py": ["tests/test_writers_rules.py"],
    "toolnexus/core/wire/translate.py": ["tests/test_translate_rules.py"],
    "toolnexus/core/flow.py": ["tests/test_flow_rules.py"],
    "toolnexus/core/wire/responses.py": [
        "tests/test_responses_rules.py",
        "tests/test_responses.py",
    ],
    "toolnexus/core/wire/responses_stream.py": [
        "tests/test_responses_stream_rules.py",
        "tests/test_responses.py",
    ],
    "toolnexus/core/wire/gemini.py": ["tests/test_gemini_rules.py", "tests/test_gemini.py"],
    "toolnexus/core/wire/gemini_items.py": [
        "tests/test_gemini_items_rules.py",
        "tests/test_gemini.py",
        "tests/test_dialect_record.py",
    ],
    "toolnexus/core/wire/gemini_read.py": [
        "tests/test_gemini_read_rules.py",
        "tests/test_gemini.py",
    ],
    "toolnexus/core/wire/gemini_schema.py": [
        "tests/test_gemini_schema_rules.py",
        "tests/test_gemini.py",
    ],
    "toolnexus/core/wire/openai.py": ["tests/test_openai_rules.py"],
    "toolnexus/core/wire/openai_stream.py": ["tests/test_openai_stream_rules.py"],
    "toolnexus/core/wire/anthropic.py": ["tests/test_anthropic_rules.py"],
    "toolnexus/core/wire/anthropic_stream.py": ["tests/test_anthropic_stream_rules.py"],
    "toolnexus/core/wire/anthropic_request.py": ["tests/test_anthropic_request_rules.py"],
    "toolnexus/core/wire/anthropic_replay.py": ["tests/test_anthropic_replay_rules.py"],
    "toolnexus/core/wire/openai_fields.py": ["tests/test_openai_fields_rules.py"],
    "toolnexus/core/wire/openai_read.py": ["tests/test_openai_read_rules.py"],
}

_CMP: dict[type, type] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
    ast.GtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}  # fmt: skip
_BIN: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.Div, ast.Pow: ast.Mult, ast.LShift: ast.RShift,
    ast.RShift: ast.LShift, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
}  # fmt: skip
_BOOL: dict[type, type] = {ast.And: ast.Or, ast.Or: ast.And}
_SYMBOL = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+",
    ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.And: "and", ast.Or: "or",
}  # fmt: skip


class Mutant(NamedTuple):
    """One mutation site: its index in the module's list, its lines, what it changes."""

    index: int
    line: int
    what: str
    end: int


# A site is (node, how to change it in place, what it changes).
Site = tuple[ast.AST, Callable[[ast.AST], None], str]


def _set(field: str, value: Callable[[], Any]) -> Callable[[ast.AST], None]:
    return lambda node: setattr(node, field, value())


def _set_op(i: int, op: type) -> Callable[[ast.AST], None]:
    return lambda node: node.ops.__setitem__(i, op())


def _drop_keyword(i: int) -> Callable[[ast.AST], None]:
    return lambda node: node.keywords.pop(i)


def _none_arg(i: int) -> Callable[[ast.AST], None]:
    return lambda node: node.args.__setitem__(i, ast.Constant(None))


def _not_not(node: ast.AST) -> None:
    node.operand = ast.UnaryOp(op=ast.Not(), operand=node.operand)  # `not x` -> truth of x


def _become(kind: type) -> Callable[[ast.AST], None]:
    return lambda node: setattr(node, "__class__", kind)


def _constant_sites(node: ast.Constant) -> list[Site]:
    v = node.value
    if isinstance(v, bool):
        return [(node, _set("value", lambda: not v), f"{v} -> {not v}")]
    if isinstance(v, (int, float)):
        return [(node, _set("value", lambda: v + 1), f"{v!r} -> {v + 1!r}")]
    if isinstance(v, str):
        return [(node, _set("value", lambda: f"XX{v}XX"), f"{v!r:.40} -> 'XX...XX'")]
    return []


def _node_sites(node: ast.AST) -> list[Site]:
    """The mutations of one node (its children are visited apart)."""
    if isinstance(node, ast.Compare):
        swaps = [(i, type(op), _CMP[type(op)]) for i, op in enumerate(node.ops)]
        return [(node, _set_op(i, new), f"`{_SYMBOL[old]}` -> `{_SYMBOL[new]}`")
                for i, old, new in swaps]  # fmt: skip
    if isinstance(node, (ast.BinOp, ast.AugAssign, ast.BoolOp)):
        table = _BOOL if isinstance(node, ast.BoolOp) else _BIN
        new = table.get(type(node.op))
        if new is None:
            return []
        what = f"`{_SYMBOL[type(node.op)]}` -> `{_SYMBOL[new]}`"
        return [(node, _set("op", new), what)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return [(node, _not_not, "`not` dropped")]
    if isinstance(node, ast.Constant):
        return _constant_sites(node)
    if isinstance(node, ast.Return) and not _is_none(node.value):
        return [(node, _set("value", lambda: ast.Constant(None)), "return None")]
    if isinstance(node, ast.Assign) and not _is_none(node.value):
        return [(node, _set("value", lambda: ast.Constant(None)), "assigned None")]
    if isinstance(node, ast.Call):
        # an argument that is None already has no mutant (it would be the module unchanged)
        args = [(node, _none_arg(i), f"argument {i + 1} -> None") for i, a in enumerate(node.args)
                if not isinstance(a, ast.Starred) and not _is_none(a)]  # fmt: skip
        return args + [(node, _drop_keyword(i), f"`{k.arg}=` dropped")
                       for i, k in enumerate(node.keywords) if k.arg is not None]  # fmt: skip
    if isinstance(node, ast.Break):
        return [(node, _become(ast.Continue), "break -> continue")]
    if isinstance(node, ast.Continue):
        return [(node, _become(ast.Break), "continue -> break")]
    return []


def _is_none(node: ast.AST | None) -> bool:
    return node is None or isinstance(node, ast.Constant) and node.value is None


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    body = getattr(parent, "body", None)
    return (
        isinstance(parent, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and bool(body)
        and body[0] is node
        and isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _skipped(node: ast.AST, parent: ast.AST | None, quiet: set[int]) -> bool:
    """Whether a node and all below it are left alone."""
    if getattr(node, "lineno", None) in quiet or isinstance(node, ast.JoinedStr):
        return True
    if _is_docstring(node, parent):
        return True
    targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
    return isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets
    )


_ANNOTATIONS = {"annotation", "returns", "type_comment"}


def _walk(node: ast.AST, parent: ast.AST | None, quiet: set[int]) -> Iterator[Site]:
    if _skipped(node, parent, quiet):
        return
    yield from _node_sites(node)
    for field, value in ast.iter_fields(node):
        if field in _ANNOTATIONS:
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                yield from _walk(child, node, quiet)


def _quiet_lines(source: str) -> set[int]:
    return {i for i, text in enumerate(source.splitlines(), 1) if "pragma: no mutate" in text}


def sites(source: str) -> list[Site]:
    """Return every mutation site of `source`, in a fixed order (a fresh tree each call)."""
    return list(_walk(ast.parse(source), None, _quiet_lines(source)))


def mutants(source: str) -> list[Mutant]:
    """Return the mutants of `source`: one per site, numbered in order."""
    return [Mutant(i, node.lineno, what, node.end_lineno or node.lineno)
            for i, (node, _, what) in enumerate(sites(source))]  # fmt: skip


def mutate(source: str, index: int) -> ast.Module:
    """Return the tree of `source` with mutant `index` applied (and nothing else)."""
    tree = ast.parse(source)
    node, change, _ = list(_walk(tree, None, _quiet_lines(source)))[index]
    change(node)
    return ast.fix_missing_locations(tree)


# ---- running: the effects ------------------------------------------------------------


def _unwrap(fn: Any) -> Any:
    while True:
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "func", None)
        if inner is None or inner is fn:
            return fn
        fn = inner


def _graft(old: Any, new: Any) -> bool:
    """Give `old` (a function, or a wrapper of one) the code of `new`; False if it cannot."""
    old, new = _unwrap(old), _unwrap(new)
    if not (isinstance(old, types.FunctionType) and isinstance(new, types.FunctionType)):
        return False
    if len(old.__code__.co_freevars) != len(new.__code__.co_freevars):
        return False
    old.__code__, old.__defaults__, old.__kwdefaults__ = (
        new.__code__, new.__defaults__, new.__kwdefaults__)  # fmt: skip
    return True


def _graft_class(old: type, new: type) -> None:
    for name, value in vars(new).items():
        mine = vars(old).get(name)
        if isinstance(value, (staticmethod, classmethod)):
            value, mine = value.__func__, getattr(mine, "__func__", None)
        if isinstance(value, property):
            for part in ("fget", "fset", "fdel"):
                if getattr(value, part) is not None and mine is not None:
                    _graft(getattr(mine, part), getattr(value, part))
        elif callable(value) and mine is not None:
            _graft(mine, value)


def _differs(old: Any, new: Any) -> bool:
    try:
        return bool(old != new) or type(old) is not type(new)
    except Exception:
        return True


def patch(module: types.ModuleType, code: types.CodeType) -> None:
    """Run `code` (the mutated module) and move what changed into `module` in place."""
    ns = {k: module.__dict__[k] for k in ("__name__", "__file__", "__package__", "__spec__")}
    exec(code, ns)
    for name, new in ns.items():
        old = module.__dict__.get(name)
        if old is new or name.startswith("__"):
            continue
        if isinstance(old, type) and isinstance(new, type):
            _graft_class(old, new)
        elif callable(old) and _graft(old, new):
            continue
        elif type(new).__module__ != module.__name__ and _differs(old, new):
            for other in list(sys.modules.values()):  # `from module import NAME` copies
                if other is not module and getattr(other, name, None) is old:
                    setattr(other, name, new)
            module.__dict__[name] = new


class Outcome(NamedTuple):
    """What became of one mutant: "killed", "survived" or "timeout" (killed), and when."""

    mutant: Mutant
    result: str
    seconds: float


class Runner:
    """A pytest plugin: the tests are collected once, in this process; then each run (the
    baseline, then every mutant) is a fork that patches the module and runs the items,
    stopping at the first failure.

    The baseline records, for each test, its time and the lines of the module it runs; a
    mutant then runs only the tests that reach its lines (fastest first), since a test
    that never runs a line behaves the same with it changed. A mutant no test reaches
    survives without a run; one outside any function (run at import) runs every test.
    """

    def __init__(self, module: types.ModuleType, source: str, todo: list[Mutant], jobs: int,
                 timeout: float | None, progress: Callable[[Outcome], None]):  # fmt: skip
        self.module, self.source, self.todo, self.jobs = module, source, todo, jobs
        self.timeout, self.progress = timeout, progress
        self.outcomes: list[Outcome] = []
        self.baseline: float | None = None

    def pytest_runtestloop(self, session: Any) -> bool:
        """Run the baseline and the mutants; the items never run in this process."""
        import tempfile

        items = list(session.items)
        with tempfile.NamedTemporaryFile("r", suffix=".json") as record:
            start = time.monotonic()
            pid = self._fork(session, items, None, record.name)
            if os.waitpid(pid, 0)[1] != 0:
                raise SystemExit("the tests fail without a mutant: fix them first")
            self.baseline = time.monotonic() - start
            seen = json.loads(Path(record.name).read_text() or "{}")
        items.sort(key=lambda item: seen.get(item.nodeid, [0.0])[0])
        reach = {item.nodeid: set(seen.get(item.nodeid, [0.0, []])[1]) for item in items}
        spans = _spans(self.source)
        limit = self.timeout or max(10.0, 4 * self.baseline)
        self._run_all(session, _Plan(items, reach, spans), limit)
        return True

    def _fork(self, session: Any, items: list, index: int | None, record: str | None) -> int:
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1), os.dup2(devnull, 2)
                code = _run_items(self, session, items, index, record)
            finally:
                os._exit(code)
        return pid

    def _run_all(self, session: Any, plan: _Plan, limit: float) -> None:
        running: dict[int, tuple[Mutant, float]] = {}
        queue = list(reversed(self.todo))
        try:
            while queue or running:
                while queue and len(running) < self.jobs:
                    m = queue.pop()
                    items = plan.items_for(m)
                    if not items:  # no test runs this line: nothing can kill it
                        self._done(Outcome(m, "survived", 0.0))
                        continue
                    running[self._fork(session, items, m.index, None)] = (m, time.monotonic())
                time.sleep(0.005)
                for pid, (m, began) in list(running.items()):
                    if self._reap(pid, m, began, limit):
                        del running[pid]
        finally:  # interrupted: leave no fork behind
            for pid in running:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)

    def _reap(self, pid: int, m: Mutant, began: float, limit: float) -> bool:
        done, status = os.waitpid(pid, os.WNOHANG)
        took = time.monotonic() - began
        if done == 0 and took <= limit:
            return False
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        result = "timeout" if done == 0 else "survived" if status == 0 else "killed"
        self._done(Outcome(m, result, took))
        return True

    def _done(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.progress(outcome)


class _Plan(NamedTuple):
    items: list  # fastest first
    reach: dict  # nodeid -> the module's lines it runs
    spans: list  # (first, last) line of each function body

    def items_for(self, m: Mutant) -> list:
        """The tests to run against mutant `m` (all of them for code run at import)."""
        if not any(first <= m.line <= last for first, last in self.spans):
            return self.items
        lines = set(range(m.line, m.end + 1))
        return [item for item in self.items if self.reach[item.nodeid] & lines]


def _spans(source: str) -> list[tuple[int, int]]:
    """The line spans of every function body in `source` (where code runs when called)."""
    return [(node.body[0].lineno, node.end_lineno or node.body[-1].lineno)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]  # fmt: skip


def _tracer(filename: str, lines: set) -> Callable:
    def local(frame: Any, event: str, arg: Any) -> Callable:
        if event == "line":
            lines.add(frame.f_lineno)
        return local

    def calls(frame: Any, event: str, arg: Any) -> Callable | None:
        return local if frame.f_code.co_filename == filename else None

    return calls


def _run_items(runner: Runner, session: Any, items: list, index: int | None, record) -> int:
    """In a fork: apply mutant `index` (None: none), run the items until one fails; return
    the exit status (0: all passed). `record`: a file for each item's seconds and the
    module's lines it ran (the baseline's, traced)."""
    import threading

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:  # it writes to a copy of stdout made before the fork
        session.config.pluginmanager.unregister(reporter)
    module = runner.module
    if index is not None:
        patch(module, compile(mutate(runner.source, index), module.__file__, "exec"))
    seen = {}
    for i, item in enumerate(items):
        start, lines = time.monotonic(), set()
        if record is not None:
            tracer = _tracer(module.__file__, lines)
            sys.settrace(tracer), threading.settrace(tracer)
        nextitem = items[i + 1] if i + 1 < len(items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        sys.settrace(None), threading.settrace(None)  # type: ignore[arg-type]
        seen[item.nodeid] = [time.monotonic() - start, sorted(lines)]
        if session.testsfailed:
            return 1
    if record is not None:
        Path(record).write_text(json.dumps(seen))
    return 0


def run(
    module_path: str,
    tests: list[str],
    jobs: int = 1,
    only: list[int] | None = None,
    timeout: float | None = None,
    progress: Callable[[Outcome], None] = print,
) -> dict:
    """Run every mutant of `module_path` (or those in `only`) against `tests` (test files;
    the module's own doctests are added); return a report {module, tests, baseline_s,
    mutants, killed, score, survived: [...]}."""
    import pytest

    source = Path(module_path).read_text()
    name = module_path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    module = importlib.import_module(name)
    todo = [m for m in mutants(source) if only is None or m.index in only]
    runner = Runner(module, source, todo, jobs, timeout, progress)
    args = [module_path, *tests, "-p", "no:cacheprovider"]
    pytest.main(args, plugins=[runner])
    if runner.baseline is None:
        raise SystemExit(f"pytest could not collect {' '.join(args)}")
    outcomes = sorted(runner.outcomes, key=lambda o: o.mutant.index)
    survived = [o.mutant for o in outcomes if o.result == "survived"]
    killed = len(outcomes) - len(survived)
    return {"module": module_path, "tests": tests, "baseline_s": round(runner.baseline, 2),
            "mutants": len(outcomes), "killed": killed,
            "score": round(100 * killed / max(1, len(outcomes)), 1),
            "survived": [m._asdict() for m in survived]}  # fmt: skip


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _show(o: Outcome) -> None:
    if o.result == "survived":
        print(f"  survived #{o.mutant.index} line {o.mutant.line}: {o.mutant.what}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """The command line: `python tools/mutate.py MODULE [TEST ...] [-j N] [--json PATH]`."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("module", help="the module's path, e.g. toolnexus/core/retry.py")
    p.add_argument("tests", nargs="*", help="its test files (default: the TESTS table)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once")
    p.add_argument("--only", type=int, nargs="*", help="run these mutant numbers only")
    p.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    p.add_argument("--timeout", type=float, help="seconds a mutant's tests may take")
    p.add_argument("--json", help="write the report here")
    a = p.parse_args(argv)
    if a.list:
        for m in mutants(Path(a.module).read_text()):
            print(f"#{m.index} line {m.line}: {m.what}")
        return 0
    tests = a.tests or TESTS.get(a.module)
    if not tests:
        p.error(f"name the tests of {a.module} (it is not in the TESTS table)")
    sys.path.insert(0, os.getcwd())
    signal.signal(signal.SIGTERM, _interrupted)  # stop the forks too (see Runner._run_all)
    report = run(a.module, tests, a.jobs, a.only, a.timeout, _show)
    print(f"{report['module']}: {report['killed']} of {report['mutants']} mutants killed "
          f"({report['score']}%), tests {report['baseline_s']}s without a mutant")  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
