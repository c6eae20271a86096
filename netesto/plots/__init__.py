"""holoviews plot builders (bokeh backend) over netesto's Datasets; usable in plain Python.

Importing this package imports no holoviews: each builder does, when it is called.
"""

from __future__ import annotations

from typing import Any


def timeseries(ds: Any, *args: Any, **kw: Any) -> Any:
    """Per-flow goodput, cwnd, RTT ... panels (see :func:`netesto.plots.flows.timeseries`)."""
    from netesto.plots.flows import timeseries as build

    return build(ds, *args, **kw)


def latency_cdf(source: Any, **kw: Any) -> Any:
    """The latency CDF of an experiment's RR/CRR flows (see :func:`netesto.plots.latency.latency_cdf`)."""
    from netesto.plots.latency import latency_cdf as build

    return build(source, **kw)


def fct_slowdown(source: Any, **kw: Any) -> Any:
    """Flow completion time slowdown by size of drawn workloads (see :func:`netesto.plots.fct.fct_slowdown`)."""
    from netesto.plots.fct import fct_slowdown as build

    return build(source, **kw)


def trace_plot(ds: Any, *args: Any, **kw: Any) -> Any:
    """Every ACK's cwnd and srtt of the traced flow ends, zoomable to single ACKs
    (see :func:`netesto.plots.trace.trace_plot`)."""
    from netesto.plots.trace import trace_plot as build

    return build(ds, *args, **kw)


def table(table: Any, x: str, y1: Any, **kw: Any) -> Any:
    """Bars or lines of an analysis table's columns (see :func:`netesto.plots.tables.table_plot`)."""
    from netesto.plots.tables import table_plot

    return table_plot(table, x, y1, **kw)


def thin(obj: Any, **kw: Any) -> Any:
    """A copy of a plot as netesto draws it: long lines thinned to their extremes per bin, many flows one
    multi-line (see :func:`netesto.plots.screen.thin`); for ``hv.save`` or a holoviews display of many flows."""
    from netesto.plots.screen import thin as thinned

    return thinned(obj, **kw)


def save(obj: Any, path: Any, **kw: Any) -> Any:
    """A self-contained HTML file, bokeh's JavaScript inline (see :func:`netesto.plots.page.save`)."""
    from netesto.plots.page import save as write

    return write(obj, path, **kw)


__all__ = ["fct_slowdown", "latency_cdf", "save", "table", "thin", "timeseries", "trace_plot"]
