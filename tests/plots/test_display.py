"""netesto.plots.display: thinning for the screen keeps peaks, dips, gaps and time order."""

from __future__ import annotations


import numpy as np
import pytest

import netesto.plots.display as display
from netesto.plots.display import envelope, first_per_bin


def test_envelope_keeps_each_bins_extremes_in_time_order() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(6000) * 0.01
    data = rng.random((3, 6000))
    data[1, 2000:2600] = np.nan  # a flow that paused: a gap, not a line across it
    data[2, 4321] = 50.0  # one spike
    ts, vs = envelope(t, data, 300)
    assert ts.shape == vs.shape == (3, 600) and ts.dtype == vs.dtype == np.float32
    assert np.all(np.diff(ts, axis=1) >= 0)  # time order kept within and across bins
    for k in range(3):
        assert np.nanmax(vs[k]) == pytest.approx(np.nanmax(data[k]), rel=1e-6)
        assert np.nanmin(vs[k]) == pytest.approx(np.nanmin(data[k]), rel=1e-6)
    assert vs[2].max() == 50.0 and ts[2, vs[2].argmax()] == pytest.approx(43.21)
    gap = (ts[1] > 20.2) & (ts[1] < 25.8)
    assert gap.any() and np.isnan(vs[1][gap]).all()
    # every point shown is a sample at its own time (nothing averaged or shifted)
    cols = np.rint(ts[0] / 0.01).astype(int)
    assert np.allclose(vs[0], data[0, cols].astype(np.float32))


def test_envelope_of_a_length_not_a_multiple_of_the_bins() -> None:
    t = np.arange(1001.0)
    ts, vs = envelope(t, t[None, :], 10)
    assert ts.shape[1] <= 20 and vs[0, -1] == 1000.0 and vs[0, 0] == 0.0


def test_first_per_bin_passes_short_series_through_and_keeps_each_groups_first() -> None:
    t = np.arange(50.0)
    flows = np.array(["a", "b"] * 25)
    assert first_per_bin(t, flows, 25).tolist() == list(range(50))
    keep = first_per_bin(t, flows, 5)  # 5 bins of 10 s: the first of a and of b in each
    assert keep.tolist() == [0, 1, 10, 11, 20, 21, 30, 31, 40, 41]
    shuffled = np.random.default_rng(1).permutation(50)  # the first in time, wherever it stands
    assert sorted(t[shuffled][first_per_bin(t[shuffled], flows[shuffled], 5)].tolist()) == [
        0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0, 40.0, 41.0]
