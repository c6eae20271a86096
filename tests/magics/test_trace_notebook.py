"""notebooks/traces.ipynb runs top to bottom in a real kernel on a recorded trace (tests/data/trace/exp)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_the_traces_notebook_plots_every_ack_and_lists_a_window_of_them(tmp_path) -> None:
    nb = nbformat.read(ROOT / "notebooks" / "traces.ipynb", as_version=4)
    (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    params.source = f"exp_dir = {str(ROOT / 'tests' / 'data' / 'trace' / 'exp')!r}\nflow = None"
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"], [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "1303" in text  # the client end's events
    assert "ACKs in 20 ms from" in text and "probe_cwnd" in text
    assert any("application/javascript" in o.get("data", {}) or "text/html" in o.get("data", {}) for o in outputs)
