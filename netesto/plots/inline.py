"""BokehJS once per kernel: the first notebook output that draws carries it, later ones refer to it.

Every plot a notebook shows needs BokehJS (1.3 MB, with its widgets 1.7 MB), and labs are
offline, so it goes inline. Carried by every output, a quickstart run saved 11 MB and took
seconds to reopen. Here, as ``bokeh.io.output_notebook`` does for bokeh's own display, the
first output of a kernel that draws puts each library it needs into the page once; the
outputs after it carry only their documents, whose script waits for BokehJS (an output
above may still be rendering) before it draws. Each library is carried once per kernel
process: after a restart the first plot carries it again, so outputs kept from an earlier
session still find it in theirs.

A notebook whose carrying output was cleared (and not re-run) leaves the outputs after it
with a note saying so in place of their plot; :func:`forget` makes this kernel's next
plot carry BokehJS again. Saved pages (:mod:`netesto.plots.page`) always carry their own.

When bokeh's or panel's own notebook loader ran in this kernel (``output_notebook``, and so
``hv.extension`` and ``pn.extension``), that loader's output carries every BokehJS library, and
netesto's outputs carry none: they wait for the page's BokehJS and the plugins their documents need.
A second copy beside that loader's raced with it: panel loads its BokehJS asynchronously, and
whichever copy ran first, documents embedded in one Bokeh instance were missed by the other
(measured: the plot or panel's own document undrawn in 3 of 4 loads with two busy loops beside).
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from netesto.plots.page import Embedded, render

_LIBRARY = re.compile(r"/\* BEGIN (\S+\.js) \*/")  # how bokeh's INLINE bundle opens each library it inlines
_DIV_ID = re.compile(r'<div id="([^"]+)"')
WAIT_SECONDS = 10.0  # how long a plot waits for BokehJS from an output above before it says it is missing
_carried: set[str] = set()  # "bokeh.min.js@3.9.2", ...: put into this kernel's outputs already
# What a BokehJS plugin, once loaded, adds to its Bokeh (how a plot knows the page's loader got that far).
_PLUGIN_NAMES = {"bokeh-widgets.min.js": "Widgets", "bokeh-tables.min.js": "Tables"}


def forget() -> None:
    """Make the next plot of this kernel carry BokehJS again (after its carrying output was cleared)."""
    _carried.clear()


def _page_loader() -> bool:
    """Whether bokeh's own notebook loader (``output_notebook``: also ``hv.extension``'s and
    ``pn.extension``'s) ran in this kernel, its output putting every BokehJS library into the page."""
    from bokeh.io.state import curstate

    return bool(curstate().notebook)


def _bundle(models: Sequence[Any]) -> Any:
    """bokeh's INLINE bundle of what ``models`` need."""
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.resources import INLINE

    return bundle_for_objs_and_resources(list(models), INLINE)


def plugins(models: Sequence[Any], bundle: Any = None) -> list[str]:
    """What the BokehJS plugins ``models`` need add to Bokeh once loaded ("Widgets", "Tables");
    ``bundle``: their :func:`_bundle`, when made already."""
    bundle = bundle if bundle is not None else _bundle(models)
    names = (_LIBRARY.match(js) for js in bundle.js_raw)
    return [_PLUGIN_NAMES[n.group(1)] for n in names if n is not None and n.group(1) in _PLUGIN_NAMES]


def head(models: Sequence[Any], bundle: Any = None) -> str:
    """The ``<script>``/``<style>`` an output drawing bokeh ``models`` needs in this kernel: the BokehJS
    libraries no earlier output carried (with bokeh's one-line settings after them), and the CSS;
    no library once bokeh's own notebook loader ran (:func:`_page_loader`)."""
    import bokeh
    from bokeh.core.templates import CSS_RESOURCES, JS_RESOURCES

    bundle = bundle if bundle is not None else _bundle(models)
    libraries, settings = [], []
    by_loader = _page_loader()
    for js in bundle.js_raw:
        found = _LIBRARY.match(js)
        if found is None:
            settings.append(js)  # Bokeh.set_log_level(...): needs the library, so only beside it
            continue
        key = f"{found.group(1)}@{bokeh.__version__}"
        if key not in _carried:
            _carried.add(key)
            if not by_loader:
                libraries.append(js)
    scripts = [_guarded(js, bokeh.__version__) for js in libraries]
    if libraries:
        scripts.append(JS_RESOURCES.render(js_raw=settings, js_files=[]))
    return "".join(scripts) + CSS_RESOURCES.render(css_raw=bundle.css_raw, css_files=[])


