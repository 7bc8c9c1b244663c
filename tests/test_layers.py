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


# Functions over 80 lines not yet split: none (the public test kit keeps the rules too).
_LONG_ALLOWED: set[tuple[str, str]] = set()


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
        if path.name == "http_fetch.py":  # socket.getaddrinfo only: an HTTP tool's address
            allowed = {"socket"}  # check resolves a host; httpx still makes every connection
        below = {full for name in imports(path) if (full := resolved(path, name))
                 and any(full == m or full.startswith(m + ".") for m in _BELOW_HTTPX)
                 and full not in allowed}  # fmt: skip
        assert not below, f"{path.relative_to(ROOT)} imports {sorted(below)}"


# ---- the import graph of the package ------------------------------------------------


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _runtime_imports(tree: ast.AST):
    """Yield every import node that runs (any depth), leaving out `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _runtime_imports(node)


def _faces() -> dict[str, dict[str, str]]:
    """Return, for each package, the module each name it re-exports is defined in (its
    `from .x import name` lines and its lazy `_LAZY = {name: module}` table)."""
    out: dict[str, dict[str, str]] = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        names = out.setdefault(name, {})
        tree = ast.parse(path.read_text())
        for node in _runtime_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                module = resolved(path, "." * node.level + (node.module or ""))
                names.update({a.asname or a.name: module for a in node.names})
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets
            ):
                for k, v in zip(node.value.keys, node.value.values, strict=True):
                    target = v.value if v.value.startswith(".") else "." + v.value
                    names[k.value] = resolved(path, target)
    return out


def _edges(name: str, path: pathlib.Path, faces: dict) -> set[str]:
    """Return the package modules `name` imports (a face's names followed to their module)."""
    out = set()
    for node in _runtime_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = resolved(path, "." * node.level + (node.module or "")) if node.level else (
                node.module or "")  # fmt: skip
            targets = []
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in MODULES else faces.get(base, {}).get(a.name, base))
        out |= {t for t in targets if t in MODULES and t != name}
    return out


def import_graph() -> dict[str, set[str]]:
    """Return module -> the package modules it imports (at any depth); a package's
    `__init__` re-exports are its face, not an edge of the graph."""
    faces = _faces()
    return {name: _edges(name, path, faces) for name, path in MODULES.items()
            if path.name != "__init__.py"}  # fmt: skip


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one import circle of `graph` (its modules in order), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], found = 1, None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_a_circle_is_found():
    """The check itself: a graph with a circle is caught, one without passes."""
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circles_in_the_package():
    """No module reaches itself through imports (function-level ones too)."""
    graph = import_graph()
    assert "toolnexus.store._rows" in graph["toolnexus.store.forks"]  # a function-level one
    assert "toolnexus.store.forks" in graph["toolnexus.commands.fork"]  # through the face
    assert _circle(graph) is None, " -> ".join(_circle(graph) or ())


def test_store_and_history_import_only_core():
    """The contracts and the pure algebra: store/ and history/ import core/ (and history/
    may use store/, never the other way round); every database lives in backends/."""
    graph = import_graph()
    for name, deps in graph.items():
        for layer, allowed in (("store", ("core", "store")), ("history", ("core", "history",
                                                                           "store"))):  # fmt: skip
            if name.startswith(f"toolnexus.{layer}."):
                above = {d for d in deps if d.split(".")[1] not in allowed}
                assert not above, f"{name} imports {sorted(above)}"


_DRIVERS = {"sqlite3": "sqlite", "redis": "redis", "psycopg": "postgres",
            "psycopg_pool": "postgres"}  # fmt: skip


def test_a_database_driver_is_imported_only_in_its_folder():
    for path in ROOT.rglob("*.py"):
        for name in imports(path):
            folder = _DRIVERS.get(resolved(path, name).split(".")[0])
            if folder is not None and not name.startswith("."):
                where = path.relative_to(ROOT).as_posix()
                assert where.startswith(f"backends/{folder}/"), f"{where} imports {name}"
