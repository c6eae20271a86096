"""Per-flow time series of an experiment Dataset as holoviews (bokeh) panels with linked time axes."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from netesto.plots.changes import change_marks, trace_lines
from netesto.plots.display import envelope, first_per_bin
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
BINS = 1000  # display bins per line (each keeps its min and max): about one per pixel column
PAGE_BINS = 20_000  # per panel: many flows get fewer bins each, so a page stays small and quick
# Up to this many flows each is its own bokeh line (own legend entry that hides it); above, one
# multi-line draws them all (its legend entry hides them all) and the hover names each flow.
PER_FLOW_MAX = 8


def timeseries(ds: Any, variables: Sequence[str] = DEFAULT, *, width: int = 900, height: int = 260,
               bins: int = BINS, per_flow_max: int = PER_FLOW_MAX) -> Any:
    """One panel per variable (goodput, cwnd, rtt by default), a line per flow, time axes linked.

    Hovering a line shows the flow (client-server-group-instance and ca) and the value with its
    unit. Up to ``per_flow_max`` flows each line is its own legend entry (a click hides it);
    above, one multi-line draws them all. The goodput panel shows the 200 ms mean of each flow,
    their sum (dashed) and red marks where a flow's retransmit counter rose. Long series are
    thinned for display (per bin the lowest and highest sample, at most ``bins`` bins a line and
    fewer when there are many flows); the dataset is not changed.
    """
    import holoviews as hv

    bokeh_backend()
    time = np.asarray(ds["time"].values, dtype=float)
    flows = [str(f) for f in ds["flow"].values]
    cas = [str(v) for v in ds["ca"].values] if "ca" in ds.coords else [""] * len(flows)
    # the flow id names client, server, group and instance: with the ca, the hover says it all
    labels = [f"{f} {ca}".strip() for f, ca in zip(flows, cas)]
    bins = max(25, min(bins, PAGE_BINS // max(1, len(flows))))
    panels = []
    for var in variables:
        source = SOURCES.get(var, var)
        if source not in ds or var not in PANELS:
            continue
        data = np.asarray(ds[source].transpose("flow", "time").values, dtype=float)
        if not np.isfinite(data).any():
            continue
        if var == "goodput":  # the dataset's smoothing, inside each flow's life (results.smoothing)
            smooth, total = goodput_smooth(ds)
            data = np.asarray(smooth.transpose("flow", "time").values, dtype=float)
        title, units = PANELS[var]
        factor, unit = pick_unit(float(np.nanmax(np.abs(data))), units)
        shown = [i for i in range(len(flows)) if np.isfinite(data[i]).any()]  # not streams in a latency panel
        ts, vs = envelope(time, data[shown] / factor, bins)
        names = [labels[i] for i in shown]
        elements = [_flow_lines(ts, vs, names, var, unit, per_flow=len(shown) <= per_flow_max)]
        if var == "goodput":
            elements += _goodput_extras(ds, time, data / factor, np.asarray(total.values) / factor, labels, bins)
            elements += trace_lines(ds, factor)
        elements += change_marks(ds, float(np.nanmax(vs)), float(time[-1]) if time.size else np.inf)  # SET_LINK
        panel = hv.Overlay(elements).opts(title=title, width=width, height=height, xlabel="time (s)",
                                          ylabel=f"{source} ({unit})", legend_position="right",
                                          legend_opts={"click_policy": "hide"})
        panels.append(panel)
    if not panels:
        raise ValueError("the dataset has none of the variables " + ", ".join(variables))
    return hv.Layout(panels).cols(1).opts(shared_axes=True)


def _colour(i: int) -> str:
    """The i-th colour of holoviews' default cycle (the colours per-flow curves get)."""
    import holoviews as hv

    cycle = hv.Cycle.default_cycles["default_colors"]
    return str(cycle[i % len(cycle)])


