"""A study's figures from a sweep: who got what against the swept parameter, the Netesto paper's figures.

Each builder takes :func:`netesto.results.stats.stats` of a sweep cube (means over
repetitions, ``<v>_lo``/``<v>_hi`` interval bounds, ``<v>_n``) and returns real
holoviews elements holding their data (``Curve``, ``Scatter``, ``ErrorBars``,
``Bars``, ``BoxWhisker``), which :mod:`netesto.plots.page` renders offline::

    sw = netesto.open_sweep("out")
    st = sw.stats()
    by_algorithm(st, "share")              # each algorithm's share against buffer (in BDPs), one line each
    paper_figures(st)                      # rate per algorithm as bars, RTT as points; retransmits, Jain vs flows
    flow_distributions(sw.flow_table())    # every flow's steady rate per algorithm and x value

The x axis is the first swept parameter by preference (buffer, bw, rtt, host_rtt,
flows, loss, dur), drawn against its numeric companion when it has one
(``buffer_bdp``, ``bw_bps``, ``rtt_ms``: :mod:`netesto.results.axes`), on a log
scale when it spans a factor of 8 or more; every other swept parameter makes panels.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from netesto.plots.summary import LEGEND, PALETTE

X_PREFERENCE = ("buffer", "bw", "rtt", "host_rtt", "flows", "loss", "jitter", "dur")
COMPANION = {"buffer": ("buffer_bdp", "buffer (BDP)"), "bw": ("bw_bps", "bottleneck (bit/s)"),
             "rtt": ("rtt_ms", "RTT (ms)"), "loss": ("loss_pct", "loss (%)"), "jitter": ("jitter_ms", "jitter (ms)")}
TITLES = {"share": "share of the bottleneck", "rate": "goodput", "rtt": "smoothed RTT", "qdelay": "queueing delay",
          "retrans_pct": "retransmitted", "flows": "flows"}
MAX_PANELS = 12
MAX_BARS = 24  # bars in the paper's goodput figure before the other parameters are averaged
MAX_TICKS = 12  # swept values labelled on a numeric x axis; more get the axis's own ticks


def sweep_dims(st: Any) -> list[str]:
    """The swept parameters of a stats dataset (its dims that are not the repetitions', algorithms' or groups')."""
    return [str(d) for d in st.dims if d not in ("rep", "cc", "grp")]


def choose_x(st: Any, x: str | None = None) -> tuple[str, str, str]:
    """``(dim, coordinate, label)`` of the x axis: ``x`` (a parameter or a companion of one), else the
    preferred swept parameter with more than one value; the numeric companion when it has one on that dim alone.

    >>> import xarray as xr
    >>> st = xr.Dataset(coords={"ca": ["a"], "buffer": ["0.5bdp", "2bdp"], "buffer_bdp": ("buffer", [0.5, 2.0])})
    >>> choose_x(st)
    ('buffer', 'buffer_bdp', 'buffer (BDP)')
    """
    dims = sweep_dims(st)
    if x is not None and x not in dims:
        owner = next((d for d in dims if x in st.coords and st[x].dims == (d,)), None)
        if owner is None:
            from netesto.errors import ResultsError

            raise ResultsError(f"x {x!r}: not a swept parameter or its companion (have {', '.join(dims)})")
        return owner, x, x
    if x is None:
        many = [d for d in dims if st.sizes[d] > 1] or dims
        ranked = sorted(many, key=lambda d: (X_PREFERENCE.index(d) if d in X_PREFERENCE else len(X_PREFERENCE),
                                             dims.index(d)))
        x = ranked[0] if ranked else ""
    coord, label = COMPANION.get(x, (x, x))
    if coord not in st.coords or st[coord].dims != (x,):
        found = [str(c) for c in st.coords if str(c).startswith(f"{x}_") and st[c].dims == (x,)]
        coord, label = (found[0], found[0]) if found else (x, x)
    return x, coord, label


def _log(values: np.ndarray) -> bool:
    v = np.asarray(values, dtype=float) if values.dtype.kind in "fiu" else np.array([])
    return bool(v.size > 1 and (v > 0).all() and v.max() / v.min() >= 8)


def _x_axis(values: np.ndarray, names: np.ndarray | None = None) -> dict[str, Any]:
    """A numeric x axis's ticks at the swept values themselves (up to :data:`MAX_TICKS` of them), each named
    as the sweep gave it (``names``, the parameter's own values beside its numeric companion) or else by its
    number, and room beside the first and last, whose points and interval bars would otherwise sit on the
    frame: without it a log axis showed neither end's value (0.5 and 4 BDPs were points without a label at
    either edge).

    >>> _x_axis(np.array([0.5, 4.0]))
    {'padding': (0.12, 0.1), 'xticks': [(0.5, '0.5'), (4.0, '4')]}
    >>> _x_axis(np.array([1e8, 1e7]), np.array(["100mbit", "10mbit"]))["xticks"]
    [(10000000.0, '10mbit'), (100000000.0, '100mbit')]
    """
    if values.dtype.kind not in "fiu":
        return {}
    numbers = np.asarray(values, dtype=float).ravel()
    given = [str(n) for n in np.asarray(names).ravel()] if names is not None and np.size(names) == numbers.size \
        else [f"{x:g}" for x in numbers]
    named = dict(sorted((float(x), g) for x, g in zip(numbers, given) if math.isfinite(x)))
    ticks = list(named.items()) if 1 < len(named) <= MAX_TICKS else None
    return {"padding": (0.12, 0.1), **({"xticks": ticks} if ticks else {})}


def require(st: Any, *names: str) -> None:
    """ResultsError naming the first of ``names`` the statistics lack (a sweep older than its parts)."""
    for var in names:
        if var not in st:
            from netesto.errors import ResultsError

            raise ResultsError(f"{var}: not in the sweep's statistics (a sweep of netesto older than its parts?)")


def value_combos(st: Any, dims: Sequence[str]) -> list[dict[str, Any]]:
    """Every combination of the values of ``dims``, each a selection (``[{}]`` for no dims).

    >>> import xarray as xr
    >>> [{k: str(v) for k, v in c.items()} for c in value_combos(xr.Dataset(coords={"ca": ["a", "b"]}), ["ca"])]
    [{'ca': 'a'}, {'ca': 'b'}]
    >>> value_combos(xr.Dataset(), [])
    [{}]
    """
    return [dict(zip(dims, c)) for c in itertools.product(*(list(st[d].values) for d in dims))] or [{}]


def _facets(st: Any, xdim: str) -> list[dict[str, Any]]:
    return value_combos(st, [d for d in sweep_dims(st) if d != xdim and st.sizes[d] > 1])[:MAX_PANELS]


def _rows(part: Any, var: str, coord: str) -> list[tuple[Any, ...]]:
    """(x, mean, lo, hi, n) of each x value with a number, x sorted when numeric."""
    xs = part[coord].values
    mean = np.asarray(part[var].values, dtype=float).reshape(-1)
    lo = np.asarray(part[f"{var}_lo"].values, dtype=float).reshape(-1) if f"{var}_lo" in part else np.full(mean.shape, np.nan)
    hi = np.asarray(part[f"{var}_hi"].values, dtype=float).reshape(-1) if f"{var}_hi" in part else np.full(mean.shape, np.nan)
    n = np.asarray(part[f"{var}_n"].values).reshape(-1) if f"{var}_n" in part else np.zeros(mean.shape, int)
    rows = [(x if xs.dtype.kind in "fiu" else str(x), m, lo_, hi_, int(k))
            for x, m, lo_, hi_, k in zip(np.atleast_1d(xs), mean, lo, hi, n) if math.isfinite(m)]
    return sorted(rows, key=lambda r: r[0]) if xs.dtype.kind in "fiu" else rows


def _lines(rows: list[tuple[Any, ...]], xdim: Any, ydim: Any, label: str, color: str) -> list[Any]:
    """A line, its points (hover: the interval and n) and asymmetric interval bars."""
    import holoviews as hv

    pts = [(r[0], r[1]) for r in rows]
    out = [hv.Curve(pts, xdim, ydim, label=label).opts(color=color, line_width=2),
           hv.Scatter(rows, xdim, [ydim, "lo", "hi", "n"], label=label).opts(color=color, size=8, tools=["hover"])]
    bars = [(r[0], r[1], r[1] - r[2], r[3] - r[1]) for r in rows if math.isfinite(r[2]) and math.isfinite(r[3])]
    if bars:
        out.append(hv.ErrorBars(bars, xdim, [ydim, "yerrneg", "yerrpos"], label=label).opts(color=color))
    return out


def _by(st: Any, dim: str, measure: str, x: str | None, width: int, height: int) -> Any:
    import holoviews as hv

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    var = f"{dim}_{measure}"
    require(st, var)
    xdim_name, coord, xlabel = choose_x(st, x)
    units = str(st[var].attrs.get("units", ""))
    ytitle = TITLES.get(measure, measure) + (f" ({units})" if units and units != "1" else "")
    panels = []
    for where in _facets(st, xdim_name):
        sub = st.sel(where) if where else st
        layers = []
        for i, key in enumerate(sub[dim].values):
            part = sub.sel({dim: key})
            rows = _rows(part, var, coord)
            if not rows:
                continue
            name = f"{key}" if dim == "cc" else f"group {key}" + _group_ca(part)
            layers += _lines(rows, hv.Dimension(coord, label=xlabel), hv.Dimension(var, label=ytitle), name,
                             PALETTE[i % len(PALETTE)])
        if not layers:
            continue
        if measure == "share":
            layers += _fair_lines(sub, dim)
        facet = ", ".join(f"{k}={v}" for k, v in where.items())
        what = "per congestion control" if dim == "cc" else "per flow group"
        title = f"{TITLES.get(measure, measure)} {what}" + (f" | {facet}" if facet else "")
        values = st[coord].values
        panels.append(hv.Overlay(layers).opts(title=title, width=width, height=height, show_grid=True,
                                              **LEGEND, logx=_log(values), xlabel=xlabel,
                                              ylabel=ytitle,
                                              **_x_axis(values, st[xdim_name].values if coord != xdim_name else None)))
    return hv.Layout(panels).cols(2).opts(shared_axes=False) if panels else hv.Layout([])


def _fair_lines(sub: Any, dim: str) -> list[Any]:
    """Dashed lines at each algorithm's (or group's) fair share (:func:`netesto.results.stats.fair_share`),
    where that is the same at every point of the panel: one grey line when all share it (0.5 for two alike),
    else one in each one's colour. A share above its line took more than its fair share."""
    import holoviews as hv

    from netesto.results.stats import fair_share

    fair = fair_share(sub, dim)
    if fair is None or sub.sizes[dim] < 2 or not bool((fair.notnull().sum(dim) >= 2).all()):
        return []  # a point with one algorithm alone, or none: no line to hold it against
    rows = np.asarray(fair.transpose(dim, ...).values, dtype=float).reshape(sub.sizes[dim], -1)
    lines: dict[float, list[int]] = {}
    for i, row in enumerate(rows):
        if np.isfinite(row).all() and np.allclose(row, row[0]):
            lines.setdefault(round(float(row[0]), 6), []).append(i)
    if len(lines) == 1 and len(next(iter(lines.values()))) == sub.sizes[dim]:
        return [hv.HLine(next(iter(lines))).opts(color="#888888", line_dash="dashed", line_width=1)]
    return [hv.HLine(y).opts(color=PALETTE[i % len(PALETTE)], line_dash="dashed", line_width=1)
            for y, keys in lines.items() for i in keys]


def _group_ca(part: Any) -> str:
    if "grp_ca" not in part:
        return ""
    names = sorted({str(v) for v in np.atleast_1d(part["grp_ca"].values).ravel() if str(v)})
    return f" ({'/'.join(names)})" if names else ""


def by_algorithm(st: Any, measure: str = "share", *, x: str | None = None, width: int = 540,
                 height: int = 300) -> Any:
    """Each congestion control's ``measure`` (share, rate, rtt, qdelay, retrans_pct) against the swept
    parameter: a line per algorithm, its interval as bars, n and the bounds on hover."""
    return _by(st, "cc", measure, x, width, height)


def by_group(st: Any, measure: str = "share", *, x: str | None = None, width: int = 540, height: int = 300) -> Any:
    """Each flow group's ``measure`` against the swept parameter (a line per DO_CLIENT group)."""
    return _by(st, "grp", measure, x, width, height)


def paper_figures(st: Any, *, x: str | None = None, width: int = 440, height: int = 300) -> Any:
    """The Netesto paper's cross-experiment figures from a sweep: each congestion control's goodput as
    bars with its mean smoothed RTT as points (right axis), one bar per algorithm and x value; and each
    algorithm's retransmitted % and the points' Jain fairness against the number of flows."""
    import holoviews as hv

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    xdim, coord, _label = choose_x(st, x)
    rest = [d for d in sweep_dims(st) if d != xdim]
    apart = [d for d in rest if st.sizes[d] > 1]
    combos = value_combos(st, apart)
    if len(combos) * st.sizes["cc"] * max(1, st.sizes.get(xdim, 1)) > MAX_BARS:
        combos = [{}]  # too many bars: the other parameters averaged, one bar per algorithm and x
    bars, dots = [], []
    for where in combos:
        sub = st.sel(where) if where else st
        left = [d for d in rest if d in sub.dims]
        reduced = sub.mean(dim=left) if left else sub
        # a bar per algorithm, x value and value of the other swept parameters: cubic alone and cubic beside
        # bbr are two bars, not their mean
        suffix = "".join(f" {w}" for w in where.values())
        for key in reduced["cc"].values:
            part = reduced.sel(cc=key)
            for xv in np.atleast_1d(part[xdim].values):
                cell = part.sel({xdim: xv}) if xdim else part
                rate, rtt = float(cell["cc_rate"]), float(cell["cc_rtt"])
                label = (f"{key} {xv}" if xdim else str(key)) + suffix
                if math.isfinite(rate):
                    bars.append((label, rate))
                if math.isfinite(rtt):
                    dots.append((label, rtt))
    units = str(st["cc_rate"].attrs.get("units", "Mbit/s"))
    b = hv.Bars(bars, hv.Dimension("algorithm", label=", ".join(["algorithm", xdim, *apart] if combos != [{}]
                                                                  else ["algorithm", xdim])),
                hv.Dimension("cc_rate", label=f"goodput ({units})")).opts(color=PALETTE[0], alpha=0.8)
    r = hv.Scatter(dots, "algorithm", hv.Dimension("cc_rtt", label="smoothed RTT (ms)")).opts(
        color="black", size=10, marker="diamond", tools=["hover"])
    # labels of several words side by side overlapped; holoviews drops xrotation on a multi_y overlay
    hooks = [_turn_x_labels] if len(bars) > 4 else []
    panels = [(b * r).opts(multi_y=True, title="goodput (bars) and RTT (points) per algorithm", width=width,
                           height=height, show_grid=True, hooks=hooks)]
    if "n_flows" in st:
        for var, title in (("cc_retrans_pct", "retransmitted (%) vs number of flows"),
                           ("jain", "Jain fairness vs number of flows")):
            if var in st:
                panels.append(_vs_flows(st, var, title, width, height))
    return hv.Layout(panels).cols(3).opts(shared_axes=False)


def _turn_x_labels(plot: Any, _element: Any) -> None:
    """A bokeh hook: the x axis's labels at 45 degrees."""
    for axis in plot.state.xaxis:
        axis.major_label_orientation = math.pi / 4


def _vs_flows(st: Any, var: str, title: str, width: int, height: int) -> Any:
    """``var`` against the points' number of flows: a line per algorithm (for a ``cc_`` measure) and per value
    of every other swept parameter, so that a line joins only points that differ in their flows (a line that
    went from cubic beside bbr at 2 flows to cubic alone at 3 told nothing); pooled over the others when that
    would make more than :data:`MAX_PANELS` lines."""
    import holoviews as hv

    apart = [d for d in sweep_dims(st) if d != "flows" and st.sizes[d] > 1]
    keys = list(st["cc"].values) if var.startswith("cc_") else [None]
    combos = value_combos(st, apart)
    if len(combos) * len(keys) > MAX_PANELS:
        combos = [{}]
    xdim = hv.Dimension("n_flows", label="flows")
    ydim = hv.Dimension(var, label=title.split(" vs ")[0])
    layers = []
    for i, (where, key) in enumerate(itertools.product(combos, keys)):
        sub = st.sel(where) if where else st
        vals = sub[var].sel(cc=key) if key is not None else sub[var]
        n = np.asarray(sub["n_flows"].values, dtype=float).ravel()
        v = np.asarray(vals.transpose(*sub["n_flows"].dims).values, dtype=float).ravel()
        pts: dict[float, list[float]] = {}
        for k, y in zip(n, v):
            if math.isfinite(k) and math.isfinite(y):
                pts.setdefault(k, []).append(y)
        if not pts:
            continue
        line = sorted((k, float(np.mean(ys))) for k, ys in pts.items())
        name = (str(key) if key is not None else "all flows") + (
            f" ({', '.join(f'{d}={w}' for d, w in where.items())})" if where else "")
        col = PALETTE[i % len(PALETTE)]
        layers += [hv.Curve(line, xdim, ydim, label=name).opts(color=col),
                   hv.Scatter(line, xdim, ydim, label=name).opts(color=col, size=7, tools=["hover"])]
    return hv.Overlay(layers).opts(title=title, width=width, height=height, show_grid=True, padding=(0.12, 0.1),
                                   **LEGEND)


def flow_distributions(table: Any, *, x: str | None = None, measures: Sequence[str] = ("rate", "qdelay"),
                       width: int = 440, height: int = 300) -> Any:
    """Every flow's steady-window numbers (:meth:`netesto.results.cube.Sweep.flow_table`) as box plots per
    x value and congestion control: the spread over flows and repetitions that a mean hides."""
    import holoviews as hv

    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    if table.empty:
        return hv.Layout([])
    skip = {"flow", "ca", "grp", "host", "rep", *MEASURE_COLUMNS}
    params = [c for c in table.columns if c not in skip]
    xcol = x if x is not None else next((p for p in X_PREFERENCE if p in params and table[p].nunique() > 1),
                                        params[0] if params else "ca")
    df = table.assign(**{xcol: table[xcol].astype(str)}) if xcol in table else table
    panels = []
    for m in measures:
        if m not in df:
            continue
        units = {"rate": "Mbit/s", "qdelay": "ms", "rtt": "ms", "retrans_pct": "%"}.get(m, "")
        vdim = hv.Dimension(m, label=f"{TITLES.get(m, m)} per flow" + (f" ({units})" if units else ""))
        kdims = [xcol, "ca"] if xcol != "ca" else ["ca"]
        panels.append(hv.BoxWhisker(df[[*kdims, m]].dropna(), kdims, vdim).opts(
            title=f"every flow's {TITLES.get(m, m)} (steady window)", width=width, height=height, show_grid=True,
            box_fill_color=hv.dim("ca").categorize({c: PALETTE[i % len(PALETTE)]
                                                     for i, c in enumerate(sorted(df["ca"].unique()))}),
            xrotation=45))
    return hv.Layout(panels).cols(2).opts(shared_axes=False)


MEASURE_COLUMNS = ("rate", "share", "retrans_pct", "rtt", "qdelay")

__all__ = ["by_algorithm", "by_group", "choose_x", "flow_distributions", "paper_figures", "require", "sweep_dims",
           "value_combos"]
