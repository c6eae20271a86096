"""Figures across experiments: a sweep's measures against its parameters, one colour per ca.

Built from :func:`netesto.results.cube.stats` (means over repetitions with their
95 % interval bounds and n)::

    sw = netesto.open_sweep("out")
    netesto.plots.summary.sweep_figures(sw.stats())          # rate, RTT, retransmits, Jain vs bw, per ca
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

MEASURES = ("rate", "mean_rtt", "retrans_pkts_pct", "jain")
LABELS = {"rate": "goodput", "mean_rtt": "smoothed RTT", "ping_rtt": "ping RTT", "retrans_pkts_pct": "retransmitted",
          "jain": "Jain fairness", "mean_cwnd": "cwnd", "max_min_ratio": "max/min rate", "lat_p99": "p99 latency"}
X_PREFERENCE = ("bw", "rtt", "buffer", "flows", "loss", "dur")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
# outside the frame, where it hides no point (inside, top left, it covered a share of 0.8 at the first x);
# a click on an entry hides that line
LEGEND: dict[str, Any] = {"legend_position": "right", "legend_opts": {"click_policy": "hide"}}
MAX_PANELS = 12


def choose_axes(dims: Sequence[str], sizes: dict[str, int], x: str | None = None,
                color: str | None = None) -> tuple[str, str | None, list[str]]:
    """The x axis, the colour and the facet dimensions of a sweep's summary plots.

    >>> choose_axes(["ca", "bw", "rtt"], {"ca": 2, "bw": 3, "rtt": 2})
    ('bw', 'ca', ['rtt'])
    >>> choose_axes(["ca"], {"ca": 2})
    ('ca', None, [])
    """
    dims = [d for d in dims if d != "rep"]
    if color is None and "ca" in dims and (x != "ca"):
        color = "ca"
    if x is None:
        rest = [d for d in dims if d != color]
        many = [d for d in rest if sizes.get(d, 1) > 1] or rest
        ranked = sorted(many, key=lambda d: (X_PREFERENCE.index(d) if d in X_PREFERENCE else len(X_PREFERENCE), dims.index(d)))
        x = ranked[0] if ranked else (color or dims[0])
        if x == color:
            color = None
    facets = [d for d in dims if d not in (x, color) and sizes.get(d, 1) > 1]
    return x, color, facets


def _title(measure: str, units: str) -> str:
    label = LABELS.get(measure, measure)
    return f"{label} ({units})" if units and units != "1" else label


def _panel(st: Any, measure: str, x: str, color: str | None, where: dict[str, Any], width: int, height: int) -> Any:
    import holoviews as hv

    units = str(st[measure].attrs.get("units", ""))
    sub = st.sel(**where) if where else st
    labels = [str(v) for v in sub[x].values]
    groups = [str(v) for v in sub[color].values] if color else [""]
    layers = []
    for i, g in enumerate(groups):
        part = sub.sel({color: sub[color].values[i]}) if color else sub
        mean = np.asarray(part[measure].values, dtype=float).reshape(-1)
        neg, pos = _bounds(part, measure, mean)
        n = (np.asarray(part[f"{measure}_n"].values).reshape(-1) if f"{measure}_n" in part
             else np.zeros(mean.shape, dtype=int))
        col = PALETTE[i % len(PALETTE)]
        rows = [(lab, m, a, b, int(k)) for lab, m, a, b, k in zip(labels, mean, neg, pos, n) if math.isfinite(m)]
        name = f"{color}={g}" if color else measure
        kdims, vdims = [hv.Dimension(x)], [hv.Dimension(measure, label=_title(measure, units))]
        layers.append(hv.Curve([(r[0], r[1]) for r in rows], kdims, vdims, label=name).opts(color=col, line_width=2))
        layers.append(hv.Scatter(rows, kdims, [*vdims, "below", "above", "n"], label=name).opts(
            color=col, size=8, tools=["hover"]))
        if any(r[2] or r[3] for r in rows):
            layers.append(hv.ErrorBars([r[:4] for r in rows], kdims, [*vdims, "yerrneg", "yerrpos"],
                                       label=name).opts(color=col))
    facet = ", ".join(f"{k}={v}" for k, v in where.items())
    title = _title(measure, units) + (f" | {facet}" if facet else "")
    return hv.Overlay(layers).opts(title=title, width=width, height=height, **LEGEND,
                                   show_grid=True, xlabel=x)


def _bounds(part: Any, measure: str, mean: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How far each mean's interval reaches below and above it: from ``<m>_lo``/``<m>_hi`` (a sweep's
    stats: inside the measure's range), else ``<m>_ci95`` (a comparison's symmetric half-width); 0 for none."""
    if f"{measure}_lo" in part and f"{measure}_hi" in part:
        lo = np.asarray(part[f"{measure}_lo"].values, dtype=float).reshape(-1)
        hi = np.asarray(part[f"{measure}_hi"].values, dtype=float).reshape(-1)
        return np.nan_to_num(mean - lo), np.nan_to_num(hi - mean)
    half = (np.asarray(part[f"{measure}_ci95"].values, dtype=float).reshape(-1) if f"{measure}_ci95" in part
            else np.zeros(mean.shape))
    half = np.nan_to_num(half)
    return half, half


