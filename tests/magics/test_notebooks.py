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
    # exported with nbconvert, it opens offline in chromium with the per-flow plot drawn
    done = tmp_path / "quickstart.ipynb"
    nbformat.write(nb, done)
    from netesto.report.notebook import export_html

    from ..sweep.test_testbed import frames_drawn

    errors, drawn, renderers = frames_drawn(export_html(done))
    # two bokeh documents: the run `--as two` showed after its cell, and show(exp.plot(...)) in its frame
    assert errors == [] and drawn == 2
    assert renderers["Goodput (200 ms mean)"] >= 2 and renderers["Congestion window"] == 2  # one per flow
    assert renderers["Delivery rate"] == 2 and renderers["Min RTT"] == 2
