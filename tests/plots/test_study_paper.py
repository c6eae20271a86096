"""The paper's figures from a sweep over algorithm mixes and flow counts: a bar or a line never pools points of
different mixes (cubic alone and cubic beside bbr are not one algorithm's goodput)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

NAN = math.nan


@pytest.fixture
def st() -> xr.Dataset:
    """Stats of a sweep ``-p ca=bbr+cubic,cubic -p flows=1,3``: cubic alone takes the link, beside bbr a sixth."""
    cc_dims, dims = ("ca", "flows", "cc"), ("ca", "flows")
    rate = np.array([[[79.0, 16.0], [80.0, 15.0]], [[NAN, 94.0], [NAN, 95.0]]])  # [ca][flows][bbr, cubic]
    rtt = np.array([[[35.0, 34.0], [38.0, 37.0]], [[NAN, 33.0], [NAN, 36.0]]])
    retrans = np.array([[[2.0, 4.0], [4.5, 5.8]], [[NAN, 0.1], [NAN, 0.6]]])
    return xr.Dataset(
        {"cc_rate": (cc_dims, rate, {"units": "Mbit/s"}), "cc_rtt": (cc_dims, rtt), "cc_retrans_pct": (cc_dims, retrans),
         "jain": (dims, np.array([[0.69, 0.65], [1.0, 0.96]])), "n_flows": (dims, np.array([[2, 6], [1, 3]]))},
        coords={"ca": ["bbr+cubic", "cubic"], "flows": [1, 3], "cc": ["bbr", "cubic"]})


def _panels(st: xr.Dataset) -> list:  # type: ignore[type-arg]
    from netesto.plots import study

    return list(study.paper_figures(st))


def test_a_bar_per_algorithm_flow_count_and_mix_with_its_own_goodput(st: xr.Dataset) -> None:
    import holoviews as hv

    bars = _panels(st)[0].get(0)
    assert isinstance(bars, hv.Bars)
    got = dict(zip(bars.dimension_values(0), bars.dimension_values(1)))
    assert got == {"bbr 1 bbr+cubic": 79.0, "cubic 1 bbr+cubic": 16.0, "bbr 3 bbr+cubic": 80.0,
                   "cubic 3 bbr+cubic": 15.0, "cubic 1 cubic": 94.0, "cubic 3 cubic": 95.0}
    fig = hv.render(_panels(st)[0], backend="bokeh")
    assert [round(ax.major_label_orientation, 3) for ax in fig.xaxis] == [round(math.pi / 4, 3)]  # six labels


def test_lines_against_the_number_of_flows_join_points_of_one_mix(st: xr.Dataset) -> None:
    import holoviews as hv

    _, retrans, jain = _panels(st)
    lines = {c.label: list(zip(c.dimension_values(0), c.dimension_values(1)))
             for c in retrans if isinstance(c, hv.Curve)}
    assert lines == {"bbr (ca=bbr+cubic)": [(2, 2.0), (6, 4.5)], "cubic (ca=bbr+cubic)": [(2, 4.0), (6, 5.8)],
                     "cubic (ca=cubic)": [(1, 0.1), (3, 0.6)]}  # no bbr line for cubic alone: it ran none
    lines = {c.label: list(zip(c.dimension_values(0), c.dimension_values(1))) for c in jain if isinstance(c, hv.Curve)}
    assert lines == {"all flows (ca=bbr+cubic)": [(2, 0.69), (6, 0.65)], "all flows (ca=cubic)": [(1, 1.0), (3, 0.96)]}


def test_many_mixes_are_averaged_rather_than_drawn_as_a_forest(st: xr.Dataset) -> None:
    import holoviews as hv

    from netesto.plots.study import MAX_BARS

    many = xr.concat([st.assign_coords(ca=[f"{c}#{i}" for c in st.ca.values]) for i in range(MAX_BARS)], "ca")
    bars = _panels(many)[0].get(0)
    assert isinstance(bars, hv.Bars) and len(bars) == 4  # bbr and cubic at 1 and 3 flows
