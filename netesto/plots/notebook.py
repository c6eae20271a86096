"""Show a plot in a notebook so that it draws offline: in JupyterLab and in the HTML export.

holoviews' own notebook display goes through panel, whose JavaScript and
stylesheets come from CDNs (blank areas in a lab with no internet, and in
the notebook's nbconvert HTML), and bokeh's notebook loader brings along
panel's extension by a server path no saved page can load. ``show(obj)``
instead displays the plot's bokeh document with bokeh's JavaScript inline,
once per kernel (:mod:`netesto.plots.inline`: the first plot carries it).
It returns an object with a rich repr; only :mod:`netesto.magics` imports
IPython and displays things itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Shown:
    """A plot as notebook output: its bokeh document, drawn by the BokehJS of the kernel's first plot
    (or its own, when it is that plot: decided when it is displayed, not when it is made)."""

    def __init__(self, obj: Any, title: str = "netesto") -> None:
        from netesto.plots.page import render

        self.model = render(obj)  # long lines thinned for the screen, as on a saved page
        self.title = title

    def _repr_html_(self) -> str:
        from netesto.plots.inline import output

        return output(self.model)

    def save(self, path: str | Path) -> Path:
        """The plot as one offline HTML file titled ``title`` (its own BokehJS inline)."""
        from netesto.plots.page import save

        return save(self.model, path, title=self.title)


def show(obj: Any, title: str = "netesto") -> Shown:
    """``obj`` (a holoviews object, e.g. ``res[1].plot()``) as notebook output: shown as a
    cell's last expression, like any object with a rich repr (``display(show(obj))``
    anywhere else, or :func:`netesto.magics.show`, which displays it at once).
    Nothing here imports IPython: displaying is the magics' part."""
    return Shown(obj, title)


__all__ = ["Shown", "show"]
