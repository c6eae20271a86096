"""Two sweeps point by point: a patched kernel against a baseline, say.

For every grid cell both sweeps ran, each measure's mean in A and in B, the
difference B - A with its 95 % confidence interval (Welch: the two sweeps'
spreads, Student t at the Welch-Satterthwaite degrees of freedom), and
whether the interval leaves out zero: a change beyond the noise of the
repetitions. With one repetition on a side there is no interval, and no
verdict.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from netesto.errors import SweepError
from netesto.plots.summary import LABELS, MEASURES
from netesto.report.render import render
from netesto.report.sweep import href
from netesto.results.cube import open_sweep, t95

REPORT = "compare.html"


def _moments(cube: xr.Dataset, measure: str) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    v = cube[measure]
    return v.mean("rep"), v.var("rep", ddof=1), v.count("rep")


def compare(a: xr.Dataset, b: xr.Dataset, measures: Sequence[str] = MEASURES) -> xr.Dataset:
    """Per cell of the grid both cubes share: ``<m>_a``, ``<m>_b``, ``<m>`` (B - A),
    ``<m>_ci95`` (half-width of the difference's 95 % interval) and ``<m>_changed``
    (1: the interval leaves out 0; 0: it does not; NaN: no interval)."""
    dims = [str(d) for d in a.dims if d != "rep"]
    other = [str(d) for d in b.dims if d != "rep"]
    if sorted(dims) != sorted(other):
        raise SweepError(f"the sweeps have different parameters: {', '.join(dims)} against {', '.join(other)}")
    a, b = xr.align(a, b, join="inner", exclude=["rep"])
    if any(a.sizes[d] == 0 for d in dims):
        raise SweepError("the sweeps share no grid point: " + "; ".join(
            f"{d}: {', '.join(map(str, a[d].values))}" for d in dims))
    out: dict[str, Any] = {}
    for m in measures:
        if m not in a or m not in b:
            continue
        ma, va, na = _moments(a, m)
        mb, vb, nb = _moments(b, m)
        se2 = va / na + vb / nb
        dof = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
        t = xr.apply_ufunc(np.vectorize(lambda d: t95(int(d)) if math.isfinite(d) else math.nan), dof.fillna(math.nan))
        delta = mb - ma
        ci = t * np.sqrt(se2)
        units = a[m].attrs.get("units", "")
        out[f"{m}_a"], out[f"{m}_b"] = ma.assign_attrs(units=units), mb.assign_attrs(units=units)
        out[m] = delta.assign_attrs(units=units)
        out[f"{m}_ci95"] = ci.assign_attrs(units=units)
        out[f"{m}_changed"] = xr.where(ci.notnull(), (np.abs(delta) > ci).astype(float), np.nan)
    return xr.Dataset(out)


def _fmt(v: Any, digits: int = 3) -> str:
    f = float(v)
    return "" if not math.isfinite(f) else f"{f:.{digits}g}"


def write_compare(a_dir: str | os.PathLike[str], b_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                  *, templates: str | os.PathLike[str] | None = None) -> Path:
    """``compare.html`` of sweep B against sweep A (in B's directory unless ``out``)."""
    from netesto.plots.summary import sweep_figures
    from netesto.report.embed import bokeh_parts

    sa, sb = open_sweep(Path(a_dir)), open_sweep(Path(b_dir))
    diff = compare(sa.cube, sb.cube)
    dest = Path(out) if out else sb.directory / REPORT
    dims = [str(d) for d in diff.dims]
    measures = [m for m in MEASURES if m in diff]
    rows: list[dict[str, Any]] = []
    stacked = diff.stack(cell=dims) if dims else diff.expand_dims(cell=[0])
    for i in range(stacked.sizes["cell"]):
        c = stacked.isel(cell=i)
        cells = []
        for m in measures:
            changed = float(c[f"{m}_changed"])
            cells.append({"a": _fmt(c[f"{m}_a"]), "b": _fmt(c[f"{m}_b"]), "delta": _fmt(c[m]),
                          "ci": _fmt(c[f"{m}_ci95"]), "changed": None if math.isnan(changed) else bool(changed)})
        rows.append({"params": [str(c[d].values) for d in dims], "cells": cells})
    figures = {"delta": sweep_figures(diff, measures)} if rows else {}

    def rel(p: Path) -> str:  # relative to the page, percent-encoded: never a scheme
        return href(Path(os.path.relpath(p, dest.parent)).as_posix())

    context = {
        "title": f"netesto sweeps compared: {sb.directory.name} against {sa.directory.name}",
        "a": {"dir": str(sa.directory), "report": rel(sa.directory / "sweep.html"), "provenance": sa.manifest.provenance},
        "b": {"dir": str(sb.directory), "report": rel(sb.directory / "sweep.html"), "provenance": sb.manifest.provenance},
        "dims": dims, "measures": [(m, LABELS.get(m, m), diff[m].attrs.get("units", "")) for m in measures],
        "rows": rows, "changed": sum(bool(c["changed"]) for r in rows for c in r["cells"]),
        "bokeh": bokeh_parts(figures),
    }
    dest.write_text(render("compare.html.j2", context, templates=templates), encoding="utf-8")
    return dest


__all__ = ["REPORT", "compare", "write_compare"]
