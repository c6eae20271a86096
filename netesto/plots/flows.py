"""Per-flow time series of an experiment Dataset as holoviews (bokeh) panels with linked time axes."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from netesto.results.timeplot import SMOOTH_SECONDS, downsample, pick_unit, rolling_mean, sample_interval

# variable -> (panel title, unit choices as (factor, label) from small to large)
PANELS: dict[str, tuple[str, tuple[tuple[float, str], ...]]] = {
    "goodput": (f"Goodput ({SMOOTH_SECONDS * 1000:g} ms mean)", ((1.0, "bit/s"), (1e3, "kbit/s"), (1e6, "Mbit/s"),
                                                               (1e9, "Gbit/s"))),
    "cwnd": ("Congestion window", ((1.0, "packets"),)),
    "rtt": ("Smoothed RTT", ((1.0, "us"), (1e3, "ms"))),
    "min_rtt": ("Min RTT", ((1.0, "us"), (1e3, "ms"))),
    "ping_rtt": ("Ping RTT", ((1.0, "us"), (1e3, "ms"))),
    "pacing_rate": ("Pacing rate", ((1.0, "bit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"))),
    "delivery_rate": ("Delivery rate", ((1.0, "bit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s"))),
    "lat_p99": ("p99 transaction latency (RR)", ((1.0, "us"), (1e3, "ms"))),
}
DEFAULT = ("goodput", "cwnd", "rtt")
MAX_POINTS = 2000  # per line on screen: display only, the dataset keeps every sample
PAGE_POINTS = 120_000  # per panel: many flows get fewer points each, so a page stays small and quick


def timeseries(ds: Any, variables: Sequence[str] = DEFAULT, *, width: int = 900, height: int = 260,
               max_points: int = MAX_POINTS) -> Any:
    """One panel per variable (goodput, cwnd, rtt by default), one line per flow, time axes linked.

    Hovering a line shows the flow (client-server-group-instance and ca) and the value with its
    unit; clicking a legend
    entry hides that flow. The goodput panel shows the 200 ms mean of each flow, their sum
    (dashed) and red marks where a flow's retransmit counter rose. Long series are thinned for
    display (mean of equal bins, at most ``max_points`` a line); the dataset is not changed.
    """
    import holoviews as hv

    _bokeh()
    time = np.asarray(ds["time"].values, dtype=float)
    interval = sample_interval(ds)
    flows = [str(f) for f in ds["flow"].values]
    cas = [str(v) for v in ds["ca"].values] if "ca" in ds.coords else [""] * len(flows)
    # the flow id names client, server, group and instance: with the ca, the hover says it all
    labels = [f"{f} {ca}".strip() for f, ca in zip(flows, cas)]
    max_points = max(50, min(max_points, PAGE_POINTS // max(1, len(flows))))
    panels = []
    for var in variables:
        if var not in ds or var not in PANELS:
            continue
        data = np.asarray(ds[var].transpose("flow", "time").values, dtype=float)
        if not np.isfinite(data).any():
            continue
        if var == "goodput":
            data = rolling_mean(data, max(1, round(SMOOTH_SECONDS / interval)))
        title, units = PANELS[var]
        factor, unit = pick_unit(float(np.nanmax(np.abs(data))), units)
        tooltips = [("flow", "$name"), ("time", "@time{0.00} s"), (var, f"@{{{var}}}{{0.00}} {unit}")]
        curves = []
        for i, label in enumerate(labels):
            if not np.isfinite(data[i]).any():
                continue  # a stream flow in a latency panel
            t, v = downsample(time, data[i] / factor, max_points)
            curves.append(hv.Curve((t, v), "time", var, label=label).opts(tools=["hover"], hover_tooltips=tooltips))
        if var == "goodput":
            curves += _goodput_extras(ds, time, data / factor, labels, max_points)
        panel = hv.Overlay(curves).opts(title=title, width=width, height=height, xlabel="time (s)",
                                        ylabel=f"{var} ({unit})", legend_position="right",
                                        legend_opts={"click_policy": "hide"})
        panels.append(panel)
    if not panels:
        raise ValueError("the dataset has none of the variables " + ", ".join(variables))
    return hv.Layout(panels).cols(1).opts(shared_axes=True)


def _goodput_extras(ds: Any, time: np.ndarray, goodput: np.ndarray, flows: list[str], max_points: int) -> list[Any]:
    """The sum of the flows' goodputs, and a red mark where a flow's retransmit counter rose."""
    import holoviews as hv

    out = []
    if len(flows) > 1:
        t, total = downsample(time, np.nansum(goodput, axis=0), max_points)
        out.append(hv.Curve((t, total), "time", "goodput", label="sum").opts(color="black", line_dash="dashed"))
    if "retransmits" in ds:
        counter = np.asarray(ds["retransmits"].transpose("flow", "time").values, dtype=float)
        rises = np.diff(np.nan_to_num(counter, nan=-1.0), axis=1) > 0
        fi, ti = np.nonzero(rises & np.isfinite(counter[:, 1:]) & np.isfinite(counter[:, :-1]))
        if len(ti):
            points = {"time": time[ti + 1], "goodput": goodput[fi, ti + 1], "flow": [flows[i] for i in fi]}
            out.append(hv.Scatter(points, "time", ["goodput", "flow"], label="retransmits").opts(
                color="red", marker="x", size=8, tools=["hover"]))
    return out


def _bokeh() -> None:
    """holoviews' bokeh backend, loaded once, with no notebook output: ``hv.extension`` in a
    kernel would publish panel's loader, which fetches from CDNs (see :mod:`netesto.plots.notebook`)."""
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401 - registers the bokeh renderer and its options

    hv.Store.set_current_backend("bokeh")


def standalone(model: Any, title: str = "netesto") -> str:
    """A bokeh model's page with bokeh's JavaScript inline (nothing from the network)."""
    import re

    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    # bokeh's own page, not holoviews.save's panel template: that one loads icons and MathJax from CDNs.
    page = file_html(model, INLINE, title)
    # panel (imported by holoviews) adds a script by a path relative to a server's static files, which no
    # saved page can load; these plots use bokeh's own models only, whose code is inline above.
    return re.sub(r'<script src="static/[^"]*"></script>\n?', "", page)


def save(obj: Any, path: Any, *, title: str = "netesto") -> Any:
    """Write ``obj`` (any holoviews object of :mod:`netesto.plots`) as one HTML file with bokeh's
    JavaScript inline: it opens offline, as lab machines often are. Returns the path."""
    from pathlib import Path

    import holoviews as hv

    _bokeh()
    out = Path(path)
    out.write_text(standalone(hv.render(obj, backend="bokeh"), title), encoding="utf-8")
    return out


__all__ = ["DEFAULT", "PANELS", "save", "standalone", "timeseries"]
