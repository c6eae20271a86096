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
    process_experiment(work, 1)
    return xr.open_dataset(work / "1" / "exp.nc").load()


def _labels(ds: xr.Dataset) -> list[str]:
    """Each flow's line label: its id and its congestion control (what the hover shows)."""
    return [f"{f} {ca}" for f, ca in zip(ds.flow.values, ds.ca.values)]


def _figures(layout: object) -> list[object]:
    """The bokeh figures netesto draws ``layout`` as (on its pages, in a notebook), top to bottom."""
    from netesto.plots.page import figures

    return figures(layout)


def _lines(fig: object) -> dict[str, np.ndarray]:
    """A figure's per-flow (and sum) lines: renderer name -> the y values it draws."""
    from bokeh.models import Line

    out = {}
    for r in fig.renderers:  # type: ignore[attr-defined]
        if isinstance(r.glyph, Line):
            out[r.name] = np.asarray(r.data_source.data[r.glyph.y], dtype=float)
    return out


def test_one_panel_per_variable_one_line_per_flow(dataset: xr.Dataset) -> None:
    import netesto.plots

    layout = netesto.plots.timeseries(dataset)
    flows = _labels(dataset)
    panels = list(layout)
    assert [p.opts.get().kwargs["title"] for p in panels] == ["Goodput (200 ms mean)", "Congestion window",
                                                              "Smoothed RTT"]
    goodput, cwnd, _ = _figures(layout)
    assert [f.title.text for f in (goodput, cwnd)] == ["Goodput (200 ms mean)", "Congestion window"]
    assert set(_lines(goodput)) == {*flows, "sum"} and set(_lines(cwnd)) == set(flows)
    # each flow a legend entry of its own (a click hides it), in flow order, then the sum and the marks
    (legend,) = goodput.legend
    assert [getattr(item.label, "value", item.label) for item in legend.items] == [*flows, "sum", "retransmits"]
    assert legend.click_policy == "hide" and all(len(item.renderers) == 1 for item in legend.items)
    # the hover names a flow by its line's name: no column repeating the name at each point (page size)
    from bokeh.models import HoverTool

    flow_lines = [r for r in goodput.renderers if r.name in flows]
    assert len(flow_lines) == 3 and all("flow" not in r.data_source.data for r in flow_lines)
    assert any(("flow", "$name") in t.tooltips for t in goodput.toolbar.tools if isinstance(t, HoverTool))
    # the goodput lines are the 200 ms mean of the samples, in the unit the panel names
    first = _lines(goodput)[flows[0]]
    assert goodput.yaxis[0].axis_label == "goodput (Gbit/s)"  # loopback
    raw = dataset.goodput.isel(flow=0).values / 1e9
    assert np.nanmax(first) <= np.nanmax(raw) + 1e-6
    assert np.nanmax(first) > 0.5 * np.nanmax(raw)
    # the sum is the sum of the flows' curves, the dataset's goodput_sum_smooth (NaN where no flow runs)
    total = panels[0].Curve.Sum
    at = {t: i for i, t in enumerate(total.dimension_values("time"))}
    parts = np.full((len(flows), len(at)), np.nan)
    for k, curve in enumerate(panels[0].NdOverlay.I):
        parts[k, [at[t] for t in curve.dimension_values("time")]] = curve.dimension_values("goodput")
    running = np.isfinite(parts).any(axis=0)
    summed = total.dimension_values("goodput")
    assert np.allclose(summed[running], np.nansum(parts, axis=0)[running]) and np.isnan(summed[~running]).all()


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

    (fig,) = _figures(netesto.plots.timeseries(dataset, ["lat_p99"]))
    assert set(_lines(fig)) == {"h1-h2-3-0 cubic"}
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
    from netesto.controller.result import ExperimentResult
    from netesto.results import process_experiment

    shutil.copytree(DATA / "2", tmp_path / "2")
    process_experiment(tmp_path, 2)
    exp = ExperimentResult(exp=2, exp_name="", path=tmp_path / "2", hosts=(), flows=())
    panel = exp.plot("cwnd")  # one variable: its panel (an Overlay), which * and + combine
    assert panel.opts.get().kwargs["title"] == "Congestion window" and len(_lines(_figures(panel)[0])) >= 1
    assert len(exp.plot()) == 3


