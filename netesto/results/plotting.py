"""Bar/line plots of analysis tables: holoviews when installed, else inline SVG."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from netesto.errors import ResultsError

if TYPE_CHECKING:
    from netesto.results.analysis import Table

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


@dataclass(frozen=True)
class HtmlPlot:
    """A self-contained SVG plot (no JavaScript) for pages and notebooks."""

    svg: str
    title: str = ""

    @property
    def html(self) -> str:
        return f'<div class="netesto-plot">{self.svg}</div>'

    def _repr_html_(self) -> str:
        return self.html


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1/2/5 x 10^k step giving about ``ticks`` intervals over ``span``."""
    if not math.isfinite(span) or span <= 0:
        return 1.0
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def nice_top(peak: float, ticks: int = 5) -> tuple[float, float]:
    """(axis top, tick step): the first 1/2/5 x 10^k multiple at or above ``peak``."""
    if not math.isfinite(peak) or peak <= 0:
        return 1.0, 0.2
    step = nice_step(peak, ticks)
    return step * math.ceil(peak / step - 1e-9), step


def _list(v: str | Sequence[str] | None) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    return list(v)


def _check(table: "Table", names: Sequence[str]) -> None:
    for n in names:
        if n not in table.df.columns:
            raise ResultsError(f"plot: unknown column {n!r}; columns: {', '.join(table.df.columns)}")


def _series_groups(table: "Table", series: str | None) -> list[tuple[str, pd.DataFrame]]:
    if not series:
        return [("", table.df)]
    return [(str(k), g) for k, g in table.df.groupby(table.df[series].astype(str), sort=False)]


def holoviews_plot(table: "Table", x: str, y1: Any, *, y2: Any = None, series: str | None = None,
                   kind: str = "bar", title: str = "") -> Any:
    """A holoviews overlay (Bars/Curve per y column; y2 as Scatter on a right axis)."""
    import holoviews as hv

    ys, y2s = _list(y1), _list(y2)
    _check(table, [x, *ys, *y2s] + ([series] if series else []))
    df = table.df.copy()
    df[x] = df[x].astype(str) if kind == "bar" else df[x]
    elements = []
    for y in ys:
        kdims = [x] + ([series] if series else [])
        data = df[kdims + [y]].dropna()
        if kind == "bar":
            elements.append(hv.Bars(data, kdims, y, label=y))
        else:
            for name, g in _series_groups(table, series):
                elements.append(hv.Curve(g[[x, y]].dropna(), x, y, label=f"{name} {y}".strip()))
    for y in y2s:
        for name, g in _series_groups(table, series):
            gg = g.copy()
            gg[x] = gg[x].astype(str) if kind == "bar" else gg[x]
            elements.append(hv.Scatter(gg[[x, y]].dropna(), x, y, label=f"{name} {y}".strip()))
    overlay = hv.Overlay(elements)
    return overlay.relabel(title) if title else overlay


