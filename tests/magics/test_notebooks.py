"""The shipped notebooks run top to bottom in a real kernel (nbclient)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.slow
def test_quickstart_runs_and_shows_both_flows(tmp_path):
    nb = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
    # as in JupyterLab (nbclient's "auto" is plain lines): the live view, which leaves its snapshot
    (run,) = [c for c in nb.cells if c.source.startswith("%%netesto --as two")]
    run.source = run.source.replace("%%netesto --as two", "%%netesto --as two --progress live", 1)
    NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "cubic" in text and "bbr" in text
    assert "netesto: done in" in text  # the live view's snapshot, in place of its widgets
    assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert (tmp_path / "quickstart-results" / "exp.csv").exists()
    # small: BokehJS once in the whole notebook (the first plot carries it), under 2 MB saved
    done = tmp_path / "quickstart.ipynb"
    nbformat.write(nb, done)
    saved = done.read_text()
    assert saved.count("BEGIN bokeh.min.js") == 1 and done.stat().st_size < 2_000_000, done.stat().st_size
    # exported with nbconvert, it opens offline in chromium with every plot drawn
    from netesto.report.notebook import export_html

    from ..sweep.test_testbed import frames_drawn

    errors, drawn, renderers = frames_drawn(export_html(done))
    # three bokeh documents in the page: the live view's last plot, the run `--as two` showed after its
    # cell, and show(exp.plot(...))
    assert errors == [] and drawn == 3, (errors, drawn)
    assert renderers["Goodput (200 ms mean)"] >= 2 and renderers["Congestion window"] == 2  # one per flow
    assert renderers["Delivery rate"] == 2 and renderers["Min RTT"] == 2


@pytest.mark.slow
def test_the_quickstart_runs_again_in_one_kernel_after_an_interrupt(tmp_path):
    from netesto.testbed.state import state_path

    from .kernel import Kernel
    from .test_kernel import _flows_running

    nb = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    kernel = Kernel(tmp_path / "k", cwd=tmp_path)
    name = ""
    try:
        for code in cells[:2]:
            assert kernel.execute(code, timeout=120).status == "ok"
        name = kernel.value("tb.name")
        assert re.fullmatch(r"q[0-9a-f]{2,9}", name), name  # this user's and this kernel's own
        first = kernel.execute(cells[2], interrupt_after=1.0, interrupt_when=_flows_running, timeout=120)
        assert first.interrupted_at is not None and "run interrupted" in str(first.reply.get("traceback")), first.reply
        assert state_path(name).exists()  # the interrupt left the testbed up, as a user's would
        # top to bottom again in the same kernel: the first cell takes back its own testbed
        for i, code in enumerate(cells):
            ex = kernel.execute(code, timeout=240)
            assert ex.status == "ok", (i, ex.reply, ex.stream("stderr"))
        assert kernel.value("two.exps") == [2]  # the interrupted run kept experiment 1
        assert not state_path(name).exists()  # its last cell took the testbed down
    finally:
        kernel.close()
        if name and state_path(name).exists():
            from netesto.testbed.lifecycle import down

            down(name)
