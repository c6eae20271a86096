"""Intervals over repetitions stay inside each measure's range and carry their n; swept values get numbers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from netesto.results.axes import companions
from netesto.results.cube import _coord
from netesto.results.manifest import Manifest
from netesto.results.stats import stats, t95, value_range

UNIT = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(UNIT, min_size=1, max_size=6), min_size=1, max_size=5), st.sampled_from(["t", "bootstrap"]))
def test_a_share_and_jains_index_keep_their_intervals_inside_0_1(rows: list[list[float]], method: str) -> None:
    width = max(map(len, rows))
    values = np.array([r + [math.nan] * (width - len(r)) for r in rows])
    cube = xr.Dataset({"jain": (("x", "rep"), values), "cc_share": (("x", "rep"), values)},
                      coords={"x": np.arange(len(rows)), "rep": np.arange(width)})
    out = stats(cube, method=method, warn=False)
    for name in ("jain", "cc_share"):
        lo, hi, mean, n = (out[f"{name}{s}"].values for s in ("_lo", "_hi", "", "_n"))
        assert n.tolist() == [len(r) for r in rows]
        ok = np.isfinite(lo)
        assert (ok == (n >= 2)).all()  # an interval wherever there are two values, none with one
        assert ((lo[ok] >= 0) & (hi[ok] <= 1) & (lo[ok] <= mean[ok] + 1e-12) & (mean[ok] <= hi[ok] + 1e-12)).all()


def test_the_old_t_interval_left_the_range_and_the_clipped_one_says_why() -> None:
    jain = np.array([[0.57, 0.95]])  # two repetitions
    half = t95(1) * jain.std(ddof=1) / math.sqrt(2)
    assert jain.mean() + half > 2 and jain.mean() - half < -1  # what the report drew: Jain 2.0 and below 0
    cube = xr.Dataset({"jain": (("x", "rep"), jain), "mean_rtt": (("x", "rep"), [[0.4, 40.0]])},
                      coords={"x": [0], "rep": [0, 1]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = stats(cube).isel(x=0)
    assert [str(w.message) for w in caught] == [out.attrs["warning"]] and "fewer than 3" in out.attrs["warning"]
    assert (float(out.jain_lo), float(out.jain_hi)) == (0.0, 1.0)
    assert float(out.mean_rtt_lo) == 0.0 and float(out.mean_rtt_hi) > 40  # an RTT is never below 0, unbounded above
    assert out.jain_lo.attrs["interval"] == "95 % Student t, clipped to [0, 1]: the measure's range"
    assert value_range("grp_retrans_pct") == (0.0, 100.0) and value_range("max_min_ratio") == (1.0, math.inf)
    three = stats(xr.Dataset({"jain": (("rep",), [0.9, 0.92, 0.91])}, coords={"rep": [0, 1, 2]}), warn=False)
    assert "warning" not in three.attrs and 0.85 < float(three.jain_lo) < float(three.jain_hi) < 0.97


def test_every_swept_quantity_gets_a_number_beside_its_label() -> None:
    grid = {"buffer": ["0.5bdp", "2bdp", "256k"], "bw": ["10mbit", "100mbit"], "loss": ["0", "0.5%"],
            "host_rtt": ["h3:40ms", "h2:10ms+h3:80ms"], "hold": ["20ms", "1s"]}
    m = Manifest("nb.ipynb", grid, 1, defaults={"rtt": "20ms"})
    out = companions(m, {n: _coord(v) for n, v in grid.items()})
    assert out["bw_bps"][1].tolist() == [1e7, 1e8] and out["loss_pct"][1].tolist() == [0.0, 0.5]
    assert out["hold_ms"][1].tolist() == [20.0, 1000.0]
    assert out["host_rtt_h3_ms"][1].tolist() == [40.0, 80.0] and np.isnan(out["host_rtt_h2_ms"][1][0])
    dims, bdp = out["buffer_bdp"][0], out["buffer_bdp"][1]  # the BDP of each cell's bandwidth and the default RTT
    assert list(dims) == ["buffer", "bw"] and bdp[:2].tolist() == [[0.5, 0.5], [2.0, 2.0]]
    assert bdp[2].tolist() == pytest.approx([256_000 / 25_000, 256_000 / 250_000])
    assert out["buffer_bytes"][1][0].tolist() == [12_500, 125_000]
    # BDPs alone (bw and rtt fixed): one number per buffer value, an x axis
    m = Manifest("nb.ipynb", {"buffer": ["1bdp", "16bdp"]}, 1, fixed={"bw": "50mbit"}, defaults={"rtt": "40ms"})
    out = companions(m, {"buffer": _coord(["1bdp", "16bdp"])})
    assert out["buffer_bdp"][1].tolist() == [1.0, 16.0] and out["buffer_bytes"][1].tolist() == [250_000, 4_000_000]