def _guarded(library: str, version: str) -> str:
    """``library`` as inert text and a script that runs it unless it is bokeh's core and the page has
    that version's already (from ``hv.extension``, another notebook's plot): a second core would be a
    second Bokeh, holding the documents embedded after it apart from the plugins loaded before it.
    Loaded from text by a new script element, the library keeps its own ``'use strict'`` and ``this``."""
    import uuid

    where = f"netesto-bokehjs-{uuid.uuid4().hex}"
    core = "true" if _LIBRARY.match(library).group(1) == "bokeh.min.js" else "false"  # type: ignore[union-attr]
    return (f'<script type="text/plain" id="{where}">{library}</script>\n'
            f'<script type="text/javascript">(function() {{\n'
            f'  const text = document.getElementById("{where}"), version = {json.dumps(version)};\n'
            f'  if (!{core} || window.Bokeh === undefined || window.Bokeh[version] === undefined) {{\n'
            f'    const run = document.createElement("script");\n'
            f'    run.textContent = text.textContent;\n'
            f'    document.head.appendChild(run);\n'
            f'  }}\n'
            f'  text.remove();\n'
            f'}})();</script>\n')


def carrier(models: Sequence[Any]) -> str:
    """The HTML that puts into the page the BokehJS libraries ``models`` need and no earlier output of
    this kernel carried ("" when there are none): what a live view's widget needs before it shows."""
    drawn = head(models)
    return drawn if _LIBRARY.search(drawn) else ""


def _waiting(script: str, div: str, version: str, needs: Sequence[str] = ()) -> str:
    """bokeh's embed ``script`` (unwrapped) run once BokehJS ``version`` is in the page with the plugins
    whose names are ``needs``; after :data:`WAIT_SECONDS` without it, a note in place of the plot's
    ``div`` says why."""
    root = _DIV_ID.search(div)
    note = ("This plot needs BokehJS, which an output above carried (this kernel's first plot, or "
            "hv.extension / output_notebook); that output is gone. Re-run the notebook, or run "
            "netesto.plots.inline.forget() and then this cell.")
    return f"""<script type="text/javascript">(function() {{
  const version = {json.dumps(version)}, root = {json.dumps(root.group(1) if root else "")};
  const needs = {json.dumps(list(needs))};
  const ready = () => window.Bokeh !== undefined && (window.Bokeh.version === version
    || (window.Bokeh.versions !== undefined && window.Bokeh.versions.has(version)))
    && needs.every(name => window.Bokeh[name] !== undefined);
  let waited = 0;
  const go = function() {{
    if (ready()) {{
{script}
    }} else if ((waited += 50) < {int(WAIT_SECONDS * 1000)}) {{
      setTimeout(go, 50);
    }} else {{
      const where = document.getElementById(root);
      if (where !== null) {{ where.style.display = "block"; where.textContent = {json.dumps(note)}; }}
      console.warn("netesto: " + {json.dumps(note)});
    }}
  }};
  go();
}})();</script>"""


def embed(objs: Sequence[Any]) -> Embedded:
    """``objs`` (holoviews objects or bokeh models) for one notebook output: as
    :func:`netesto.plots.page.embed`, with the BokehJS of :func:`head` and a script that waits for it."""
    import bokeh
    from bokeh.embed import components

    models = [render(o) for o in objs]
    script, divs = components(models, wrap_script=False)
    bundle = _bundle(models)  # once: the libraries to carry and the plugins to wait for
    return Embedded(head(models, bundle), _waiting(script, divs[0] if divs else "", bokeh.__version__,
                                                   plugins(models, bundle)), tuple(divs))


def output(obj: Any) -> str:
    """``obj`` as one notebook output's HTML (what :func:`netesto.plots.notebook.show` displays)."""
    drawn = embed([obj])
    return f'<div class="netesto-plot">{drawn.head}{drawn.divs[0]}{drawn.script}</div>'


__all__ = ["WAIT_SECONDS", "carrier", "embed", "forget", "head", "output", "plugins"]
