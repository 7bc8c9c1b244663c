"""The pure core imports no I/O and nothing above it (DESIGN: the import direction)."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "toolnexus" / "core"
# Standard library modules that compute and do no I/O, and the value libraries.
ALLOWED = {
    "__future__", "abc", "bisect", "collections", "dataclasses", "datetime", "email",
    "enum", "functools", "hashlib", "inspect", "itertools", "json", "math", "operator",
    "re", "string", "traceback", "types", "typing", "urllib", "pyrsistent", "toolz",
}  # fmt: skip
# (file, module) pairs allowed as a lazy import inside a function, each for a reason.
EXCEPTIONS = {
    ("retry.py", "random"),  # the default jitter when a driver passes no rng
}


def imports(path: Path):
    """Yield (module, level) of every import in a file, also those inside functions."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((a.name, 0) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


def test_core_imports_no_io_and_nothing_above_it():
    bad = []
    for path in sorted(CORE.rglob("*.py")):
        depth = len(path.relative_to(CORE).parts) - 1  # 0 for core/x.py, 1 for core/wire/x.py
        for module, level in imports(path):
            if level:
                if level > depth + 1:  # a relative import that climbs out of core/
                    bad.append((path.name, "." * level + module))
            elif module.partition(".")[0] not in ALLOWED and (path.name, module) not in EXCEPTIONS:
                bad.append((path.name, module))
    assert bad == []
