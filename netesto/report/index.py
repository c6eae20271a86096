"""An index page of a working directory: one row per experiment, linked to its page."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from netesto.report.render import render

REPORT = "index.html"


def write_index(workdir: str | os.PathLike[str], *, templates: str | os.PathLike[str] | None = None) -> Path:
    """``<workdir>/index.html``: exp.csv's aggregate row of every processed experiment
    (the exp cell links to its ``exp.html``)."""
    from netesto.results import Table

    root = Path(workdir)
    table = Table.from_workdir(root).sort("exp")
    out = root / REPORT
    context = {"title": f"netesto experiments in {root.resolve().name}", "workdir": str(root.resolve()),
               "count": len(table), "table": table.to_html(),
               "created": datetime.datetime.now().isoformat(timespec="seconds")}
    out.write_text(render("index.html.j2", context, templates=templates), encoding="utf-8")
    return out


__all__ = ["REPORT", "write_index"]
