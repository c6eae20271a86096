"""After ``%load_ext netesto`` plain holoviews output draws offline: its JavaScript inline, no CDN."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

PLOT = """import holoviews as hv
hv.extension("bokeh")
hv.Curve([(0, 1.0), (1, 3.0), (2, 2.0)], "time", "goodput").opts(title="plain holoviews", width=900, height=300)"""


def _executed(where: Path, first: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first), nbformat.v4.new_code_cell(PLOT)]
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(where)}}).execute()
    path = where / "plain.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_plain_holoviews_draws_offline_after_load_ext(tmp_path: Path) -> None:
    from netesto.report.notebook import export_html

    from ..sweep.test_testbed import frames_drawn

    # holoviews' default, without netesto: BokehJS and panel from CDNs (offline: a blank plot)
    (tmp_path / "without").mkdir()
    assert "cdn.bokeh.org" in _executed(tmp_path / "without", "import os").read_text()

    (tmp_path / "with").mkdir()
    saved = _executed(tmp_path / "with", "%load_ext netesto")
    assert "cdn.bokeh.org" not in saved.read_text()  # BokehJS inline
    errors, drawn, renderers = frames_drawn(export_html(saved))  # requests outside the page are errors too
    assert errors == [] and drawn >= 1 and renderers.get("plain holoviews") == 1, (errors, drawn, renderers)