def svg_plot(table: "Table", x: str, y1: Any, *, y2: Any = None, series: str | None = None,
             kind: str = "bar", title: str = "", width: int = 900, height: int = 450,
             x_title: str = "", y1_title: str = "", y2_title: str = "", series_title: str = "",
             series_labels: dict[str, str] | None = None, **_: Any) -> HtmlPlot:
    """Grouped bars (or lines) of y1 per x category and series; y2 values as
    diamonds on a right axis (the original's doPlot layout)."""
    ys, y2s = _list(y1), _list(y2)
    _check(table, [x, *ys, *y2s] + ([series] if series else []))
    df = table.df
    xs = list(dict.fromkeys(df[x].map(lambda v: table.cell_text(x, v))))
    groups = _series_groups(table, series)
    labels = series_labels or {}
    left, right, top, bottom = 70, 70 if y2s else 20, 40, 60
    pw, ph = width - left - right, height - top - bottom

    def vmax(cols: list[str]) -> float:
        # Finite values only: an inf (e.g. fairness over a starved flow) is not
        # drawn, and must not hide the tallest value that is.
        vals = [float(v) for c in cols for v in pd.to_numeric(df[c], errors="coerce") if math.isfinite(v)]
        # 5% headroom so the tallest bar or diamond does not touch the frame.
        return 1.05 * max(vals or [1.0])

    (m1, s1), (m2, s2) = nice_top(vmax(ys)), nice_top(vmax(y2s) if y2s else 1.0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15">{html.escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#000"/>']
    for i in range(round(m1 / s1) + 1):
        yy = top + ph - ph * i * s1 / m1
        out.append(f'<text x="{left - 5}" y="{yy + 4:.1f}" text-anchor="end">{round(i * s1, 12):g}</text>')
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#ddd"/>')
    for i in range(round(m2 / s2) + 1 if y2s else 0):
        yy = top + ph - ph * i * s2 / m2
        out.append(f'<text x="{left + pw + 5}" y="{yy + 4:.1f}">{round(i * s2, 12):g}</text>')
    slot = pw / max(1, len(xs))
    nbars = max(1, len(groups) * len(ys))
    bw = slot * 0.8 / nbars
    for xi, xv in enumerate(xs):
        cx = left + slot * xi + slot / 2
        out.append(f'<text x="{cx}" y="{top + ph + 16}" text-anchor="middle">{html.escape(xv)}</text>')
    points: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for gi, (name, g) in enumerate(groups):
        color = PALETTE[gi % len(PALETTE)]
        for yi, y in enumerate(ys):
            k = gi * len(ys) + yi
            for _, r in g.iterrows():
                xv = table.cell_text(x, r[x])
                v = pd.to_numeric(pd.Series([r[y]]), errors="coerce").iloc[0]
                if xv not in xs or not np.isfinite(v):
                    continue
                xi = xs.index(xv)
                bx = left + slot * xi + slot * 0.1 + bw * k
                hgt = ph * float(v) / m1
                if kind == "bar":
                    out.append(f'<rect x="{bx:.1f}" y="{top + ph - hgt:.1f}" width="{bw:.1f}" '
                               f'height="{hgt:.1f}" fill="{color}" opacity="{1 - 0.3 * yi}">'
                               f"<title>{html.escape(f'{name} {y}={v:g}')}</title></rect>")
                else:
                    points.setdefault((gi, y), []).append((left + slot * xi + slot / 2, top + ph - hgt))
            for y in y2s:
                for _, r in g.iterrows():
                    xv = table.cell_text(x, r[x])
                    v = pd.to_numeric(pd.Series([r[y]]), errors="coerce").iloc[0]
                    if xv not in xs or not np.isfinite(v):
                        continue
                    px = left + slot * xs.index(xv) + slot * 0.1 + bw * (k + 0.5)
                    py = top + ph - ph * float(v) / m2
                    out.append(f'<path d="M{px:.1f},{py - 6:.1f} l6,6 l-6,6 l-6,-6 z" fill="#2ca02c" '
                               f'stroke="{color}"><title>{html.escape(f"{name} {y}={v:g}")}</title></path>')
    for (gi, _y), pts in points.items():
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[gi % len(PALETTE)]}" stroke-width="2"/>')
    lx = left + 10
    if series_title:
        out.append(f'<text x="{lx}" y="{top + 14}" font-weight="bold">{html.escape(series_title)}</text>')
    for gi, (name, _) in enumerate(groups):
        ly = top + 30 + 16 * gi
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{PALETTE[gi % len(PALETTE)]}"/>')
        out.append(f'<text x="{lx + 16}" y="{ly}">{html.escape(labels.get(name, name) or ", ".join(ys))}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 15}" text-anchor="middle">{html.escape(x_title or x)}</text>')
    out.append(f'<text x="15" y="{top + ph / 2}" transform="rotate(-90 15 {top + ph / 2})" '
               f'text-anchor="middle">{html.escape(y1_title or ", ".join(ys))}</text>')
    if y2s:
        out.append(f'<text x="{width - 10}" y="{top + ph / 2}" transform="rotate(90 {width - 10} {top + ph / 2})" '
                   f'text-anchor="middle">{html.escape(y2_title or ", ".join(y2s))}</text>')
    out.append("</svg>")
    return HtmlPlot("\n".join(out), title)


__all__ = ["HtmlPlot", "holoviews_plot", "nice_step", "nice_top", "svg_plot"]
