"""A study figure's x axis names the swept values and leaves their points room; its legend covers no point."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr


def _stats(buffers: list[str], bdps: list[float]) -> xr.Dataset:
    """Two algorithms' shares over a buffer sweep, as :func:`netesto.results.stats.stats` lays them out."""
    share = np.array([[0.8 - 0.6 * i / max(1, len(bdps) - 1), 0.2 + 0.6 * i / max(1, len(bdps) - 1)]
                      for i in range(len(bdps))])
    dims = ("buffer", "cc")
    return xr.Dataset(
        {"cc_share": (dims, share, {"units": "1"}), "cc_share_lo": (dims, share - 0.1),
         "cc_share_hi": (dims, share + 0.1), "cc_share_n": (dims, np.full(share.shape, 3))},
        coords={"buffer": buffers, "buffer_bdp": ("buffer", bdps), "cc": ["bbr", "cubic"]})


def _figure(st: xr.Dataset):  # type: ignore[no-untyped-def]
    import holoviews as hv

    from netesto.plots import study

    layout = study.by_algorithm(st, "share")
    (panel,) = list(layout)
    return hv.render(panel, backend="bokeh")


@pytest.mark.parametrize("bdps", [[0.5, 4.0], [0.5, 1.0, 2.0, 4.0, 8.0], [1.0, 2.0, 3.0]])
def test_the_swept_values_are_the_ticks_and_no_point_sits_on_the_frame(bdps: list[float]) -> None:
    from bokeh.models import FixedTicker, LogAxis

    fig = _figure(_stats([f"{b:g}bdp" for b in bdps], bdps))
    (axis,) = fig.xaxis
    assert isinstance(axis, LogAxis) == (bdps[-1] / bdps[0] >= 8)
    assert isinstance(axis.ticker, FixedTicker) and list(axis.ticker.ticks) == bdps
    assert [axis.major_label_overrides[b] for b in bdps] == [f"{b:g}bdp" for b in bdps]  # as the sweep named them
    lo, hi = fig.x_range.start, fig.x_range.end
    if isinstance(axis, LogAxis):  # room measured in the axis's own (log) space
        lo, hi, first, last = np.log10([lo, hi, bdps[0], bdps[-1]])
    else:
        first, last = bdps[0], bdps[-1]
    room = 0.05 * (last - first)
    assert lo < first - room and hi > last + room


def test_the_legend_is_beside_the_frame_not_over_the_points() -> None:
    from bokeh.models import Legend

    fig = _figure(_stats(["0.5bdp", "4bdp"], [0.5, 4.0]))
    assert [type(m) for m in fig.right] == [Legend] and not [m for m in fig.center if isinstance(m, Legend)]
    (legend,) = fig.right
    assert [item.label["value"] for item in legend.items] == ["bbr", "cubic"] and legend.click_policy == "hide"


def test_a_text_axis_keeps_its_own_categories() -> None:
    from bokeh.models import FactorRange

    st = _stats(["small", "large"], [0.5, 4.0]).drop_vars("buffer_bdp")
    fig = _figure(st)
    assert isinstance(fig.x_range, FactorRange) and list(fig.x_range.factors) == ["small", "large"]


def _with_flows(st: xr.Dataset, bbr: float, cubic: float) -> xr.Dataset:
    per_point = np.tile([bbr, cubic], (st.sizes["buffer"], 1))
    return st.assign(cc_flows=(("buffer", "cc"), per_point))


def _hlines(st: xr.Dataset) -> list[tuple[float, str]]:
    import holoviews as hv

    from netesto.plots import study

    (panel,) = list(study.by_algorithm(st, "share"))
    return [(float(e.data), e.opts.get().kwargs["color"]) for e in panel if isinstance(e, hv.HLine)]


def test_the_share_figure_draws_the_fair_share_it_is_held_against() -> None:
    from netesto.plots.summary import PALETTE

    st = _stats(["0.5bdp", "4bdp"], [0.5, 4.0])
    assert _hlines(_with_flows(st, 1, 1)) == [(0.5, "#888888")]  # two alike: one grey line
    assert _hlines(_with_flows(st, 2, 1)) == [(pytest.approx(2 / 3), PALETTE[0]), (pytest.approx(1 / 3), PALETTE[1])]
    assert _hlines(st) == []  # no flow counts: no line
    alone = _with_flows(st, 1, 1)
    alone["cc_flows"][0, 0] = 0  # bbr did not run at the first point: nothing to hold cubic against there
    assert _hlines(alone) == []
