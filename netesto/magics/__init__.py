"""IPython extension: ``%%netesto`` and ``%netesto`` magics with ipywidgets progress.

``%load_ext netesto`` (or ``%load_ext netesto.magics``) registers them. The
magics only parse their line and call the library (:func:`netesto.run`,
:func:`netesto.plan`); this is the only package that imports IPython.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register :class:`~netesto.magics.cellmagic.NetestoMagics` with ``ipython``, and make plain
    holoviews, bokeh and panel output draw offline (:mod:`netesto.magics.offline`)."""
    from netesto.magics.cellmagic import NetestoMagics
    from netesto.magics.offline import arrange

    ipython.register_magics(NetestoMagics)
    arrange(ipython)


def show(obj: Any, title: str = "netesto") -> None:
    """Display ``obj`` (a holoviews object) now, as :func:`netesto.plots.notebook.show` draws it:
    its bokeh document, BokehJS inline once per kernel (for a plot in the middle of a cell, or in a loop)."""
    from IPython.display import display

    from netesto.plots.notebook import show as shown

    display(shown(obj, title))


__all__ = ["load_ipython_extension", "show"]
