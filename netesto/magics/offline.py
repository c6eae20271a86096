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
(without importing holoviews). Objects with a ``DynamicMap`` inside need a live
kernel and keep holoviews' display.
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
    """The display of a holoviews object: as :func:`netesto.plots.notebook.show` draws it (holoviews' own with
    a DynamicMap)."""
    from holoviews import DynamicMap

    if isinstance(obj, DynamicMap) or obj.traverse(lambda x: x, [DynamicMap]):
        return obj._repr_mimebundle_()
    from netesto.plots.notebook import show

    return {"text/html": show(obj)._repr_html_(), "text/plain": repr(obj)}


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
