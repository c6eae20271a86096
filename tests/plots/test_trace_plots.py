"""Per-ACK trace plots: the page's overview stays within its budget and keeps extremes; the notebook's zooms
down to single ACKs."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from netesto.plots.trace import PAGE_BYTES, PAGE_POINTS, event_envelope, page_panels, trace_plot, traced_ends, zoomable


def traced(events: int, spike_at: int) -> xr.Dataset:
    """One flow whose client end has ``events`` ACKs over 10 s, a cwnd collapse and one spike."""
    t = np.linspace(0.0, 10.0, events)
    cwnd = 100 + 20 * np.sin(t)
    cwnd[spike_at] = 900.0
    cwnd[events // 2: events // 2 + 3] = 1.0  # a collapse of three ACKs
    pad = np.full(events, np.nan)
    probe = {"probe_time": np.stack([t, pad])[None], "probe_cwnd": np.stack([cwnd, pad])[None],
             "probe_ssthresh": np.stack([cwnd * 0 + 80, pad])[None], "probe_srtt": np.stack([t * 0 + 20000, pad])[None]}
    data = {k: (("flow", "end", "probe"), v) for k, v in probe.items()}
    data["retx_time"] = (("flow", "end", "retx"), np.array([[[5.0, 5.1], [np.nan, np.nan]]]))
    data["ca_time"] = (("flow", "end", "ca_event"), np.array([[[5.0], [np.nan]]]))
    data["trace_events"] = (("flow", "end"), np.array([[float(events), np.nan]]))
    return xr.Dataset(data, coords={"flow": ["h1-h2-1-0"], "end": ["client", "server"], "test": ("flow", ["TCP_STREAM"])})


def test_the_envelope_keeps_each_bin_s_extremes_in_time_order() -> None:
    t = np.sort(np.random.default_rng(1).uniform(0, 100, 1_000_000))
    y = np.sin(t)
    y[123_456] = 50.0
    y[654_321] = -50.0
    ts, ys = event_envelope(t, y, 1000)
    assert ts.size <= 2000 and np.all(np.diff(ts) >= 0)
    assert ys.max() == 50.0 and ys.min() == -50.0
    short = event_envelope(t[:50], y[:50], 1000)
    assert short[0].size == 50  # a short series comes back whole


def test_the_page_overview_has_a_fixed_budget_whatever_the_events_and_keeps_the_collapse() -> None:
    from netesto.plots.page import embed, figures

    sizes = {}
    for events in (100_000, 1_000_000):
        ds = traced(events, spike_at=events // 3)
        panels = page_panels(ds)
        assert [name for name, _, _ in panels] == ["trace_cwnd", "trace_srtt"]
        cwnd = panels[0][2]
        curves = [el for el in cwnd.values() if type(el).__name__ == "Curve" and len(el)]
        shown = np.concatenate([el.dimension_values("value") for el in curves])
        assert sum(len(el) for el in curves) <= PAGE_POINTS
        assert shown.max() == 900.0 and shown.min() == 1.0  # the spike and the collapse survive the thinning
        sizes[events] = len(embed([figures(p)[0] for _, _, p in panels]).script)
    assert max(sizes.values()) < PAGE_BYTES, sizes  # what docs/traces.md states


def test_the_notebook_plot_zooms_down_to_single_acks() -> None:
    t = np.linspace(0.0, 10.0, 1_000_000)
    curve = zoomable(t, np.arange(t.size, dtype=float), "cwnd", 900)
    whole = curve[()]
    assert len(whole) <= 1800
    curve.event(x_range=(5.0, 5.0005))  # half a millisecond: ~50 ACKs
    near = curve[()]
    inside = int(((t >= 5.0) & (t <= 5.0005)).sum())
    assert inside <= len(near) <= inside + 2  # every ACK in view (and one each side)


def test_plots_of_a_dataset_without_traces_say_so() -> None:
    ds = traced(1000, 10).drop_vars(["probe_time"])
    assert traced_ends(ds) == [] and page_panels(ds) == []
    with pytest.raises(ValueError, match="no traced flow end"):
        trace_plot(ds)
    layout = trace_plot(traced(1000, 10))
    assert len(layout) == 2


def test_a_window_is_drawn_with_every_ack_in_it() -> None:
    ds = traced(1_000_000, 10)
    layout = trace_plot(ds, window=(5.0, 5.001))  # 1 ms: ~100 ACKs
    cwnd = layout.values()[0]
    (line,) = [el for el in cwnd.values() if type(el).__name__ == "Curve" and "cwnd" in el.label]
    t = ds.probe_time.sel(flow="h1-h2-1-0", end="client").values
    assert len(line) == int(((t >= 5.0) & (t <= 5.001)).sum())