def _many(flows: int, seconds: float = 60.0) -> xr.Dataset:
    """``flows`` synthetic stream flows sampled every 10 ms (cubic and bbr alternating)."""
    rng = np.random.default_rng(7)
    n = int(seconds / 0.01)
    shape = (flows, n)
    return xr.Dataset(
        {"goodput": (("flow", "time"), rng.random(shape) * 1e8), "cwnd": (("flow", "time"), rng.random(shape) * 100),
         "rtt": (("flow", "time"), 1e4 + rng.random(shape) * 1e4),
         "retransmits": (("flow", "time"), np.cumsum(rng.random(shape) < 0.01, axis=1).astype(float))},
        coords={"flow": [f"h{i}-h0-1-0" for i in range(flows)], "time": np.arange(n) * 0.01,
                "ca": ("flow", ["cubic", "bbr"] * (flows // 2))},
        attrs={"interval": 0.01})


def test_up_to_per_flow_max_flows_each_flow_is_a_legend_entry() -> None:
    import netesto.plots
    from netesto.plots.flows import PER_FLOW_MAX

    ds = _many(PER_FLOW_MAX, seconds=2)
    _, cwnd, _ = _figures(netesto.plots.timeseries(ds))
    assert set(_lines(cwnd)) == set(_labels(ds)) and len(cwnd.renderers) == PER_FLOW_MAX
    more = _figures(netesto.plots.timeseries(_many(PER_FLOW_MAX + 2, seconds=2), ["cwnd"]))[0]
    assert [r.name for r in more.renderers] == ["flows"]


def test_many_flows_are_one_multi_line_whose_hover_names_each_flow() -> None:
    """Above PER_FLOW_MAX flows a panel is one bokeh MultiLine (one renderer, a line per flow,
    each with its flow name and colour), thinned for the screen; the dataset is untouched."""
    from bokeh.models import HoverTool, MultiLine

    import netesto.plots

    ds = _many(20)  # above PER_FLOW_MAX
    before = ds.goodput.values.copy()
    layout = netesto.plots.timeseries(ds, ["cwnd", "goodput"])
    figures = sorted(_figures(layout), key=lambda f: f.title.text)  # type: ignore[attr-defined]
    assert [f.title.text for f in figures] == ["Congestion window", "Goodput (200 ms mean)"]
    cwnd, goodput = figures
    (flows_renderer,) = [r for r in cwnd.renderers if r.name == "flows"]
    assert isinstance(flows_renderer.glyph, MultiLine) and len(cwnd.renderers) == 1
    data = flows_renderer.data_source.data
    assert data["flow"] == [f"h{i}-h0-1-0 {'cubic' if i % 2 == 0 else 'bbr'}" for i in range(20)]
    assert len(set(data["colour"])) > 5 and len(data["xs"]) == len(data["ys"]) == 20
    # thinned to at most 2 x 1000 points a line (20 flows x 6000 samples in the dataset), peaks kept
    assert all(len(x) <= 2000 for x in data["xs"]) and data["ys"][3].dtype == np.float32
    assert float(np.nanmax(data["ys"][3])) == pytest.approx(float(ds.cwnd[3].max()), rel=1e-6)
    hovers = [t for t in cwnd.toolbar.tools if isinstance(t, HoverTool)]
    assert any(flows_renderer in h.renderers and ("flow", "@flow") in h.tooltips for h in hovers)
    # goodput: the flows, the sum and the retransmit marks (one per flow and display bin at most)
    assert {r.name for r in goodput.renderers} >= {"flows"} and len(goodput.renderers) == 3
    np.testing.assert_array_equal(ds.goodput.values, before)


def test_a_page_of_64_flows_opens_offline_and_draws_every_flow(tmp_path: Path) -> None:
    import netesto.plots

    page = netesto.plots.save(netesto.plots.timeseries(_many(64, seconds=20)), tmp_path / "many.html")
    assert page.stat().st_size < 5e6
    shown = show(page, tmp_path / "many.png")
    assert shown.errors == []
    assert [[(g["type"], g["lines"]) for g in f["glyphs"] if g["name"] == "flows"] for f in shown.figures] == [
        [("MultiLine", 64)]] * 3, shown.figures
    assert all(f["hover"] for f in shown.figures)
    assert painted(shown.png) > 0.02
    for rgb in ((0x30, 0xA2, 0xDA), (0xFC, 0x4F, 0x30)):
        assert has_colour(shown.png, rgb), rgb
