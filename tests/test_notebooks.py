"""Every notebook runs top to bottom in a real kernel, and is committed without outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 60


def _kernel_manager():
    """Return a kernel manager for THIS interpreter's ipykernel, whatever is installed.

    Only ipykernel's built-in spec is considered (no kernel dirs), and jupyter_client
    launches it with sys.executable: a stale or foreign 'python3' kernelspec elsewhere on
    the machine cannot run the notebooks under another Python without toolnexus.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    specs = KernelSpecManager(kernel_dirs=[], ensure_native_kernel=True)
    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=specs)


def _kernel_env() -> dict:
    # The checkout under test comes first on the kernel's path, installed or not.
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def test_there_are_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01_quickstart.ipynb",
        "02_composing_stores.ipynb",
        "03_property_testing_your_store.ipynb",
        "04_history.ipynb",
        "05_tokens_and_save_time.ipynb",
        "06_tracing.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_cleared(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    stale = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not stale, f"{path.name}: cells {stale} have outputs; clear them before committing"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        km=_kernel_manager(),
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(tmp_path)}},  # the kernel's cwd
    )
    try:
        client.execute(env=_kernel_env())
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{path.name} failed:\n{e}", pytrace=False)
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors, f"{path.name}: {errors}"
    if path.stem.startswith("05_"):  # the pictures are drawn, not just computed
        images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
                  if "image/png" in o.get("data", {})]  # fmt: skip
        assert len(images) == 2, f"{path.name}: expected two plots"
    assert all(cell.execution_count is not None for cell in nb.cells if cell.cell_type == "code"), (
        f"{path.name}: not every cell ran"
    )
