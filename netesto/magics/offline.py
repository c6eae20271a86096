"""Plain holoviews, bokeh and panel output that draws offline once ``%load_ext netesto`` ran.

Labs are often offline, and a saved notebook should draw wherever it is opened.
By default ``hv.extension("bokeh")``, ``bokeh.io.output_notebook()`` and
``pn.extension()`` put ``<script src="https://cdn...">`` tags into the page:
offline the plot stays blank (12 console errors, 6 failed requests, measured on
holoviews 1.23). After :func:`arrange` each of them puts its JavaScript and CSS
inline: bokeh and panel through their own settings (``BOKEH_RESOURCES``,
``PANEL_INLINE``, unless the user set them), holoviews through its extension's
``inline`` parameter, set as soon as ``holoviews.ipython`` is imported (not
before: importing holoviews costs seconds a kernel that never plots should not
pay). A user's explicit ``inline=False`` still wins.

holoviews' own display still goes through panel, whose stylesheets stay CDN
links in a notebook: a holoviews object shown as a cell's result is drawn
instead as :func:`netesto.plots.notebook.show` draws it (its bokeh document, BokehJS
inline once per kernel), by a display formatter registered for holoviews' ``Dimensioned``
(without importing holoviews). Objects with a ``DynamicMap`` driven by streams (a run's live
samples: :mod:`netesto.plots.livedata`) are drawn in a ``jupyter_bokeh`` widget that their streams
redraw; a ``DynamicMap`` with key dimensions (sliders) keeps holoviews' display.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any, Sequence

_HV = "holoviews.ipython"  # where hv.extension (notebook_extension) lives in a kernel


def arrange(ipython: Any) -> None:
    """Make bokeh's, panel's and holoviews' notebook output inline from now on in this process, and
    holoviews objects shown by ``ipython`` drawn offline."""
    ipython.display_formatter.mimebundle_formatter.for_type_by_name("holoviews.core.dimension", "Dimensioned",
                                                                    _offline_bundle)
    os.environ.setdefault("BOKEH_RESOURCES", "inline")
    os.environ.setdefault("PANEL_INLINE", "true")
    if _HV in sys.modules:
        _inline(sys.modules[_HV])
    elif not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def _offline_bundle(obj: Any) -> Any:
    """The display of a holoviews object: as :func:`netesto.plots.notebook.show` draws it; one with a
    DynamicMap driven by streams only as a live bokeh widget (:func:`_live_bundle`); one whose DynamicMap
    has key dimensions (sliders, panel's widgets) by holoviews' own display."""
    from holoviews import DynamicMap

    maps = obj.traverse(lambda x: x, [DynamicMap])
    if isinstance(obj, DynamicMap) or maps:
        if any(m.kdims for m in maps):
            return obj._repr_mimebundle_()
        return _live_bundle(obj)
    from netesto.plots.notebook import show

    return {"text/html": show(obj)._repr_html_(), "text/plain": repr(obj)}


def _live_bundle(obj: Any) -> Any:
    """``obj`` rendered by holoviews' bokeh plotting and shown in a ``jupyter_bokeh`` widget, as the live
    view is: its streams' events (a :class:`~netesto.plots.livedata.LiveData` buffer's samples) redraw it
    through widget messages, with BokehJS inline once per kernel. holoviews' own display goes through
    panel, whose stylesheets it links from a CDN (a blank-styled plot and failed requests offline)."""
    import holoviews as hv

    from netesto.magics.liveview import BatchedBokehModel, load_bokehjs
    from netesto.plots.livedata import DOCUMENTS
    from netesto.plots.page import bokeh_backend

    bokeh_backend()
    # Samples may come meanwhile, on another thread: the plot subscribes to its streams before it has
    # drawn itself, and a redraw then would draw it a second time, half-built (holoviews' subplots still
    # None), and the widget's document would be serialised while being changed.
    with DOCUMENTS:
        plot = hv.renderer("bokeh").get_plot(obj)
        load_bokehjs([plot.state])
        widget = BatchedBokehModel(plot.state)
        widget.hv_plot = plot  # held with the widget: the plot's stream subscriptions redraw it
        return widget._repr_mimebundle_()


def _inline(module: ModuleType) -> None:
    extension = getattr(module, "notebook_extension", None)
    if extension is not None:
        extension.inline = True  # the class's default: hv.extension("bokeh") inlines, inline=False still wins


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds ``holoviews.ipython`` as the other finders do and runs :func:`_inline` once it is executed."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != _HV:
            return None
        sys.meta_path.remove(self)  # one module, once; and the real finders below find it
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _inline(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


__all__ = ["arrange"]
