"""Plots as HTML that opens offline: a saved page, or parts to embed in a page of our own.

bokeh's JavaScript always goes inline: lab machines and the machines reports are read on are
often offline, and a CDN script leaves a blank area where the plot should be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

# panel (imported by holoviews) adds a script by a path relative to a server's static files, which no
# saved page can load; netesto's plots use bokeh's own models only, whose code goes inline.
_SERVER_SCRIPT = re.compile(r'<script src="static/[^"]*"></script>\n?')


@dataclass(frozen=True)
class Embedded:
    """Plots rendered for a page: ``head`` (bokeh's JavaScript and CSS, inline) goes once in
    <head>, each of ``divs`` where its plot goes, ``script`` (the plots' data) after them."""

    head: str
    script: str
    divs: tuple[str, ...]


def bokeh_backend() -> None:
    """holoviews' bokeh backend, loaded once, with no notebook output: ``hv.extension`` in a
    kernel would publish panel's loader, which fetches from CDNs (see :mod:`netesto.plots.notebook`)."""
    import holoviews as hv
    import holoviews.plotting.bokeh  # noqa: F401 - registers the bokeh renderer and its options

    # Selecting it rebuilds every hv.opts builder (25-140 ms a time; a sweep report asked 12 times), so
    # only when it is not current with its builders made: a first import makes it current before
    # its options exist, with no hv.opts.Curve (a selection puts the builders on the class).
    if hv.Store.current_backend != "bokeh" or "Curve" not in vars(hv.opts):
        hv.Store.set_current_backend("bokeh")


def render(obj: Any) -> Any:
    """The bokeh model of a holoviews object (its long curves thinned for the screen:
    :func:`netesto.plots.screen.thin`), or ``obj`` itself when it is a bokeh model already."""
    import holoviews as hv
    from bokeh.model import Model

    from netesto.plots.screen import thin

    if isinstance(obj, Model):
        return obj
    bokeh_backend()
    return hv.render(thin(obj), backend="bokeh")


def figures(obj: Any) -> list[Any]:
    """The bokeh figures of a holoviews object (a layout's panels top to bottom), each with its
    own toolbar; panels that share an axis in the layout keep sharing it."""
    from bokeh.models import GridPlot

    root = render(obj)
    if not isinstance(root, GridPlot):
        return [root]
    out: list[Any] = [child for child, *_ in sorted(root.children, key=lambda c: (c[1], c[2]))]
    for fig in out:
        fig.toolbar_location = "right"  # the grid's merged toolbar stays behind with the grid
    return out


def embed(objs: Sequence[Any]) -> Embedded:
    """Render ``objs`` (holoviews objects or bokeh models) into one bokeh document for a page:
    one div per object, the shared script and the inline resources (see :class:`Embedded`)."""
    from bokeh.core.templates import CSS_RESOURCES, JS_RESOURCES
    from bokeh.embed import components
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    models = [render(o) for o in objs]
    script, divs = components(models)
    bundle = bundle_for_objs_and_resources(models, INLINE)
    # only what is inline: the bundle's file URLs are panel's server-relative script (see above)
    head = JS_RESOURCES.render(js_raw=bundle.js_raw, js_files=[]) + CSS_RESOURCES.render(css_raw=bundle.css_raw,
                                                                                          css_files=[])
    return Embedded(head, script, tuple(divs))


def standalone(obj: Any, title: str = "netesto") -> str:
    """``obj`` (a holoviews object or a bokeh model) as one page, bokeh's JavaScript inline."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    model = render(obj)
    # bokeh's own page, not holoviews.save's panel template: that one loads icons and MathJax from CDNs.
    return _SERVER_SCRIPT.sub("", file_html(model, INLINE, title))


def save(obj: Any, path: Any, *, title: str = "netesto") -> Path:
    """Write ``obj`` (any holoviews object of :mod:`netesto.plots`) as one HTML file with bokeh's
    JavaScript inline: it opens offline, as lab machines often are. Returns the path."""
    out = Path(path)
    out.write_text(standalone(obj, title), encoding="utf-8")
    return out


__all__ = ["Embedded", "bokeh_backend", "embed", "figures", "render", "save", "standalone"]
