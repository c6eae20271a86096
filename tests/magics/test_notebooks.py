"""The shipped notebooks run top to bottom in a real kernel (nbclient)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.slow
def test_quickstart_runs_and_shows_both_flows(tmp_path):
    nb = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "cubic" in text and "bbr" in text
    assert "experiments 1" in text
    assert (tmp_path / "quickstart-results" / "exp.csv").exists()
