"""Rows on the grid and smoothing inside a flow's life, on jittered timestamps (hypothesis) and at the edges."""

from __future__ import annotations

import math
from array import array

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netesto.raw.nflow import RawFlow
from netesto.results.dataset import build_dataset
from netesto.results.gridding import Grid, interval_stats, last_in_step, rate_on_grid
from netesto.results.load import ExperimentRaw, FlowRecord
from netesto.raw.experiment import ExperimentRecord
from netesto.results.smoothing import smooth_inside, smoothed_goodput

INTERVAL = 0.01


@st.composite
def jittered(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Row times of a sampler at 10 ms with lateness up to 9 ms and missed ticks, and a counter."""
    n = draw(st.integers(3, 80))
    late = draw(st.lists(st.floats(0.0, 0.009), min_size=n, max_size=n))
    skip = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    t, k = [], 0
    for lateness, skipped in zip(late, skip):
        k += 1 + (skipped if skipped == 2 else 0)
        t.append(0.5 + k * INTERVAL + lateness)
    steps = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n))
    return np.array(t), np.cumsum(np.array(steps, dtype=float))


@given(jittered())
@settings(max_examples=200, deadline=None)
def test_rates_count_every_row_and_nothing_else(rows: tuple[np.ndarray, np.ndarray]) -> None:
    t, cum = rows
    grid = Grid(0.0, INTERVAL, int(t[-1] / INTERVAL) + 3)
    ks, rate = rate_on_grid(t, cum, grid)
    assert np.isfinite(rate).all() and (rate >= -1e-6).all()
    # the steps are contiguous and carry exactly what was counted from the first row to the last
    assert (np.diff(ks) == 1).all()
    assert math.isclose(rate.sum() * INTERVAL, cum[-1] - cum[0], rel_tol=1e-9, abs_tol=1e-6)


@given(jittered())
@settings(max_examples=200, deadline=None)
def test_state_is_the_last_row_of_each_step_and_no_step_is_empty(rows: tuple[np.ndarray, np.ndarray]) -> None:
    t, _ = rows
    values = np.arange(t.size, dtype=float)  # a row's value is its number
    grid = Grid(0.0, INTERVAL, int(t[-1] / INTERVAL) + 3)
    idx = grid.index(t)
    ks, held = last_in_step(idx, values)
    assert ks[0] == idx[0] and ks[-1] == idx[-1] and (np.diff(ks) == 1).all()
    for k, v in zip(ks, held):
        mine = np.nonzero(idx == k)[0]
        # its own last row, else the last row before it: never a row of a later step, never none
        assert v == (mine[-1] if mine.size else np.nonzero(idx < k)[0][-1])
    # every row is somewhere: the rows a step's last one hides are still counted by the rates, and the
    # last row of every step with rows is shown
    shown = set(held.astype(int))
    assert all(np.nonzero(idx == k)[0][-1] in shown for k in set(idx.tolist()))


@given(jittered(), st.lists(st.integers(0, 5), min_size=80, max_size=80))
@settings(max_examples=200, deadline=None)
def test_latency_steps_merge_their_rows_by_count(rows: tuple[np.ndarray, np.ndarray], counts_all: list[int]) -> None:
    t, _ = rows
    counts = np.array(counts_all[:t.size], dtype=float)
    values = np.arange(1.0, t.size + 1.0) * 10
    idx = Grid(0.0, INTERVAL, int(t[-1] / INTERVAL) + 3).index(t)
    ks, merged = interval_stats(idx, counts, values)
    assert (np.diff(ks) == 1).all() and ks[-1] == idx[-1]
    for k, v in zip(ks, merged):
        mine = np.nonzero(idx == k)[0]
        if not mine.size:  # the next row's interval covers the step
            mine = np.nonzero(idx == idx[idx > k][0])[0]
        w = counts[mine]
        expect = (values[mine] * w).sum() / w.sum() if w.sum() else math.nan
        assert (math.isnan(v) and math.isnan(expect)) or math.isclose(v, expect)


def test_smoothing_stays_inside_each_flows_life() -> None:
    # a flow of 5 steps with its last a burst, then nothing: the smoothed line ends where the flow ends
    gp = np.array([np.nan, 10.0, 10.0, 10.0, 10.0, 300.0, np.nan, np.nan, np.nan])
    out = smooth_inside(gp, 3)
    assert np.isnan(out[[0, 6, 7, 8]]).all() and np.isfinite(out[1:6]).all()
    # every window is whole and inside the life: the first and last slide inward
    assert out[1] == out[2] == 10.0 and out[4] == out[5] == (10 + 10 + 300) / 3
    # a flow shorter than the window: its whole life
    assert smooth_inside(np.array([np.nan, 4.0, 8.0]), 20)[1:].tolist() == [6.0, 6.0]
    # a NaN inside the life (no step lost here, but a file may lack rows) is left out, not spread
    assert smooth_inside(np.array([2.0, np.nan, 4.0]), 3).tolist() == [3.0, 3.0, 3.0]


def test_the_sum_counts_the_flows_running_and_is_nan_where_none_runs() -> None:
    gp = np.array([[np.nan, 1.0, 1.0, 1.0, np.nan, np.nan],
                   [np.nan, np.nan, np.nan, 2.0, 2.0, np.nan]])
    per, total = smoothed_goodput(gp, 0.1, seconds=0.1)
    assert np.array_equal(np.isfinite(per), np.isfinite(gp))
    assert math.isnan(total[0]) and math.isnan(total[5])
    assert total[1:5].tolist() == [1.0, 1.0, 3.0, 2.0]


def _end(t: np.ndarray, cwnd: np.ndarray, rx: np.ndarray, side: str) -> RawFlow:
    cols = {"t_wall": array("d", t), "t_mono": array("d", t), "snd_cwnd": array("I", cwnd.astype(int)),
            "app_bytes_rx": array("Q", rx.astype(int)), "app_bytes_tx": array("Q", [0] * t.size)}
    return RawFlow(f"f.{side}.nflow", {"interval": INTERVAL, "engine": "builtin", "host": "h"}, cols)


@given(jittered())
@settings(max_examples=40, deadline=None)
def test_the_dataset_keeps_every_row_and_leaves_no_step_nan(rows: tuple[np.ndarray, np.ndarray]) -> None:
    """Through build_dataset: both ends' rows all in the sample layout with their times, the grid's
    cwnd with no NaN between the sender's first and last row, goodput adding up to the bytes."""
    t, cum = rows
    cwnd = np.arange(10, 10 + t.size)
    client = _end(t, cwnd, np.zeros(t.size), "client")
    server = _end(t[:-1] + 0.0003, cwnd[:-1], cum[:-1] - cum[0], "server")
    raw = ExperimentRaw(path=__import__("pathlib").Path("."), exp=1, record=ExperimentRecord(),
                        flows=[FlowRecord("h1-h2-1-0", {"test": "TCP_STREAM"}, client, server)])
    ds = build_dataset(raw)
    for end, side in (("client", client), ("server", server)):
        got = ds.sample_time.sel(flow="h1-h2-1-0", end=end).values
        assert np.isfinite(got).sum() == side.rows
        np.testing.assert_allclose(got[:side.rows] + ds.attrs["start_wall"], side.columns["t_wall"], atol=1e-6)
    c = ds.cwnd.isel(flow=0).values
    live = np.nonzero(np.isfinite(c))[0]
    assert np.isfinite(c[live[0]:live[-1] + 1]).all()
    assert set(c[live].astype(int)) <= set(cwnd.tolist())
    assert math.isclose(float(ds.goodput.isel(flow=0).sum()) * INTERVAL, (cum[-2] - cum[0]) * 8,
                        rel_tol=1e-6, abs_tol=1e-3)


def test_a_schema_1_dataset_gets_the_same_smoothing_of_its_goodput(tmp_path) -> None:
    """An exp.nc written before goodput_smooth existed: the plots' smoothing (smoothing.goodput_smooth)
    smooths its goodput inside each flow's life, in the same window."""
    import shutil
    from pathlib import Path

    from netesto.results import load_experiment
    from netesto.results.smoothing import goodput_smooth

    shutil.copytree(Path(__file__).parent / "data" / "3", tmp_path / "3")
    ds = build_dataset(load_experiment(tmp_path / "3"))
    old = ds.drop_vars(["goodput_smooth", "goodput_sum_smooth"])
    per, total = goodput_smooth(old)
    expect, _ = smoothed_goodput(ds.goodput.transpose("flow", "time").values, float(ds.attrs["interval"]))
    np.testing.assert_allclose(per.values, expect, equal_nan=True)
    assert per.attrs["window_seconds"] == ds.goodput_smooth.attrs["window_seconds"]
    assert np.array_equal(np.isfinite(per.values), np.isfinite(ds.goodput.values))
    # the new dataset's own: the receivers' TCP counts, the same bytes in total
    for f in ds.flow.values:
        assert float(ds.goodput_smooth.sel(flow=f).notnull().sum()) == float(ds.goodput.sel(flow=f).notnull().sum())
    assert goodput_smooth(ds)[0] is ds["goodput_smooth"] or goodput_smooth(ds)[0].equals(ds["goodput_smooth"])
