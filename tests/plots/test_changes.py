"""Link changes (SET_LINK) marked on the time-series panels: a line per change, a band per ramp, labels."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.plots.browser import has_colour, show

DATA = Path(__file__).resolve().parents[1] / "results" / "data"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> xr.Dataset:
    """Experiment 1 of the recorded data with a step of the rate at 1 s, a delay ramp from 1.5 s to 2 s in
    0.1 s steps, and the link's return at 2.5 s."""
    from netesto.results import process_experiment

    work = tmp_path_factory.mktemp("changes")
    shutil.copytree(DATA / "1", work / "1")
    process_experiment(work, 1)
    ds = xr.open_dataset(work / "1" / "exp.nc").load()
    times = [0.0, 1.0, *np.arange(1.6, 2.01, 0.1), 2.5, 2.5]
    params = ["rate", "rate", *["delay"] * 5, "rate", "delay"]
    values = [50e6, 10e6, 20.0, 25.0, 30.0, 35.0, 40.0, 100e6, 10.0]
    kinds = ["step"] * 7 + ["end", "end"]
    n = len(times)
    return ds.assign_coords(change=np.arange(n), change_param=("change", params),
                            change_link=("change", ["r-h1"] * n), change_kind=("change", kinds)).assign(
        change_time=("change", np.array(times)), change_value=("change", np.array(values)))


def _labels(layout: object) -> list[str]:
    import holoviews as hv

    return [el.text.strip() for el in layout.traverse(lambda e: e, [hv.Text])]  # type: ignore[attr-defined]


def test_each_change_a_line_each_ramp_a_band_labelled_with_its_values(dataset: xr.Dataset) -> None:
    import holoviews as hv

    import netesto.plots

    layout = netesto.plots.timeseries(dataset, ("goodput",))
    lines = [el.data for el in layout.traverse(lambda e: e, [hv.VLine])]
    bands = [el.data for el in layout.traverse(lambda e: e, [hv.VSpan])]
    assert lines == [0.0, 1.0, 2.5, 2.5] and np.allclose(bands, [(1.6, 2.0)])
    assert _labels(layout) == ["rate 50mbit", "rate 10mbit", "delay 20ms \u2192 40ms", "rate back 100mbit",
                               "delay back 10ms"]


def test_a_dataset_without_changes_has_no_marks(dataset: xr.Dataset) -> None:
    import holoviews as hv

    import netesto.plots

    plain = dataset.drop_vars([v for v in dataset.variables if str(v).startswith("change")])
    layout = netesto.plots.timeseries(plain, ("goodput",))
    assert not layout.traverse(lambda e: e, [hv.VLine, hv.VSpan, hv.Text])


def test_the_marks_are_drawn_on_the_page(dataset: xr.Dataset, tmp_path: Path) -> None:
    import netesto.plots

    page = tmp_path / "changes.html"
    netesto.plots.save(netesto.plots.timeseries(dataset, ("goodput",)), page)
    shown = show(page, tmp_path / "changes.png")
    assert shown.errors == []
    assert has_colour(tmp_path / "changes.png", (0x7B, 0x32, 0x94))  # the marks' purple
    assert "rate 10mbit" in page.read_text()


def test_a_trace_links_offered_rate_is_a_dashed_line_on_the_goodput_panel(dataset: xr.Dataset) -> None:
    import holoviews as hv

    import netesto.plots

    offered = np.full((1, dataset.time.size), 12e6)
    with_trace = dataset.assign_coords(link=["r-h1"]).assign(trace_rate=(("link", "time"), offered))
    layout = netesto.plots.timeseries(with_trace, ("goodput", "cwnd"))
    curves = [c for c in layout.traverse(lambda e: e, [hv.Curve]) if c.label == "trace r-h1 (offered)"]
    assert len(curves) == 1  # the goodput panel only
    shown = curves[0].dimension_values("goodput")
    assert np.allclose(shown * 1e9, 12e6)  # in the panel's unit: these flows run at Gbit/s
