"""The public face: __all__ lists every public name, and every name in it exists."""

import subprocess
import sys
import types

import toolnexus


def test_all_lists_every_public_name():
    public = {
        n
        for n, v in vars(toolnexus).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType)
    }
    assert public == set(toolnexus.__all__)


def test_every_public_function_has_a_docstring():
    for name in toolnexus.__all__:
        obj = getattr(toolnexus, name)
        assert (obj.__doc__ or "").strip(), name


def test_import_stays_light():
    code = "import sys, toolnexus; print(sorted(m for m in ('redis', 'psycopg', 'yaml', 'cryptography', 'hypothesis') if m in sys.modules))"  # noqa: E501
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
