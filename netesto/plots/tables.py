"""Bar and line plots of analysis tables (``Table.plot``, ``doPlot`` of ``netesto table``) in holoviews/bokeh.

The original's doPlot layout: ``y1`` columns as grouped bars (or lines) per ``x`` category and
``series`` value, ``y2`` columns as diamonds on a right axis, each over its own bar.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import pandas as pd

from netesto.errors import ResultsError
from netesto.plots.page import bokeh_backend

if TYPE_CHECKING:
    from netesto.results.analysis import Table


def table_plot(table: "Table", x: str, y1: str | Sequence[str], *, y2: str | Sequence[str] | None = None,
               series: str | None = None, kind: str = "bar", title: str = "", width: int = 900,
               height: int = 450, x_title: str = "", y1_title: str = "", y2_title: str = "",
               series_title: str = "", series_labels: dict[str, str] | None = None) -> Any:
    """A holoviews overlay: bars (``kind="bar"``, x as categories in table order, grouped by
    series) or lines (``kind="line"``, numeric x) of the ``y1`` columns, and the ``y2`` columns
    as diamonds on a right axis. Values that are not finite (a fairness over a starved flow is
    inf) are left out, so the axes scale to those drawn. Hover shows every value."""
    import holoviews as hv

    bokeh_backend()
    ys, y2s = _names(y1), _names(y2)
    if kind not in ("bar", "line"):
        raise ResultsError(f"plot: kind must be 'bar' or 'line', not {kind!r}")
    missing = [c for c in [x, *ys, *y2s, *([series] if series else [])] if c not in table.df.columns]
    if missing:
        raise ResultsError(f"plot: unknown column {missing[0]!r}; columns: {', '.join(table.df.columns)}")
    labels = series_labels or {}
    df = table.df
    keys = df[series].astype(str) if series else pd.Series([""] * len(df), index=df.index)
    xs = df[x].map(lambda v: table.cell_text(x, v)) if kind == "bar" else pd.to_numeric(df[x], errors="coerce")

    def group(name: str, y: str) -> str:
        shown = labels.get(name, name)
        return (f"{shown} {y}" if len(ys) > 1 else shown).strip() or y

    rows = [(xv, group(k, y), float(v)) for y in ys
            for xv, k, v in zip(xs, keys, pd.to_numeric(df[y], errors="coerce")) if math.isfinite(v)]
    points = [(xv, group(k, ys[0]), y, float(v)) for y in y2s
              for xv, k, v in zip(xs, keys, pd.to_numeric(df[y], errors="coerce")) if math.isfinite(v)]
    value = y1_title or ", ".join(ys)
    long = pd.DataFrame(rows, columns=[x, series_title or series or "series", value])
    gdim = long.columns[1]
    if kind == "bar":
        kdims = [x, gdim] if series or len(ys) > 1 else [x]
        main = hv.Bars(long, kdims, value).opts(tools=["hover"], color=hv.dim(gdim) if len(kdims) > 1 else "#1f77b4",
                                                cmap="Category10", show_legend=len(kdims) > 1)
        # bar positions: (category, group) when grouped
        at = [((xv, g) if len(kdims) > 1 else xv) for xv, g, _, _ in points]
        elements = [main]
    else:
        # a marker on each value: a series of one row is a point, not an invisible line
        elements = [element for name, part in long.groupby(gdim, sort=False)
                    for element in (hv.Curve(part.sort_values(x), x, value, label=str(name)).opts(tools=["hover"]),
                                    hv.Scatter(part, x, value, label=str(name)).opts(size=6))]
        at = [xv for xv, *_ in points]
    if points:  # drawn last, so its legend entry comes after the series'
        elements[-1] = elements[-1].opts(hooks=[_right_axis(at, [p[3] for p in points], [p[1] for p in points],
                                                          [p[2] for p in points], y2_title or ", ".join(y2s))])
    return hv.Overlay(elements).opts(title=title, width=width, height=height, xlabel=x_title or x,
                                     ylabel=value, legend_position="right", show_legend=True)


def _names(v: str | Sequence[str] | None) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    return list(v)


def _right_axis(at: list[Any], values: list[float], groups: list[str], columns: list[str], title: str) -> Any:
    """A render hook drawing the y2 values as diamonds on a second, right y axis, each over its
    bar (holoviews' own second axis cannot place a point on one bar of a group)."""

    def draw(plot: Any, element: Any) -> None:
        from bokeh.models import ColumnDataSource, HoverTool, LinearAxis, Range1d

        fig = plot.state
        top = max(values) * 1.1 if max(values) > 0 else 1.0
        fig.extra_y_ranges = {**fig.extra_y_ranges, "y2": Range1d(start=min(0.0, min(values) * 1.1), end=top)}
        fig.add_layout(LinearAxis(y_range_name="y2", axis_label=title), "right")
        source = ColumnDataSource({"x": at, "y2": values, "group": groups, "column": columns})
        renderer = fig.scatter("x", "y2", source=source, y_range_name="y2", marker="diamond", size=14,
                               fill_color="#2ca02c", line_color="black", name="y2", legend_label=title)
        fig.add_tools(HoverTool(renderers=[renderer], tooltips=[("", "@group"), ("@column", "@y2{0.00}")]))

    return draw


__all__ = ["table_plot"]
