"""Per-flow time series of an experiment Dataset as holoviews panels: every flow's samples are in the objects.

Each panel is an ``hv.Overlay`` whose first layer is an ``hv.NdOverlay`` of
``hv.Curve`` keyed by ``flow`` (the flow id and its congestion control), one
curve per flow holding each of its samples (from its first to its last
finite one), in the unit the panel names. So holoviews' own API works on it:
``.select(time=(1, 3))``, ``.opts(hv.opts.Curve(...))``, ``*`` and ``+``,
``.data``, ``hv.save`` with either backend. Above ``per_flow_max`` flows
holoviews draws a panel's flows as one batched multi-line (its
``legend_limit``); pages and netesto's notebook display thin long lines for
the screen (:func:`netesto.plots.screen.thin`), the objects keep every sample.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from netesto.plots.changes import change_marks, trace_lines
from netesto.plots.page import bokeh_backend
from netesto.results.series import pick_unit
from netesto.results.smoothing import SMOOTH_SECONDS, goodput_smooth

# variable -> (panel title, unit choices as (factor, label) from small to large)
PANELS: dict[str, tuple[str, tuple[tuple[float, str], ...]]] = {
    "goodput": (f"Goodput ({SMOOTH_SECONDS * 1000:g} ms mean)", ((1.0, "bit/s"), (1e3, "kbit/s"), (1e6, "Mbit/s"),
                                                               (1e9, "Gbit/s"))),
    "goodput_raw": ("Goodput (each sample)", ((1.0, "bit/s"), (1e3, "kbit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"))),
    "cwnd": ("Congestion window", ((1.0, "packets"),)),
    "rtt": ("Smoothed RTT", ((1.0, "us"), (1e3, "ms"))),
    "min_rtt": ("Min RTT", ((1.0, "us"), (1e3, "ms"))),
    "ping_rtt": ("Ping RTT", ((1.0, "us"), (1e3, "ms"))),
    "pacing_rate": ("Pacing rate", ((1.0, "bit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"))),
    "delivery_rate": ("Delivery rate", ((1.0, "bit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"))),
    "lat_p50": ("Median transaction latency (RR)", ((1.0, "us"), (1e3, "ms"))),
    "lat_p90": ("p90 transaction latency (RR)", ((1.0, "us"), (1e3, "ms"))),
    "lat_p99": ("p99 transaction latency (RR)", ((1.0, "us"), (1e3, "ms"))),
    "lat_p999": ("p99.9 transaction latency (RR)", ((1.0, "us"), (1e3, "ms"))),
    "transactions": ("Transactions per second (RR)", ((1.0, "1/s"), (1e3, "k/s"))),
}
SOURCES = {"goodput_raw": "goodput"}  # panels that show a variable another way
DEFAULT = ("goodput", "cwnd", "rtt")
# Up to this many flows each is its own line and legend entry (a click hides it); above, holoviews
# draws them as one batched multi-line whose hover names each flow (its legend_limit).
PER_FLOW_MAX = 8


def flow_labels(ds: Any) -> list[str]:
    """Each flow's key in the panels: its id (client-server-group-instance) and its ca."""
    flows = [str(f) for f in ds["flow"].values]
    cas = [str(v) for v in ds["ca"].values] if "ca" in ds.coords else [""] * len(flows)
    return [f"{f} {ca}".strip() for f, ca in zip(flows, cas)]


def _life(row: np.ndarray) -> slice | None:
    """The samples from a flow's first finite value to its last (gaps inside stay NaN: bokeh breaks
    the line there); None for a flow with none (a stream flow in a latency panel)."""
    ok = np.flatnonzero(np.isfinite(row))
    return slice(int(ok[0]), int(ok[-1]) + 1) if ok.size else None


def _hover_by_name(plot: Any, element: Any) -> None:
    """The hover names the flow by its line's name (holoviews names it by its key), not by a ``flow``
    column holoviews repeats at every point for it: 0.3 of a 3-flow, 30 s page's 2.0 MB."""
    source, hover = plot.handles.get("source"), plot.handles.get("hover")
    if source is None or hover is None or "flow" not in source.data or not isinstance(hover.tooltips, list):
        return
    del source.data["flow"]
    hover.tooltips = [("flow", "$name") if tip[0] == "flow" else tip for tip in hover.tooltips]


def flow_curves(time: np.ndarray, data: np.ndarray, labels: Sequence[str], tdim: Any, vdim: Any) -> Any:
    """``hv.NdOverlay`` of one ``hv.Curve`` a flow (rows of ``data``) keyed by ``flow``, each holding
    the flow's samples over its life; flows with no finite sample are left out."""
    import holoviews as hv

    curves: dict[str, Any] = {}
    for label, row in zip(labels, data):
        life = _life(row)
        if life is not None:
            # holoviews' array interface, named so that it tries no other: 1.5-1.9 ms a curve against
            # 2.8-6 ms for a DataFrame (64 flows x 3 panels); ``.dframe()`` gives the DataFrame
            samples = np.column_stack([time[life], row[life]])
            # the curves share the first one's options (holoviews keys them by id): one .opts, not one a curve
            shared = {"id": next(iter(curves.values())).id} if curves else {}
            curves[label] = hv.Curve(samples, tdim, vdim, datatype=["array"], **shared)
            if not shared:
                curves[label].opts(tools=["hover"], line_width=2, hooks=[_hover_by_name])
    return hv.NdOverlay(curves, kdims=[hv.Dimension("flow")], sort=False)  # in the dataset's flow order


