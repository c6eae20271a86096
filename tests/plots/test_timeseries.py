"""netesto.plots.timeseries on recorded experiments: panels, lines per flow, markers, an offline page."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.plots.browser import has_colour, painted, show

DATA = Path(__file__).resolve().parents[1] / "results" / "data"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> xr.Dataset:
    """Experiment 1 of the recorded data: two stream flows (cubic, bbr) and an RR flow."""
    from netesto.results import process_experiment

    work = tmp_path_factory.mktemp("plots")
    shutil.copytree(DATA / "1", work / "1")
    process_experiment(work, 1, html=False)
    return xr.open_dataset(work / "1" / "exp.nc").load()


def _labels(ds: xr.Dataset) -> list[str]:
    """Each flow's line label: its id and its congestion control (what the hover shows)."""
    return [f"{f} {ca}" for f, ca in zip(ds.flow.values, ds.ca.values)]


def _curves(overlay: object) -> dict[str, object]:
    import holoviews as hv

    return {el.label: el for el in overlay if isinstance(el, hv.Curve)}  # type: ignore[attr-defined]


def test_one_panel_per_variable_one_line_per_flow(dataset: xr.Dataset) -> None:
    import netesto.plots

    layout = netesto.plots.timeseries(dataset)
    flows = _labels(dataset)
    panels = list(layout)
    assert [p.opts.get().kwargs["title"] for p in panels] == ["Goodput (200 ms mean)", "Congestion window",
                                                              "Smoothed RTT"]
    assert set(_curves(panels[0])) == {*flows, "sum"} and set(_curves(panels[1])) == set(flows)
    # the goodput lines are the 200 ms mean of the samples, in the unit the panel names
    first = _curves(panels[0])[flows[0]]
    ylabel = panels[0].opts.get().kwargs["ylabel"]
    assert ylabel == "goodput (Gbit/s)"  # loopback
    raw = dataset.goodput.isel(flow=0).values / 1e9
    assert np.nanmax(first.dimension_values("goodput")) <= np.nanmax(raw) + 1e-9
    # the sum is the sum of the flows' lines
    total = _curves(panels[0])["sum"].dimension_values("goodput")
    parts = np.nansum([c.dimension_values("goodput") for f, c in _curves(panels[0]).items() if f != "sum"], axis=0)
    assert np.allclose(total, parts)


def test_retransmits_are_marked_where_the_counter_rises(dataset: xr.Dataset) -> None:
    import holoviews as hv

    import netesto.plots

    goodput = list(netesto.plots.timeseries(dataset))[0]
    marks = [el for el in goodput if isinstance(el, hv.Scatter)]
    counter = dataset.retransmits.transpose("flow", "time").values
    rises = int((np.diff(counter, axis=1) > 0).sum())
    assert rises > 0 and len(marks) == 1 and len(marks[0]) == rises
    flows_marked = set(marks[0].dimension_values("flow"))
    assert flows_marked == {f for f, c in zip(_labels(dataset), counter) if np.nanmax(c) > np.nanmin(c)}


def test_latency_panel_has_only_the_rr_flow(dataset: xr.Dataset) -> None:
    import netesto.plots

    (panel,) = netesto.plots.timeseries(dataset, ["lat_p99"])
    assert set(_curves(panel)) == {"h1-h2-3-0 cubic"}
    with pytest.raises(ValueError, match="none of the variables"):
        netesto.plots.timeseries(dataset, ["no_such_variable"])


def test_a_saved_page_opens_offline_with_every_plot_drawn(dataset: xr.Dataset, tmp_path: Path) -> None:
    import netesto.plots

    page = netesto.plots.save(netesto.plots.timeseries(dataset), tmp_path / "flows.html")
    text = page.read_text()
    # no script or stylesheet from elsewhere (a CDN, a server's static folder); the browser below
    # also fails the test on any network request the page makes
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:|//|static/)', text)
    shown = show(page, tmp_path / "flows.png")
    assert shown.errors == []
    # three figures; goodput draws a line per flow, the sum and the retransmit marks
    assert [len(f["renderers"]) for f in shown.figures] == [5, 3, 3], shown.figures
    # the canvases are drawn, not blank: the first flows' line colours (holoviews' cycle) are painted
    assert painted(shown.png) > 0.02
    for rgb in ((0x30, 0xA2, 0xDA), (0xFC, 0x4F, 0x30)):
        assert has_colour(shown.png, rgb), rgb


def test_importing_netesto_and_its_plots_package_pulls_in_no_holoviews() -> None:
    code = ("import sys, netesto, netesto.plots, netesto.agent; "
            "print(sorted(m for m in ('holoviews', 'bokeh', 'IPython', 'panel') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_an_experiment_of_a_run_result_plots_itself(tmp_path: Path) -> None:
    from netesto.controller.runner import ExperimentResult
    from netesto.results import process_experiment

    shutil.copytree(DATA / "2", tmp_path / "2")
    process_experiment(tmp_path, 2, html=False)
    exp = ExperimentResult(exp=2, exp_name="", path=tmp_path / "2", hosts=(), flows=())
    (panel,) = exp.plot("cwnd")
    assert panel.opts.get().kwargs["title"] == "Congestion window" and len(_curves(panel)) >= 1
    assert len(exp.plot()) == 3
