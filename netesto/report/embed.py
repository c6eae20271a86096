"""holoviews objects as parts of a Jinja2 page: bokeh's JavaScript inline, one div per figure."""

from __future__ import annotations

import re
from typing import Any, Mapping


def bokeh_parts(figures: Mapping[str, Any]) -> dict[str, Any]:
    """``{"resources": <script/style tags>, "script": <the figures' script>, "divs": {name: <div>}}``.

    Resources are bokeh's own, inline: the page opens with no network. panel
    (which holoviews imports) adds a script by a server-relative path that no
    saved page can load; these figures use only bokeh's models, so it is dropped.
    """
    import holoviews as hv
    from bokeh.embed import components
    from bokeh.resources import INLINE

    models = {name: hv.render(fig, backend="bokeh") for name, fig in figures.items()}
    script, divs = components(models) if models else ("", {})
    head = INLINE.render()
    head = re.sub(r'<script[^>]*src="static/[^"]*"[^>]*></script>\n?', "", head)
    return {"resources": head, "script": script, "divs": divs}


__all__ = ["bokeh_parts"]
