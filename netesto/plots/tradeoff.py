"""The throughput-delay plane of a sweep: each congestion control's goodput against its queueing delay.

A point per grid point (the mean over repetitions, both intervals as bars), joined along the swept
parameter, as congestion-control papers draw their algorithms (Pantheon's plots put delay on the x axis
too)::

    tradeoff(sw.stats())                 # a line per algorithm along buffer (or bw, rtt: the x of study.choose_x)
    tradeoff(sw.stats(), x="bw")
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from netesto.plots.study import MAX_PANELS, choose_x, require, sweep_dims, value_combos
from netesto.plots.summary import LEGEND, PALETTE


def tradeoff(st: Any, *, x: str | None = None, width: int = 540, height: int = 340) -> Any:
    """Each congestion control's goodput against its queueing delay, a point per grid point (mean over the
    repetitions, its two intervals as bars), joined along the swept parameter ``x`` (buffer, bw, ...) with a
    line per value of the other swept parameters: the throughput-delay plane in which a better algorithm
    sits up and to the left. Hover: the point's parameters and n."""
    import holoviews as hv

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    require(st, "cc_rate", "cc_qdelay")
    xdim, _coord, _label = choose_x(st, x)
    apart = [d for d in sweep_dims(st) if d != xdim and st.sizes[d] > 1]
    combos = value_combos(st, apart)
    joined = len(combos) * st.sizes["cc"] <= MAX_PANELS
    if not joined:
        combos = [{}]  # too many lines: the other parameters' points are drawn, not joined
    qx = hv.Dimension("cc_qdelay", label="queueing delay (ms)")
    ry = hv.Dimension("cc_rate", label=f"goodput ({st['cc_rate'].attrs.get('units', 'Mbit/s')})")
    layers = []
    for i, (where, key) in enumerate(itertools.product(combos, list(st["cc"].values))):
        part = (st.sel(where) if where else st).sel(cc=key)
        q, r = part["cc_qdelay"], part["cc_rate"]
        cells = [dict(zip(q.dims, idx)) for idx in itertools.product(*(range(n) for n in q.shape))]
        pts = []
        for c in cells:
            qv, rv = float(q[c]), float(r[c])
            if not (math.isfinite(qv) and math.isfinite(rv)):
                continue
            at = ", ".join(f"{d}={q[d].values[j]}" for d, j in c.items())
            n = int(part["cc_rate_n"][c]) if "cc_rate_n" in part else 0
            order = int(c.get(xdim, 0))
            pts.append((qv, rv, at, n, order, _bound(part, "cc_qdelay", c, qv), _bound(part, "cc_rate", c, rv)))
        if not pts:
            continue
        pts.sort(key=lambda p: p[4])
        col = PALETTE[i % len(PALETTE)]
        name = str(key) + (f" ({', '.join(f'{d}={w}' for d, w in where.items())})" if where else "")
        if joined:
            layers.append(hv.Curve([p[:2] for p in pts], qx, ry, label=name).opts(color=col, line_width=1,
                                                                                    alpha=0.6))
        layers.append(hv.Scatter([p[:4] for p in pts], qx, [ry, "point", "n"], label=name).opts(
            color=col, size=9, tools=["hover"]))
        layers.append(hv.ErrorBars([(p[0], p[1], *p[6]) for p in pts], qx, [ry, "yerrneg", "yerrpos"]).opts(
            color=col, alpha=0.5))
        layers.append(hv.ErrorBars([(p[0], p[1], *p[5]) for p in pts], qx, [ry, "xerrneg", "xerrpos"],
                                   horizontal=True).opts(color=col, alpha=0.5))
    title = "goodput against queueing delay" + (f", joined along {xdim}" if xdim else "")
    return hv.Overlay(layers).opts(title=title, width=width, height=height, show_grid=True, padding=0.1,
                                   **LEGEND)


def _bound(part: Any, var: str, cell: dict[str, int], mean: float) -> tuple[float, float]:
    """(below, above) of the mean to its interval's bounds, 0 where there is no interval."""
    lo = float(part[f"{var}_lo"][cell]) if f"{var}_lo" in part else math.nan
    hi = float(part[f"{var}_hi"][cell]) if f"{var}_hi" in part else math.nan
    return (mean - lo if math.isfinite(lo) else 0.0, hi - mean if math.isfinite(hi) else 0.0)


__all__ = ["tradeoff"]
