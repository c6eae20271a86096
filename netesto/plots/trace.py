"""Per-ACK traces (the Dataset's ``probe`` axis) as plots: full detail in a notebook, an overview on a page.

* :func:`trace_plot` (notebooks): cwnd, ssthresh and srtt at every ACK of one
  or more flow ends, with the retransmissions marked. Each line is a
  :func:`zoomable` curve: shown live, a zoom or pan redraws the range in view
  from the dataset (per pixel column its lowest and highest value), down to
  single ACKs, so a million events stay quick; ``window=`` draws a range whole
  for static pages (``show``, HTML exports).
* :func:`page_panels` (exp.html): the same panels from a fixed budget of
  points, :data:`PAGE_POINTS` per panel whatever the number of events (each
  line keeps its lowest and highest value of each time bin: a collapse or a
  spike never disappears), so the page's size is bounded: see docs/traces.md.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Sequence

import numpy as np

from netesto.plots.page import bokeh_backend

PAGE_POINTS = 8000  # per page panel, all its lines together
PAGE_BYTES = 120_000  # what the overview adds to a page at most (two panels; 80-95 KB measured, docs/traces.md)
MAX_PAGE_ENDS = 4  # traced flow ends on a page (the notebook shows any)
PANELS = {
    "cwnd": ("Congestion window at each ACK", ("probe_cwnd", "probe_ssthresh"), "packets", 1.0),
    "srtt": ("Smoothed RTT at each ACK", ("probe_srtt",), "ms", 1e3),
    "inflight": ("Bytes in flight at each ACK", ("probe_inflight",), "KB", 1e3),
    "rate": ("Sending rate over the last RTT", ("probe_send_rate", "probe_ack_rate"), "Mbit/s", 1e6),
}


def event_envelope(t: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * bins`` events of an irregular series: per equal time bin, the lowest and the
    highest value, in time order (float32). NaN values are left out; short series come back whole.

    >>> t = np.array([0.0, 0.1, 0.2, 0.3, 5.0, 5.1, 9.9, 10.0])
    >>> ts, ys = event_envelope(t, np.array([3.0, 1.0, 9.0, 4.0, 2.0, 2.0, 7.0, 8.0]), 2)
    >>> ts.tolist(), ys.tolist()
    ([0.10000000149011612, 0.20000000298023224, 5.0, 10.0], [1.0, 9.0, 2.0, 8.0])
    """
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    if t.size <= 2 * bins:
        return t.astype(np.float32), y.astype(np.float32)
    width = (t[-1] - t[0]) / bins or 1.0
    b = np.minimum(((t - t[0]) / width).astype(np.int64), bins - 1)
    order = np.lexsort((y, b))  # by bin, then value: a bin's first is its lowest, its last its highest
    first = np.flatnonzero(np.r_[True, b[order][1:] != b[order][:-1]])
    last = np.r_[first[1:] - 1, order.size - 1]
    keep = np.unique(np.concatenate((order[first], order[last])))  # positions, in time order
    return t[keep].astype(np.float32), y[keep].astype(np.float32)


def traced_ends(ds: Any) -> list[tuple[str, str]]:
    """(flow, end) pairs that have probe events, the data sender's end first within each flow."""
    if "probe_time" not in ds:
        return []
    out = []
    counts = ds["trace_events"]
    for flow in ds["flow"].values:
        test = str(ds["test"].sel(flow=flow).values) if "test" in ds.coords else ""
        ends = ("server", "client") if test == "TCP_MAERTS" else ("client", "server")
        out += [(str(flow), end) for end in ends if float(counts.sel(flow=flow, end=end).fillna(0)) > 0]
    return out


def _series(ds: Any, flow: str, end: str, var: str) -> tuple[np.ndarray, np.ndarray]:
    sel = ds.sel(flow=flow, end=end)
    return np.asarray(sel["probe_time"].values, float), np.asarray(sel[var].values, float)


def _marks(ds: Any, flow: str, end: str) -> tuple[np.ndarray, np.ndarray]:
    """Times of the end's retransmissions and of its congestion-state changes."""
    sel = ds.sel(flow=flow, end=end)
    retx = np.asarray(sel["retx_time"].values, float) if "retx_time" in ds else np.empty(0)
    ca = np.asarray(sel["ca_time"].values, float) if "ca_time" in ds else np.empty(0)
    return retx[np.isfinite(retx)], ca[np.isfinite(ca)]


def zoomable(t: np.ndarray, y: np.ndarray, label: str, bins: int) -> Any:
    """A curve of every event that, in a live notebook, redraws the visible time range on each zoom
    or pan: its :func:`event_envelope` in ``bins`` bins, so every event once fewer than ``2 * bins``
    are in view (single ACKs), and each bin's extremes before."""
    import holoviews as hv

    def view(x_range: tuple[float, float] | None) -> Any:
        lo, hi = x_range if x_range is not None else (t[0], t[-1])
        i = max(0, int(np.searchsorted(t, lo)) - 1)
        j = min(t.size, int(np.searchsorted(t, hi, side="right")) + 1)
        ts, ys = event_envelope(t[i:j], y[i:j], bins)
        return hv.Curve((ts, ys), "time", "value", label=label)

    return hv.DynamicMap(view, streams=[hv.streams.RangeX()])


