"""The page of an exp.py-style script (``netesto table``): its tables, and its plots embedded with bokeh inline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from netesto.errors import ResultsError
from netesto.results.expscript import PLOT_MARK, ExpScript


def render_page(script: ExpScript) -> str:
    """The HTML page of a script that has run: its parts in order, each ``doPlot`` mark replaced
    by its plot's div (all plots in one bokeh document, JavaScript inline)."""
    body, head, tail = "\n".join(script.parts), "", ""
    if script.plots:
        from netesto.plots.page import embed

        embedded = embed(script.plots)
        head, tail = embedded.head, embedded.script
        for i, div in enumerate(embedded.divs):
            body = body.replace(PLOT_MARK.format(i), div, 1)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>netesto table</title>"
            "<style>table{border-collapse:collapse;font-family:sans-serif}"
            f"td,th{{padding:2px 6px;text-align:right}}</style>{head}</head>\n<body>\n"
            f"{body}\n{tail}</body></html>\n")


def run_script(path: str | os.PathLike[str], variables: Mapping[str, str] | None = None,
               *, base: str | os.PathLike[str] | None = None,
               page_dir: str | os.PathLike[str] | None = None) -> str:
    """Run the exp.py script at ``path``; return the HTML page. Relative
    ``File=`` paths are resolved against ``base`` (default: the current
    directory, as the original run in its working directory). ``page_dir``, the
    folder the page will be saved in, makes the rows' exp links relative to it
    unless the script sets ``relPath=``."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ResultsError(f"{p}: cannot read script: {exc.strerror}") from exc
    script = ExpScript(Path(base) if base is not None else Path.cwd(), dict(variables or {}),
                       page_dir=Path(page_dir) if page_dir is not None else None)
    script.run(text, source=str(p))
    return render_page(script)


__all__ = ["render_page", "run_script"]
