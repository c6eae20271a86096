"""holoviews plot builders (bokeh backend) over netesto's Datasets; usable in plain Python.

Importing this package imports no holoviews: each builder does, when it is called.
"""

from __future__ import annotations

from typing import Any


def timeseries(ds: Any, *args: Any, **kw: Any) -> Any:
    """Per-flow goodput, cwnd, RTT ... panels (see :func:`netesto.plots.flows.timeseries`)."""
    from netesto.plots.flows import timeseries as build

    return build(ds, *args, **kw)


def save(obj: Any, path: Any, **kw: Any) -> Any:
    """A self-contained HTML file, bokeh's JavaScript inline (see :func:`netesto.plots.page.save`)."""
    from netesto.plots.page import save as write

    return write(obj, path, **kw)


__all__ = ["save", "timeseries"]
