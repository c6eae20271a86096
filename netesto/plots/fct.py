"""Flow completion times of drawn workloads: the FCT-slowdown-by-size figure, in holoviews (bokeh).

The figure of datacenter transport papers: every completed transaction a dot at its
size and slowdown (its completion time over the ideal on an empty path, see
:mod:`netesto.results.fct`), and per size bucket the median (solid) and 99th
percentile (dashed) slowdown at the bucket's median size; both axes logarithmic.
Given several experiments (a label each: congestion controls, loads), one colour
each, so one figure compares them (what a sweep report can draw).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from netesto.plots.page import bokeh_backend
from netesto.results.fct import EDGES, fct_table

MAX_DOTS = 20000  # completed transactions drawn as dots at most (a sample when there are more), per label


def fct_points(ds: Any, *, label: str = "") -> pd.DataFrame:
    """The completed transactions of ``ds`` with a slowdown: size (bytes), slowdown, fct (ms), flow, label."""
    if "txn" not in ds.dims:
        raise ValueError("the experiment has no transactions of a drawn workload (docs/workloads.md)")
    slow = ds["txn_slowdown"].values
    keep = (ds["txn_status"].values == "ok") & np.isfinite(slow)
    return pd.DataFrame({"size": ds["txn_size"].values[keep], "slowdown": slow[keep],
                         "fct_ms": ds["txn_fct"].values[keep] * 1e3, "flow": ds["txn_flow"].values[keep].astype(str),
                         "label": label})


def fct_slowdown(source: Any, *, edges: Sequence[float] = EDGES, width: int = 900, height: int = 380) -> Any:
    """The FCT-slowdown-by-size figure of an experiment's Dataset, or of several (``{label: Dataset}``).
    Raises ValueError when none has a completed transaction with a slowdown."""
    import holoviews as hv
    import xarray as xr

    bokeh_backend()
    # (a Dataset is a Mapping too: of its variables)
    sources: Mapping[Any, Any] = {"": source} if isinstance(source, xr.Dataset) else source
    colours = hv.Cycle.default_cycles["default_colors"]
    elements: list[Any] = []
    tips = [("flow", "@flow"), ("size", "@size{0,0} bytes"), ("slowdown", "@slowdown{0.00}"),
            ("fct", "@fct_ms{0.000} ms")]
    for i, (name, ds) in enumerate(sources.items()):
        label = str(name)
        points = fct_points(ds, label=label)
        if points.empty:
            continue
        colour = colours[i % len(colours)]
        dots = points if len(points) <= MAX_DOTS else points.sample(MAX_DOTS, random_state=0)
        elements.append(hv.Scatter(dots, "size", ["slowdown", "fct_ms", "flow", "label"],
                                   label=f"{label} transactions".strip()).opts(
            color=colour, alpha=0.25, size=3, tools=["hover"], hover_tooltips=tips))
        table = fct_table(ds, edges=edges).dropna(subset=["slowdown_p50"])
        for q, dash in (("p50", "solid"), ("p99", "dashed")):
            line = table[["size_median", f"slowdown_{q}", "bucket", "completed"]].rename(
                columns={"size_median": "size", f"slowdown_{q}": "slowdown"})
            elements.append(hv.Curve(line, "size", ["slowdown", "bucket", "completed"],
                                     label=f"{label} {q}".strip()).opts(
                color=colour, line_dash=dash, line_width=2, tools=["hover"],
                hover_tooltips=[("bucket", "@bucket"), (q, "@slowdown{0.00}"), ("completed", "@completed")]))
            elements.append(hv.Scatter(line, "size", ["slowdown"]).opts(color=colour, size=6))
    if not elements:
        raise ValueError("no completed transaction with a slowdown (a rate and a base RTT are needed)")
    return hv.Overlay(elements).opts(
        title="Flow completion time slowdown by size (p50 solid, p99 dashed; a dot per transaction)",
        width=width, height=height, logx=True, logy=True, xlabel="transaction size (bytes, request + reply)",
        ylabel="slowdown (FCT / ideal)", legend_position="right", legend_opts={"click_policy": "hide"})


__all__ = ["MAX_DOTS", "fct_points", "fct_slowdown"]
