"""The workloads notebook runs top to bottom in a real kernel on the namespace testbed, and shows what it says."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "workloads.ipynb"

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_the_workloads_notebook_runs_and_shows_draws_and_completion_times(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "seed 7" in text and "sizes as drawn: True" in text
    assert "slowdown_p99" in text and "testbed rtt less its jitter" in text
    assert (tmp_path / "workloads-results" / "2" / "exp.html").is_file()
    # exported with nbconvert, it opens offline in chromium with the FCT figure drawn
    done = tmp_path / "workloads.ipynb"
    nbformat.write(nb, done)
    from netesto.report.notebook import export_html
    from tests.sweep.test_testbed import frames_drawn

    errors, drawn, renderers = frames_drawn(export_html(done))
    assert errors == [] and drawn >= 1
    title = "Flow completion time slowdown by size (p50 solid, p99 dashed; a dot per transaction)"
    assert renderers[title] == 5  # the dots, and a line and its points for each of p50 and p99
