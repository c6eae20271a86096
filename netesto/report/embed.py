"""holoviews figures as named parts of a Jinja2 page (see :func:`netesto.plots.page.embed`)."""

from __future__ import annotations

from typing import Any, Mapping


def bokeh_parts(figures: Mapping[str, Any]) -> dict[str, Any]:
    """``{"resources": <bokeh's JavaScript and CSS, inline>, "script": <the figures' data>,
    "divs": {name: <div>}}`` for a template: one bokeh document, the page opens offline."""
    if not figures:
        return {"resources": "", "script": "", "divs": {}}
    from netesto.plots.page import embed

    done = embed(list(figures.values()))
    return {"resources": done.head, "script": done.script, "divs": dict(zip(figures, done.divs))}


__all__ = ["bokeh_parts"]
