"""The public face: __all__ lists every public name, and every name in it exists."""

import subprocess
import sys
import types

import toolnexus


def public_names(module):
    """Every public non-module name a module offers (lazy ones included, via dir)."""
    return {
        n
        for n in dir(module)
        if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)
    }


def test_all_lists_every_public_name():
    assert public_names(toolnexus) == set(toolnexus.__all__)


def test_store_and_history_faces_list_every_public_name():
    import toolnexus.history
    import toolnexus.store

    for module in (toolnexus.store, toolnexus.history):
        assert public_names(module) == set(module.__all__), module.__name__


def test_every_public_function_has_a_docstring():
    for name in toolnexus.__all__:
        obj = getattr(toolnexus, name)
        assert (obj.__doc__ or "").strip(), name


def test_import_stays_light():
    code = "import sys, toolnexus; print(sorted(m for m in ('redis', 'psycopg', 'yaml', 'cryptography', 'hypothesis') if m in sys.modules))"  # noqa: E501
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