def _retransmits(ds: Any, flow: str, end: str, bins: int | None) -> list[Any]:
    """Red marks at the cwnd where the end retransmitted (on a page, the first of each time bin)."""
    import holoviews as hv

    retx, _ = _marks(ds, flow, end)
    if not retx.size:
        return []
    if bins:
        span = max(1e-9, float(retx[-1] - retx[0]) / bins)
        retx = retx[np.unique(np.floor((retx - retx[0]) / span), return_index=True)[1]]
    t, cwnd = _series(ds, flow, end, "probe_cwnd")
    ok = np.isfinite(t)
    at = np.searchsorted(t[ok], retx).clip(0, max(0, int(ok.sum()) - 1))
    return [hv.Scatter((retx.astype(np.float32), cwnd[ok][at].astype(np.float32)), "time", "value",
                       label=f"{flow} {end} retransmits").opts(color="red", marker="x", size=7)]


def _panel(ds: Any, ends: Sequence[tuple[str, str]], panel: str, bins: int | None, width: int,
           height: int, window: tuple[float, float] | None = None) -> Any:
    import holoviews as hv

    title, variables, unit, factor = PANELS[panel]
    if window is not None:
        title += f", {window[0]:.3f}-{window[1]:.3f} s"
    elements = []
    for flow, end in ends:
        for var in variables:
            if var not in ds:
                continue
            t, y = _series(ds, flow, end, var)
            ok = np.isfinite(t) & np.isfinite(y)
            if window is not None:
                ok &= (t >= window[0]) & (t <= window[1])
            if not ok.any():
                continue
            label = f"{flow} {end} {var[6:]}"
            if window is not None:  # a window drawn whole: every event when it holds fewer than 2 x width
                ts, ys = event_envelope(t[ok], y[ok] / factor, width)
                elements.append(hv.Curve((ts, ys), "time", "value", label=label))
            elif bins is None:  # full detail, thinned per view as the user zooms
                elements.append(zoomable(t[ok], y[ok] / factor, label, width))
            else:
                ts, ys = event_envelope(t[ok], y[ok] / factor, bins)
                elements.append(hv.Curve((ts, ys), "time", "value", label=label))
        if panel == "cwnd" and window is None:
            elements += _retransmits(ds, flow, end, bins)
    if not elements:
        return None
    overlay = functools.reduce(operator.mul, elements[1:], elements[0] * hv.Curve([], "time", "value"))
    return overlay.opts(hv.opts.Overlay(title=title, width=width, height=height, xlabel="time (s)", ylabel=unit,
                                        legend_position="right", legend_opts={"click_policy": "hide"}))


def trace_plot(ds: Any, flows: Sequence[str] | str | None = None, *, ends: Sequence[str] | None = None,
               panels: Sequence[str] = ("cwnd", "srtt"), width: int = 900, height: int = 280,
               window: tuple[float, float] | None = None) -> Any:
    """The per-ACK panels of some flow ends (default: every traced end), full detail, time axes
    linked (see the module docstring). ``panels`` from :data:`PANELS`: cwnd, srtt, inflight, rate.

    Shown live (holoviews' own notebook display), each line redraws the range a zoom or pan brings into
    view; a static page (:func:`netesto.plots.notebook.show`, an HTML export) keeps what it was drawn with,
    so ``window=(t0, t1)`` (seconds of the experiment) draws that range whole: every ACK of it, up to
    ``2 * width`` a line."""
    import holoviews as hv

    bokeh_backend()
    chosen = [flows] if isinstance(flows, str) else flows
    pairs = [(f, e) for f, e in traced_ends(ds) if (chosen is None or f in chosen) and (ends is None or e in ends)]
    if not pairs:
        raise ValueError("no traced flow end to plot (DO_CLIENT trace=, DO_TRACE or --trace record them)")
    built = [p for p in (_panel(ds, pairs, name, None, width, height, window) for name in panels) if p is not None]
    return hv.Layout(built).cols(1).opts(shared_axes=True)


def page_panels(ds: Any, *, width: int = 900, height: int = 260) -> list[tuple[str, str, Any]]:
    """(name, caption, holoviews panel) of the page's trace overview: the first
    :data:`MAX_PAGE_ENDS` traced ends, :data:`PAGE_POINTS` points a panel (see the module docstring)."""
    pairs = traced_ends(ds)[:MAX_PAGE_ENDS]
    if not pairs:
        return []
    bokeh_backend()
    bins = max(25, PAGE_POINTS // (2 * len(pairs) * 2))  # two lines a panel at most, two points a bin
    out = []
    for name, caption in (("cwnd", "cwnd and ssthresh at every ACK (tcp:tcp_probe), red x: retransmissions; "
                                    "each line keeps its lowest and highest value of each of "
                                    f"{bins} time bins: the notebook's trace_plot shows every ACK."),
                          ("srtt", "The smoothed RTT the kernel held at every ACK (the same thinning).")):
        panel = _panel(ds, pairs, name, bins, width, height)
        if panel is not None:
            out.append((f"trace_{name}", caption, panel))
    return out


__all__ = ["MAX_PAGE_ENDS", "PAGE_BYTES", "PAGE_POINTS", "PANELS", "event_envelope", "page_panels", "trace_plot", "traced_ends",
           "zoomable"]
