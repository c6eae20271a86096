"""netesto.plots.timeseries's objects through holoviews' own API: every flow's samples are in them."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

DATA = Path(__file__).resolve().parents[1] / "results" / "data"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Experiment 1 of the recorded data, processed: flows cubic, bbr (streams) and cubic (RR), ~100 samples each."""
    from netesto.results import process_experiment

    work = tmp_path_factory.mktemp("hvobj")
    shutil.copytree(DATA / "1", work / "1")
    process_experiment(work, 1)
    return work / "1"


@pytest.fixture(scope="module")
def dataset(experiment: Path) -> xr.Dataset:
    return xr.open_dataset(experiment / "exp.nc").load()


def _flows(panel: object) -> object:
    """The panel's NdOverlay of flow curves."""
    import holoviews as hv

    (nd,) = [layer for layer in panel if isinstance(layer, hv.NdOverlay)]  # type: ignore[attr-defined]
    return nd


def _life(ds: xr.Dataset, var: str, flow: str) -> xr.DataArray:
    """``var`` of ``flow`` from its first finite sample to its last: what the flow's curve holds."""
    row = ds[var].sel(flow=flow)
    ok = np.flatnonzero(np.isfinite(row.values))
    return row.isel(time=slice(ok[0], ok[-1] + 1))


def test_every_flow_is_a_curve_holding_each_of_its_samples(dataset: xr.Dataset) -> None:
    import holoviews as hv

    import netesto.plots

    panels = list(netesto.plots.timeseries(dataset, ["cwnd", "rtt"]))
    for var, panel in zip(("cwnd", "rtt"), panels):
        nd = _flows(panel)
        assert nd.kdims[0].name == "flow" and list(nd.keys()) == [
            f"{f} {ca}" for f, ca in zip(dataset.flow.values, dataset.ca.values)]
        for flow, curve in zip(dataset.flow.values, nd):
            assert isinstance(curve, hv.Curve)
            want = _life(dataset, var, str(flow))
            assert len(curve.data) == len(curve) == want.sizes["time"] > 90  # every sample, none thinned or padded
            np.testing.assert_allclose(curve.dimension_values("time"), want.time.values)
            scale = float(np.nanmax(want.values)) / float(np.nanmax(curve.dimension_values(var)))
            np.testing.assert_allclose(curve.dimension_values(var) * scale, want.values, rtol=1e-9)
            assert scale == pytest.approx(1.0) or scale == pytest.approx(1e3)  # packets; us or ms (the axis's unit)


def test_select_on_time_narrows_every_flow(dataset: xr.Dataset) -> None:
    import netesto.plots

    layout = netesto.plots.timeseries(dataset)
    narrowed = layout.select(time=(0.3, 0.6))
    for before, after in zip(layout, narrowed):
        old, new = _flows(before), _flows(after)
        assert list(new.keys()) == list(old.keys()) and len(new) == 3
        for a, b in zip(old, new):
            times, was = b.dimension_values("time"), a.dimension_values("time")
            assert times.min() >= 0.3 and times.max() < 0.6  # holoviews' ranges leave out their end
            assert len(b) == int(((was >= 0.3) & (was < 0.6)).sum())
            assert 20 < len(b) < len(a)


def test_opts_recolour_every_flow_drawn_alone_or_as_one_multi_line(dataset: xr.Dataset) -> None:
    import holoviews as hv
    from bokeh.models import Line, MultiLine

    import netesto.plots
    from netesto.plots.page import figures

    panel = netesto.plots.timeseries(dataset, "cwnd").opts(hv.opts.Curve(color="green"))
    (fig,) = figures(panel)
    lines = [r for r in fig.renderers if isinstance(r.glyph, Line)]
    assert len(lines) == 3 and {r.glyph.line_color for r in lines} == {"green"}
    many = netesto.plots.timeseries(dataset, "cwnd", per_flow_max=2).opts(hv.opts.Curve(color="green"))
    (fig,) = figures(many)
    (multi,) = [r for r in fig.renderers if isinstance(r.glyph, MultiLine)]
    assert multi.data_source.data["colour"] == ["green"] * 3


def test_two_plots_overlay_with_star_and_lay_out_with_plus(experiment: Path) -> None:
    import holoviews as hv

    from netesto.controller.result import ExperimentResult
    from netesto.plots.page import figures

    exp = ExperimentResult(exp=1, exp_name="", path=experiment, hosts=(), flows=())
    both = exp.plot("goodput") * exp.plot("cwnd")
    assert isinstance(both, hv.Overlay)
    nds = [layer for layer in both if isinstance(layer, hv.NdOverlay)]
    assert [nd.last.vdims[0].name for nd in nds] == ["goodput", "cwnd"] and all(len(nd) == 3 for nd in nds)
    (fig,) = figures(both)
    assert len({r.glyph.y for r in fig.renderers if hasattr(r.glyph, "y") and r.glyph.y in ("goodput", "cwnd")}) == 2
    side = exp.plot("goodput") + exp.plot("cwnd")
    assert isinstance(side, hv.Layout) and len(side) == 2 and len(figures(side)) == 2


def test_matplotlib_backend_saves_one_line_per_flow(dataset: xr.Dataset, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import holoviews as hv
    from matplotlib.lines import Line2D
    from PIL import Image

    import netesto.plots

    panel = netesto.plots.timeseries(dataset, "rtt")
    hv.save(panel, tmp_path / "rtt.png", backend="matplotlib")
    with Image.open(tmp_path / "rtt.png") as png:
        assert png.format == "PNG" and png.size[0] > 200
    fig = hv.render(panel, backend="matplotlib")
    (ax,) = fig.axes
    lines = [ln for ln in ax.get_lines() if isinstance(ln, Line2D) and len(ln.get_xdata()) > 2]
    # one line a flow, each through all its samples (not a 2-point diagonal), bbr's among them
    assert len(lines) == 3
    nd = _flows(panel)
    assert sorted(len(ln.get_xdata()) for ln in lines) == sorted(len(c) for c in nd)
    labels = {t.get_text() for t in ax.get_legend().get_texts()}
    assert "h1-h2-2-0 bbr" in labels and len(labels) == 3
    hv.Store.set_current_backend("bokeh")


def test_the_bokeh_backend_is_selected_once_and_again_only_after_a_switch() -> None:
    # A fresh process that imports holoviews' bokeh plotting first: the import makes bokeh current before its
    # options exist, with no hv.opts builders. Selecting rebuilds every builder (a new function each), which
    # a page's dozen calls paid each time: an unchanged builder shows none was rebuilt.
    import subprocess
    import sys

    code = """import holoviews as hv, holoviews.plotting.bokeh
from netesto.plots.page import bokeh_backend
assert hv.Store.current_backend == "bokeh" and "Curve" not in vars(hv.opts)
bokeh_backend()
built = vars(hv.opts)["Curve"]
hv.opts.Curve(line_width=2, tools=["hover"])
bokeh_backend()
print("kept" if vars(hv.opts)["Curve"] is built else "rebuilt")
import holoviews.plotting.mpl
hv.Store.set_current_backend("matplotlib")
bokeh_backend()
print(hv.Store.current_backend, "rebuilt" if vars(hv.opts)["Curve"] is not built else "kept")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["kept", "bokeh", "rebuilt"]