def sweep_figures(st: Any, measures: Sequence[str] = MEASURES, *, x: str | None = None, color: str | None = None,
                  width: int = 540, height: int = 280) -> Any:
    """One panel per measure (and per value of the remaining parameters): the
    mean over repetitions at each ``x`` value, one line per ``color`` value, its
    95 % interval as bars where there were repetitions (n and the bounds on hover).
    Returns a holoviews Layout."""
    import holoviews as hv

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    dims = [d for d in st.dims if d not in ("rep", "cc", "grp")]
    x, color, facets = choose_axes(dims, dict(st.sizes), x, color)
    combos = list(itertools.product(*(list(st[f].values) for f in facets))) or [()]
    panels = []
    for combo in combos[:MAX_PANELS]:
        where = dict(zip(facets, combo))
        for m in measures:
            if m in st:
                panels.append(_panel(st, m, x, color, where, width, height))
    return hv.Layout(panels).cols(2).opts(shared_axes=False)


def paper_figures(combined: Any, *, by: str = "ca", flows: str = "n_flows", width: int = 440,
                  height: int = 280) -> Any:
    """The Netesto paper's summary figures from :func:`netesto.results.combine` (dim ``exp``):
    goodput per ``by`` value as bars with the mean smoothed RTT as points on a right axis, and
    retransmitted % and Jain fairness against the number of flows, a line per ``by`` value.
    Experiments that share a ``by`` value (and number of flows) are averaged."""
    import holoviews as hv
    import pandas as pd

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    if by not in combined.coords:
        from netesto.errors import ResultsError

        have = ", ".join(str(c) for c in combined.coords if c != "exp")
        raise ResultsError(f"paper_figures: no parameter {by!r}; have {have}")
    df = pd.DataFrame({by: [str(v) for v in combined[by].values],
                       **{v: combined[v].values for v in ("rate", "mean_rtt", "retrans_pkts_pct", "jain", flows)
                          if v in combined}})
    per = df.groupby(by, sort=False).mean(numeric_only=True).reset_index()
    rate_units = str(combined["rate"].attrs.get("units", "Mbit/s"))
    bars = hv.Bars([(r[by], r["rate"]) for _, r in per.iterrows()], by,
                   hv.Dimension("rate", label=f"goodput ({rate_units})")).opts(color=PALETTE[0], alpha=0.8)
    rtt = hv.Scatter([(r[by], r["mean_rtt"]) for _, r in per.iterrows()], by,
                     hv.Dimension("rtt_ms", label="smoothed RTT (ms)")).opts(color="black", size=10, marker="diamond",
                                                                            tools=["hover"])
    panels = [(bars * rtt).opts(multi_y=True, title="goodput (bars) and RTT (points) per " + by, width=width,
                                height=height, show_grid=True)]
    if flows in df:
        for measure in ("retrans_pkts_pct", "jain"):
            layers = []
            for i, (value, part) in enumerate(df.groupby(by, sort=False)):
                line = part.groupby(flows).mean(numeric_only=True)[measure].sort_index()
                pts = [(float(n), float(v)) for n, v in line.items() if math.isfinite(v)]
                col = PALETTE[i % len(PALETTE)]
                kdims, vdims = [hv.Dimension(flows, label="flows")], [hv.Dimension(measure, label=LABELS[measure])]
                layers.append(hv.Curve(pts, kdims, vdims, label=f"{by}={value}").opts(color=col, line_width=2))
                layers.append(hv.Scatter(pts, kdims, vdims, label=f"{by}={value}").opts(color=col, size=7))
            units = " (%)" if measure == "retrans_pkts_pct" else ""
            panels.append(hv.Overlay(layers).opts(title=f"{LABELS[measure]}{units} vs number of flows", width=width,
                                                  height=height, show_grid=True, **LEGEND))
    return hv.Layout(panels).cols(3).opts(shared_axes=False)


__all__ = ["MEASURES", "choose_axes", "paper_figures", "sweep_figures"]
