"""An index page of a working directory: one row per experiment, linked to its page."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from pathlib import Path

from netesto.report.render import render

REPORT = "index.html"


def write_index(workdir: str | os.PathLike[str], *, templates: str | os.PathLike[str] | None = None) -> Path:
    """``<workdir>/index.html``: exp.csv's aggregate row of every processed experiment
    (the exp cell links to its ``exp.html``), an interrupted one marked so, without the columns
    that are empty in every row (exp.csv keeps them)."""
    from netesto.results import Table

    root = Path(workdir)
    table = Table.from_workdir(root).sort("exp")
    df = table.df
    if len(df):
        df = df.copy()
        df.insert(1, "status", ["interrupted" if _interrupted(root, e) else "" for e in df["exp"]])
        empty = [c for c in df.columns if c != "exp" and not any(str(v).strip() for v in df[c])]
        table = dataclasses.replace(table, df=df.drop(columns=empty))
    else:
        empty = []
    out = root / REPORT
    context = {"title": f"netesto experiments in {root.resolve().name}", "workdir": str(root.resolve()),
               "count": len(table), "table": table.to_html(), "empty": empty,
               "created": datetime.datetime.now().isoformat(timespec="seconds")}
    out.write_text(render("index.html.j2", context, templates=templates), encoding="utf-8")
    return out


def _interrupted(root: Path, exp: object) -> bool:
    """Whether experiment ``exp`` (an aggregate row's ``N.0``) was cut short: its experiment.json says so."""
    try:
        record = json.loads((root / str(exp).split(".")[0] / "experiment.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("interrupted") is True


__all__ = ["REPORT", "write_index"]