def timeseries(ds: Any, variables: Sequence[str] | str = DEFAULT, *, width: int = 900, height: int = 260,
               per_flow_max: int = PER_FLOW_MAX) -> Any:
    """One panel per variable (goodput, cwnd, rtt by default), a curve per flow, time axes linked:
    an ``hv.Layout``, or the panel itself (an ``hv.Overlay``) for one variable, so that
    ``exp.plot("goodput") * exp.plot("cwnd")`` overlays.

    Hovering a line shows the flow (client-server-group-instance and ca) and the value with its
    unit. The goodput panel shows the dataset's 200 ms mean of each flow (``goodput_smooth``),
    their sum (dashed, ``goodput_sum_smooth``), red marks where a flow's retransmit counter rose
    and a trace link's offered rate; every panel marks the link changes of a SET_LINK schedule.
    """
    import holoviews as hv

    bokeh_backend()
    single = isinstance(variables, str) or len(variables) == 1
    names = [variables] if isinstance(variables, str) else list(variables)
    panels = [p for p in (_panel(ds, var, width, height, per_flow_max) for var in names) if p is not None]
    if not panels:
        raise ValueError("the dataset has none of the variables " + ", ".join(names))
    if single:
        return panels[0]
    return hv.Layout(panels).cols(1).opts(shared_axes=True)


def _panel(ds: Any, var: str, width: int, height: int, per_flow_max: int) -> Any:
    """The panel of ``var`` (see :func:`timeseries`), None when the dataset has no value of it."""
    import holoviews as hv

    source = SOURCES.get(var, var)
    if source not in ds or var not in PANELS:
        return None
    time = np.asarray(ds["time"].values, dtype=float)
    data = np.asarray(ds[source].transpose("flow", "time").values, dtype=float)
    if not np.isfinite(data).any():
        return None
    total = None
    if var == "goodput":  # the dataset's smoothing, inside each flow's life (results.smoothing)
        smooth, summed = goodput_smooth(ds)
        data = np.asarray(smooth.transpose("flow", "time").values, dtype=float)
        total = np.asarray(summed.values, dtype=float)
    title, units = PANELS[var]
    factor, unit = pick_unit(float(np.nanmax(np.abs(data))), units)
    tdim = hv.Dimension("time", unit="s")
    vdim = hv.Dimension(var, label=source, unit=unit)
    labels = flow_labels(ds)
    flows = flow_curves(time, data / factor, labels, tdim, vdim)
    layers: list[Any] = [flows.opts(legend_limit=per_flow_max)]
    if var == "goodput":
        layers += _goodput_extras(ds, time, data / factor, total, factor, labels, tdim, vdim)
        layers += trace_lines(ds, factor, tdim, vdim)
    right = float(time[-1]) if time.size else np.inf
    layers += change_marks(ds, float(np.nanmax(data)) / factor, right)  # SET_LINK
    # keywords set the overlay's own options (an hv.opts.Overlay spec walks every curve: 0.1 s a panel of 64)
    return hv.Overlay(layers).opts(title=title, width=width, height=height, legend_position="right",
                                   legend_opts={"click_policy": "hide"})


def _goodput_extras(ds: Any, time: np.ndarray, goodput: np.ndarray, total: np.ndarray | None, factor: float,
                    labels: list[str], tdim: Any, vdim: Any) -> list[Any]:
    """The sum of the flows' goodputs (the dataset's ``goodput_sum_smooth``), and a red mark where a
    flow's retransmit counter rose."""
    import holoviews as hv

    out = []
    if len(labels) > 1 and total is not None:
        out.append(hv.Curve((time, total / factor), tdim, vdim, label="sum").opts(color="black",
                                                                                 line_dash="dashed"))
    if "retransmits" in ds:
        counter = np.asarray(ds["retransmits"].transpose("flow", "time").values, dtype=float)
        rises = np.diff(np.nan_to_num(counter, nan=-1.0), axis=1) > 0
        fi, ti = np.nonzero(rises & np.isfinite(counter[:, 1:]) & np.isfinite(counter[:, :-1]))
        if len(ti):
            points = {"time": time[ti + 1], vdim.name: goodput[fi, ti + 1], "flow": [labels[i] for i in fi]}
            out.append(hv.Scatter(points, tdim, [vdim, "flow"], label="retransmits").opts(
                color="red", marker="x", size=8, tools=["hover"]))
    return out


__all__ = ["DEFAULT", "PANELS", "PER_FLOW_MAX", "flow_curves", "flow_labels", "timeseries"]
