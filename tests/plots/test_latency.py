"""netesto.plots.latency: the CDF of every transaction, from the engine's stored histograms."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import netesto.plots.latency as latency
from netesto.raw.histogram import Histogram

DATA = Path(__file__).resolve().parents[1] / "results" / "data"


def test_the_cdf_of_a_histogram_rises_to_one_at_its_max() -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(20_000, 2_000_000, 5000)  # 20 us .. 2 ms, in ns
    h = Histogram()
    h.record_many(values.tolist())
    x, y = latency.cdf(h.to_dict())
    assert y[0] == 0.0 and y[-1] == 1.0 and np.all(np.diff(y) > 0) and np.all(np.diff(x) >= 0)
    assert x[0] == pytest.approx(values.min() / 1000) and x[-1] == pytest.approx(values.max() / 1000)
    # the median read off the CDF is the sample median within the histogram's 0.4 %
    median = x[np.searchsorted(y, 0.5)]
    assert median == pytest.approx(np.median(values) / 1000, rel=0.01)


def test_a_recorded_rr_flow_has_its_cdf(tmp_path: Path) -> None:
    import holoviews as hv

    from netesto.results import process_experiment

    shutil.copytree(DATA / "1", tmp_path / "1")
    process_experiment(tmp_path, 1)
    ds = xr.open_dataset(tmp_path / "1" / "exp.nc")
    overlay = latency.latency_cdf(tmp_path / "1")
    (curve,) = [el for el in overlay if isinstance(el, hv.Curve)]
    assert curve.label == "h1-h2-3-0 cubic"  # the RR flow only: streams record no transactions
    x, y = curve.dimension_values("latency"), curve.dimension_values("share")
    p99 = float(ds.lat_p99_total.sel(flow="h1-h2-3-0"))
    assert x[np.searchsorted(y, 0.99)] == pytest.approx(p99, rel=0.01)
    assert overlay.opts.get().kwargs["logx"] is True


def test_no_rr_flow_no_cdf(tmp_path: Path) -> None:
    from netesto.results import load_experiment

    shutil.copytree(DATA / "2", tmp_path / "2")
    raw = load_experiment(tmp_path / "2")
    assert all(r.test == "TCP_STREAM" for r in raw.flows)
    with pytest.raises(ValueError, match="latency histogram"):
        latency.latency_cdf(raw)
