"""Show a plot in a notebook so that it draws offline: in JupyterLab and in the HTML export.

holoviews' own notebook display goes through panel, whose JavaScript and
stylesheets come from CDNs (blank areas in a lab with no internet, and in
the notebook's nbconvert HTML), and bokeh's notebook loader brings along
panel's extension by a server path no saved page can load. ``show(obj)``
instead displays the page :func:`netesto.plots.save` would write, bokeh's
JavaScript inline, in an iframe: each plot carries everything it needs.
It returns that iframe as an object with a rich repr; only :mod:`netesto.magics`
imports IPython and displays things itself.
"""

from __future__ import annotations

import html
from typing import Any

DEFAULT_HEIGHT = 600
MARGIN = 40


def _height(model: Any) -> int:
    """The height a bokeh layout needs: figures' heights summed down columns, maxed across rows."""
    from bokeh.models import Column, GridPlot, Row

    if isinstance(model, GridPlot):
        rows: dict[int, int] = {}
        for child, r, _c, *_ in model.children:
            rows[r] = max(rows.get(r, 0), _height(child))
        return sum(rows.values()) + (40 if model.toolbar_location else 0)
    if isinstance(model, Column):
        return sum(_height(c) for c in model.children)
    if isinstance(model, Row):
        return max((_height(c) for c in model.children), default=0)
    return int(getattr(model, "height", None) or 0)


def page(obj: Any, title: str = "netesto") -> tuple[str, int]:
    """``obj``'s self-contained page and the height it needs in pixels."""
    from netesto.plots.page import render, standalone

    model = render(obj)  # long lines thinned for the screen, as on a saved page
    return standalone(model, title), (_height(model) or DEFAULT_HEIGHT) + MARGIN


class Shown:
    """A plot as notebook output: an iframe holding its offline page."""

    def __init__(self, obj: Any, title: str = "netesto") -> None:
        self.page, self.height = page(obj, title)

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.page, quote=True)}" style="width:100%;border:0;'
                f'height:{self.height}px" sandbox="allow-scripts"></iframe>')


def show(obj: Any, title: str = "netesto") -> Shown:
    """``obj`` (a holoviews object, e.g. ``res[1].plot()``) as notebook output: shown as a
    cell's last expression, like any object with a rich repr (``display(show(obj))``
    anywhere else, or :func:`netesto.magics.show`, which displays it at once).
    Nothing here imports IPython: displaying is the magics' part."""
    return Shown(obj, title)


__all__ = ["Shown", "page", "show"]
