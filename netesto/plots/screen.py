"""Holoviews objects as netesto draws them on a screen: long lines thinned, many flows' curves one bokeh multi-line.

holoviews draws an ``NdOverlay`` of more curves than its ``legend_limit`` as one
batched multi-line, but still computes ranges and styles curve by curve: 64
thinned flows x 3 panels took 1.7-2.4 s to render against 0.4 s for this. :func:`multi_line` is a
carrier curve spanning the flows (holoviews takes the axis ranges, the linked
axes and a legend entry from it) whose render hook puts every flow's thinned
line into one ``MultiLine`` with the flow's name and colour, for the hover. It
is applied as a plot is drawn (:func:`thin`: pages, netesto's notebook
display); the objects users hold keep one real curve per flow, every sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netesto.plots.display import BINS, PAGE_BINS, columns, envelope, first_per_bin


def colour(i: int, curve: Any = None) -> str:
    """The colour of the i-th curve of an overlay: the one its options set (``.opts(color=...)``,
    ``hv.opts.Curve(color=...)``), else the i-th of holoviews' cycle (what holoviews gives it)."""
    import holoviews as hv

    chosen = hv.Store.lookup_options("bokeh", curve, "style").kwargs.get("color") if curve is not None else None
    cycle = chosen.values if isinstance(chosen, hv.Cycle) else hv.Cycle.default_cycles["default_colors"]
    return str(chosen) if isinstance(chosen, str) else str(cycle[i % len(cycle)])


def multi_line(nd: Any, bins: int) -> Any:
    """The curves of ``nd`` (an ``NdOverlay`` of ``hv.Curve``) as one carrier curve drawn as a
    multi-line, each line thinned to its :func:`~netesto.plots.display.envelope` in ``bins`` bins."""
    import holoviews as hv

    names = [" ".join(str(k) for k in key) if isinstance(key, tuple) else str(key) for key in nd.keys()]
    first = next(iter(nd))
    tdim, vdim = first.kdims[0], first.vdims[0]
    xs, ys = [], []
    for curve in nd:
        ts, vs = envelope(*columns(curve), bins)
        xs.append(ts[0])
        ys.append(vs[0])
    finite = np.concatenate([y[np.isfinite(y)] for y in ys] + [np.zeros(0, np.float32)])
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    span = [(min(float(np.nanmin(x)) for x in xs), low), (max(float(np.nanmax(x)) for x in xs), high)]
    colours = [colour(i, curve) for i, curve in enumerate(nd)]
    unit = f" {vdim.unit}" if vdim.unit else ""

    def draw(plot: Any, element: Any) -> None:
        from bokeh.models import HoverTool, MultiLine

        carrier = plot.handles["glyph_renderer"]
        carrier.selection_glyph = carrier.nonselection_glyph = carrier.muted_glyph = "auto"
        carrier.hover_glyph = None
        # one array per flow, as bokeh's multi_line takes them (float32: half the page of float64)
        carrier.data_source.data = {"xs": xs, "ys": ys, "flow": names, "colour": colours}
        carrier.glyph = MultiLine(xs="xs", ys="ys", line_color="colour", line_width=1.2)
        carrier.name = "flows"
        plot.state.add_tools(HoverTool(renderers=[carrier], tooltips=[
            ("flow", "@flow"), ("time", "$x{0.00} s"), (vdim.label, f"$y{{0.00}}{unit}")]))

    return hv.Curve(span, tdim, vdim, label=f"{len(names)} flows (hover names each)").opts(hooks=[draw])


def thin(obj: Any, bins: int = BINS, page_bins: int = PAGE_BINS) -> Any:
    """A copy of the holoviews object ``obj`` as netesto draws it: its long curves keep their
    :func:`envelope` (at most ``bins`` bins a line, fewer for the curves of an ``NdOverlay`` of many:
    ``page_bins`` a panel shared among them), and an ``NdOverlay`` of more curves than its
    ``legend_limit`` becomes one multi-line (:func:`multi_line`), and long scatters
    keep the first point of each flow in each bin (:func:`first_per_bin`), so a page of 64 flows stays
    small and quick. Options, labels and dimensions are kept; objects with a
    ``DynamicMap`` (which redraw per view) come back as they are. holoviews' own ``hv.save`` and
    notebook display draw every sample: ``hv.save(thin(g), ...)`` draws what netesto's pages do."""
    import holoviews as hv

    if not isinstance(obj, hv.core.dimension.Dimensioned) or obj.traverse(lambda x: x, [hv.DynamicMap]):
        return obj

    def curve(c: Any, b: int) -> Any:
        if len(c) <= 2 * b or len(c.vdims) != 1:
            return c
        ts, vs = envelope(*columns(c), b)
        return c.clone((ts[0], vs[0]))

    def overlay(nd: Any) -> Any:
        b = max(25, min(bins, page_bins // max(1, len(nd))))
        limit = hv.Store.lookup_options("bokeh", nd, "plot").kwargs.get("legend_limit", 25)
        if len(nd) > limit and all(isinstance(v, hv.Curve) and len(v.vdims) == 1 for v in nd):
            return multi_line(nd, b)
        return nd.clone([(k, curve(v, b) if isinstance(v, hv.Curve) else v) for k, v in nd.items()])

    def marks(s: Any) -> Any:  # e.g. retransmissions: the first of each flow in each display bin
        x = s.dimension_values(0)
        if len(s) <= 2 * 25 or x.dtype.kind not in "fiu":  # few, or on categories (a sweep's bars)
            return s
        groups = s.dimension_values("flow") if "flow" in s.dimensions("value", label=True) else np.zeros(len(s))
        b = max(25, min(bins, page_bins // max(1, len(set(groups)))))
        keep = first_per_bin(x, groups, b)
        return s if len(keep) == len(s) else s.iloc[keep]

    def walk(o: Any) -> Any:
        # not holoviews' ``map``: it visits every curve of an NdOverlay before the NdOverlay (2.5 ms each)
        if isinstance(o, hv.NdOverlay):
            return overlay(o)
        if isinstance(o, (hv.Layout, hv.Overlay)):
            return o.clone([(k, walk(v)) for k, v in o.items()])
        if isinstance(o, hv.Scatter):
            return marks(o)
        if isinstance(o, hv.Curve) and not o.opts.get().kwargs.get("hooks"):
            return curve(o, bins)
        return o  # other containers (a HoloMap, a GridSpace ...): drawn as they are

    return walk(obj)


__all__ = ["colour", "multi_line", "thin"]
