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


def test_first_per_bin_passes_short_masks_through() -> None:
    m = np.zeros((2, 50), bool)
    m[0, [3, 4, 5]] = True
    rows, cols = first_per_bin(m, 25)
    assert rows.tolist() == [0, 0, 0] and cols.tolist() == [3, 4, 5]
    assert [a.tolist() for a in first_per_bin(m, 5)] == [[0], [3]]