def _flow_lines(ts: np.ndarray, vs: np.ndarray, names: list[str], var: str, unit: str, *, per_flow: bool) -> Any:
    """The flows of a panel, drawn by bokeh: a line each (``per_flow``) or one multi-line.

    holoviews renders each curve of an overlay in ~0.08 s (8 flows x 3 panels: 4 s; 64 flows:
    15 s) and its multi-line element, ``hv.Path``, splits every line into 2-point segments
    for hover. So the holoviews element is a 2-point curve spanning the data (holoviews takes the
    axis ranges, linked axes and the legend from it) and a render hook draws the flows on its
    figure: the carrier's renderer becomes the first flow's line (or the multi-line), the other
    flows get a renderer and legend entry each. Renderers are named after their flow.
    """
    import holoviews as hv

    finite = vs[np.isfinite(vs)]
    span = [(float(np.nanmin(ts)), float(finite.min())), (float(np.nanmax(ts)), float(finite.max()))]
    colours = [_colour(i) for i in range(len(names))]

    def draw(plot: Any, element: Any) -> None:
        from bokeh.core.properties import value
        from bokeh.models import ColumnDataSource, HoverTool, Line, MultiLine
        from bokeh.models.annotations import LegendItem

        carrier = plot.handles["glyph_renderer"]
        carrier.selection_glyph = carrier.nonselection_glyph = carrier.muted_glyph = "auto"
        carrier.hover_glyph = None
        if not per_flow:
            # one array per flow, as bokeh's multi_line takes them (float32: half the page of float64)
            carrier.data_source.data = {"xs": list(ts), "ys": list(vs), "flow": names, "colour": colours}
            carrier.glyph = MultiLine(xs="xs", ys="ys", line_color="colour", line_width=1.2)
            carrier.name = "flows"
            plot.state.add_tools(HoverTool(renderers=[carrier], tooltips=[
                ("flow", "@flow"), ("time", "$x{0.00} s"), (var, f"$y{{0.00}} {unit}")]))
            return
        carrier.data_source.data = {"time": ts[0], var: vs[0]}
        carrier.glyph = Line(x="time", y=var, line_color=colours[0], line_width=2)
        carrier.name = names[0]
        renderers = [carrier]
        for k in range(1, len(names)):
            source = ColumnDataSource({"time": ts[k], var: vs[k]})
            renderers.append(plot.state.line(x="time", y=var, source=source, line_color=colours[k], line_width=2,
                                             name=names[k]))
        legend = plot.state.legend[0] if plot.state.legend else None
        if legend is not None:
            at = next(i for i, item in enumerate(legend.items) if carrier in item.renderers)
            legend.items[at].label = value(names[0])
            legend.items[at + 1:at + 1] = [LegendItem(label=value(n), renderers=[r])
                                           for n, r in zip(names[1:], renderers[1:])]
        plot.state.add_tools(HoverTool(renderers=renderers, tooltips=[
            ("flow", "$name"), ("time", "@time{0.00} s"), (var, f"@{{{var}}}{{0.00}} {unit}")]))

    label = names[0] if per_flow else f"{len(names)} flows (hover names each)"
    return hv.Curve(span, "time", var, label=label).opts(hooks=[draw])


def _goodput_extras(ds: Any, time: np.ndarray, goodput: np.ndarray, summed: np.ndarray, flows: list[str],
                    bins: int) -> list[Any]:
    """The sum of the flows' goodputs (the dataset's), and a red mark where a flow's retransmit counter
    rose (on long series, the first rise of each flow in each display bin)."""
    import holoviews as hv

    out = []
    if len(flows) > 1:
        t, total = envelope(time, summed, bins)
        out.append(hv.Curve((t[0], total[0]), "time", "goodput", label="sum").opts(color="black", line_dash="dashed"))
    if "retransmits" in ds:
        counter = np.asarray(ds["retransmits"].transpose("flow", "time").values, dtype=float)
        rises = np.diff(np.nan_to_num(counter, nan=-1.0), axis=1) > 0
        fi, ti = first_per_bin(rises & np.isfinite(counter[:, 1:]) & np.isfinite(counter[:, :-1]), bins)
        if len(ti):
            points = {"time": time[ti + 1].astype(np.float32), "goodput": goodput[fi, ti + 1].astype(np.float32),
                      "flow": [flows[i] for i in fi]}
            out.append(hv.Scatter(points, "time", ["goodput", "flow"], label="retransmits").opts(
                color="red", marker="x", size=8, tools=["hover"]))
    return out


__all__ = ["BINS", "DEFAULT", "PANELS", "PER_FLOW_MAX", "timeseries"]
