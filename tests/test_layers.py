"""The import direction is the architecture: the pure core imports no I/O and nothing above it."""

import ast
import pathlib

import pytest

import toolnexus

ROOT = pathlib.Path(toolnexus.__file__).parent
CORE = sorted((ROOT / "core").rglob("*.py"))
# Modules that do I/O, sleep, draw random numbers or run threads: drivers import them.
IO = {"httpx", "httpcore", "socket", "ssl", "threading", "asyncio", "random", "time",
      "sqlite3", "redis", "psycopg", "psycopg_pool", "subprocess", "os", "shutil",
      "concurrent", "queue", "logging", "urllib.request", "http.client"}  # fmt: skip


def imports(path: pathlib.Path) -> set[str]:
    """Return every module a file imports, at any depth (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found |= {base} if node.module else {f"{base}{a.name}" for a in node.names}
    return found


def resolved(path: pathlib.Path, name: str) -> str:
    """Return an import's absolute module name (relative ones resolved against `path`)."""
    if not name.startswith("."):
        return name
    level = len(name) - len(name.lstrip("."))
    package = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    return ".".join([*package[: len(package) - level + 1], name.lstrip(".")]).rstrip(".")


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_io_and_nothing_above_it(path):
    for name in imports(path):
        full = resolved(path, name)
        assert not any(full == m or full.startswith(m + ".") for m in IO), f"{path.name}: {full}"
        if full.startswith("toolnexus"):
            assert full.startswith("toolnexus.core"), f"{path.name} imports {full} (above core)"


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}  # fmt: skip
    assert not long


# Functions over 80 lines not yet split: the contract kit's hypothesis state machine
# (its rules are methods of one class built in the function) and the fake provider's
# request handler (outside the stores; other work edits it).
_LONG_ALLOWED = {("testing/contract.py", "store_contract_machine"),
                 ("testing/fake_provider.py", "_handler")}  # fmt: skip


def test_no_function_over_80_lines():
    """Small functions: the store and log factories are state records plus top-level
    functions, and nothing else in the package grows past 80 lines."""
    long = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > 80:
                    long.add((path.relative_to(ROOT).as_posix(), node.name))
    assert long <= _LONG_ALLOWED, sorted(long - _LONG_ALLOWED)


def test_no_module_level_cache_keyed_by_identity():
    """Speed state lives in a client's runtime, never in a global keyed by id()."""
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "id"]  # fmt: skip
        assert not calls, f"{path.relative_to(ROOT)} calls id()"


# What speaks HTTP below httpx: a module of ours importing one would be a second path.
_BELOW_HTTPX = {"socket", "ssl", "http.client", "http.server", "httpcore", "h11", "h2",
                "httptools", "urllib.request", "anyio"}  # fmt: skip


def test_httpx_is_the_one_http_path():
    """No module under toolnexus/ opens a socket, uses http.client or parses HTTP itself
    (the test kit's fake provider is a server: http.server is its one exception)."""
    for path in ROOT.rglob("*.py"):
        allowed = {"http.server"} if path.parent.name == "testing" else set()
        below = {full for name in imports(path) if (full := resolved(path, name))
                 and any(full == m or full.startswith(m + ".") for m in _BELOW_HTTPX)
                 and full not in allowed}  # fmt: skip
        assert not below, f"{path.relative_to(ROOT)} imports {sorted(below)}"
