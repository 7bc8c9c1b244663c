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


def _package_of(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _enclosing(target: str, importer: str) -> set[str]:
    """Return the packages Python runs before `target` when `importer` imports it: each
    enclosing package `importer` is not inside of (its own are running already), the top
    one left out (every import of the library starts there: it is the face)."""
    own = _package_of(importer)
    out, parts = set(), target.split(".")
    for k in range(2, len(parts)):
        package = ".".join(parts[:k])
        if package in MODULES and not (own == package or own.startswith(package + ".")):
            out.add(package)
    return out


def _edges(name: str, path: pathlib.Path) -> set[str]:
    """Return the package modules `name` imports, at any depth, with the packages Python
    runs to reach them (a package `__init__` is a module like any other)."""
    out = set()
    for node in _runtime_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = resolved(path, "." * node.level + (node.module or "")) if node.level else (
                node.module or "")  # fmt: skip
            # A submodule, or a name the package's __init__ defines (a read of the package).
            subs = [f"{base}.{a.name}" for a in node.names]
            targets = [sub if sub in MODULES else base for sub in subs]
        targets = [t for t in targets if t in MODULES]
        out |= set(targets) | {p for t in targets for p in _enclosing(t, name)}
    return out - {name, ROOT.name}


def import_graph() -> dict[str, set[str]]:
    """Return module -> the package modules it imports (at any depth, package `__init__`
    modules included, and the enclosing packages an import runs first)."""
    return {name: _edges(name, path) for name, path in MODULES.items()}


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
    assert "toolnexus.core.wire" in graph["toolnexus.core.loading"]  # a package's __init__
    assert "toolnexus.core.wire" in graph["toolnexus.core.tool"]  # run to reach wire.common
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


# ---- a dialect is named in its own modules only ------------------------------------------


def _docstrings(tree: ast.AST) -> set[int]:
    """Return the ids of the docstring constants of a module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def dialect_names(path: pathlib.Path, names: frozenset) -> list[tuple[int, str]]:
    """Return (line, name) of each string constant of a module that is a dialect's name
    (docstrings aside: they may show a call)."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in names and id(n) not in skip]  # fmt: skip


# A string that is no dialect where it stands: derive.py's "responses" is an OpenAPI
# operation's key (`op["responses"]`), not the Responses dialect.
NOT_A_DIALECT = {"testing/specs/derive.py": frozenset({"responses"})}


def own_names(path: pathlib.Path, names: frozenset) -> frozenset:
    """Return the dialect names a module may hold: every one under core/wire/ (the codecs,
    the registry and the neutral view they share); in the test kit, its own in a
    dialect's kit module (testing/fake_<name>*.py, or testing/<name>_*.py as Gemini's
    schema reader); none anywhere else."""
    parts = path.relative_to(ROOT).parts
    if parts[:2] == ("core", "wire"):
        return names
    if parts[:1] != ("testing",) or len(parts) != 2:
        return NOT_A_DIALECT.get("/".join(parts), frozenset())
    return frozenset(n for n in names if parts[1].startswith((f"fake_{n}", f"{n}_")))


def stray_names(path: pathlib.Path, names: frozenset) -> list[tuple[int, str]]:
    """Return (line, name) of each dialect a module names that is not its own."""
    allowed = own_names(path, names)
    return [(line, n) for line, n in dialect_names(path, names) if n not in allowed]


def test_no_module_outside_the_dialects_names_one():
    """Every table per dialect is read off the registries (core.wire.DIALECTS, the kit's
    testing.registry.FAKES): a module that names a dialect not its own ("openai", ...)
    is a table written by hand, or a branch on a style."""
    from toolnexus.core.wire import DIALECTS

    names = frozenset(DIALECTS)
    found = {str(p.relative_to(ROOT)): hits for p in sorted(ROOT.rglob("*.py"))
             if (hits := stray_names(p, names))}  # fmt: skip
    assert not found, found


def test_a_dialect_named_outside_its_modules_is_found(tmp_path):
    """The check itself: a kit module naming a dialect is caught, and so is a dialect's kit
    module naming another; a dialect's own modules may name it."""
    from toolnexus.core.wire import DIALECTS

    names = frozenset(DIALECTS)
    one, other = sorted(names)[:2]
    branch = f"def f(style):\n    return style == {one!r}\n"
    module = tmp_path / "m.py"
    module.write_text(branch)
    assert dialect_names(module, names) == [(2, one)]
    assert own_names(ROOT / "testing" / "fake_provider.py", names) == frozenset()
    assert own_names(ROOT / "testing" / f"fake_{one}.py", names) == {one}
    assert other not in own_names(ROOT / "testing" / f"fake_{one}_profiles.py", names)
    assert own_names(ROOT / "core" / "wire" / "view.py", names) == names
    assert all((ROOT / "testing" / f"fake_{n}.py").exists() for n in names)  # each its own
