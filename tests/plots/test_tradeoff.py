"""The throughput-delay figure: each algorithm's points where the grid put them, joined along the swept parameter."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr


@pytest.fixture
def st() -> xr.Dataset:
    """A buffer sweep of bbr against cubic: bbr's delay flat and its goodput falling, cubic's rising with both."""
    dims = ("buffer", "cc")
    rate = np.array([[76.0, 18.0], [40.0, 55.0], [17.0, 78.0]])
    qdelay = np.array([[6.0, 6.0], [20.0, 25.0], [52.0, 57.0]])
    data = {"cc_rate": (dims, rate, {"units": "Mbit/s"}), "cc_qdelay": (dims, qdelay),
            "cc_rate_lo": (dims, rate - 5), "cc_rate_hi": (dims, rate + 5), "cc_rate_n": (dims, np.full(rate.shape, 3)),
            "cc_qdelay_lo": (dims, qdelay - 1), "cc_qdelay_hi": (dims, qdelay + 2)}
    return xr.Dataset(data, coords={"buffer": ["0.5bdp", "1bdp", "4bdp"], "buffer_bdp": ("buffer", [0.5, 1.0, 4.0]),
                                    "cc": ["bbr", "cubic"]})


def _layers(overlay, kind):  # type: ignore[no-untyped-def]
    return [e for e in overlay if type(e).__name__ == kind]


def test_each_algorithm_is_a_path_through_its_points_in_the_swept_order(st: xr.Dataset) -> None:
    from netesto.plots.tradeoff import tradeoff

    fig = tradeoff(st)
    curves = {c.label: list(zip(c.dimension_values(0), c.dimension_values(1))) for c in _layers(fig, "Curve")}
    assert curves == {"bbr": [(6.0, 76.0), (20.0, 40.0), (52.0, 17.0)],
                      "cubic": [(6.0, 18.0), (25.0, 55.0), (57.0, 78.0)]}
    (bbr, _cubic) = _layers(fig, "Scatter")
    assert list(bbr.dimension_values("point")) == ["buffer=0.5bdp", "buffer=1bdp", "buffer=4bdp"]
    assert list(bbr.dimension_values("n")) == [3, 3, 3]
    bars = _layers(fig, "ErrorBars")
    vertical, horizontal = bars[0], bars[1]  # bbr's: goodput's interval, then delay's
    assert list(vertical.dimension_values("yerrneg")) == list(vertical.dimension_values("yerrpos")) == [5.0] * 3
    assert list(horizontal.dimension_values("xerrneg")) == [1.0] * 3
    assert list(horizontal.dimension_values("xerrpos")) == [2.0] * 3


def test_too_many_lines_leave_the_points_unjoined(st: xr.Dataset) -> None:
    from netesto.plots.study import MAX_PANELS
    from netesto.plots.tradeoff import tradeoff

    many = xr.concat([st.expand_dims(rtt=[f"{10 * (i + 1)}ms"]) for i in range(MAX_PANELS)], "rtt")
    fig = tradeoff(many)
    assert _layers(fig, "Curve") == [] and sum(len(s) for s in _layers(fig, "Scatter")) == 3 * 2 * MAX_PANELS


def test_a_sweep_without_per_algorithm_numbers_is_said_so(st: xr.Dataset) -> None:
    from netesto.errors import ResultsError
    from netesto.plots.tradeoff import tradeoff

    with pytest.raises(ResultsError, match="cc_qdelay: not in the sweep's statistics"):
        tradeoff(st.drop_vars("cc_qdelay"))
