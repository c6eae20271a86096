"""Two sweeps point by point: a patched kernel against a baseline, say.

First, everything that differs between them (:func:`differences`): their grids,
fixed values, repetitions, steady windows, checks and notebook defaults, the
hosts' kernels, sysctls and tools, netesto's and its libraries' versions.
Then, for every grid cell both sweeps ran, each measure's mean in A and in B, the
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
# per congestion control, on (parameters, rep, cc): who got what, and whether B changed it
CC_MEASURES = ("cc_share", "cc_rate", "cc_qdelay", "cc_retrans_pct")
CC_LABELS = {"cc_share": "share", "cc_rate": "goodput", "cc_qdelay": "queueing delay",
             "cc_retrans_pct": "retransmitted"}


def _moments(cube: xr.Dataset, measure: str) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    v = cube[measure]
    return v.mean("rep"), v.var("rep", ddof=1), v.count("rep")


def compare(a: xr.Dataset, b: xr.Dataset, measures: Sequence[str] = MEASURES) -> xr.Dataset:
    """Per cell of the grid both cubes share: ``<m>_a``, ``<m>_b``, ``<m>`` (B - A),
    ``<m>_ci95`` (half-width of the difference's 95 % interval) and ``<m>_changed``
    (1: the interval leaves out 0; 0: it does not; NaN: no interval)."""
    own = ("rep", "cc", "grp")  # the cube's own dims, not parameters
    dims = [str(d) for d in a.dims if d not in own]
    other = [str(d) for d in b.dims if d not in own]
    if sorted(dims) != sorted(other):
        raise SweepError(f"the sweeps have different parameters: {', '.join(dims)} against {', '.join(other)}")
    keep = [m for m in measures if m in a and m in b]
    a, b = xr.align(a[keep], b[keep], join="inner", exclude=list(own))
    a, b = _shared_coords(a, b)
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


def _shared_coords(a: xr.Dataset, b: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    """``a`` and ``b`` without the companion coordinates they do not share with the same values. Two sweeps
    of one grid at another fixed RTT or bandwidth have other ``buffer_bytes`` for the same ``buffer``; those
    could not be one coordinate of the difference (xarray refused to merge them), and the differences table
    names the fixed values that made them differ."""
    index = set(a.indexes) | set(b.indexes)
    drop = [str(c) for c in dict.fromkeys([*a.coords, *b.coords]) if c not in index
            and not (c in a.coords and c in b.coords and a[c].equals(b[c]))]
    return a.drop_vars([c for c in drop if c in a.coords]), b.drop_vars([c for c in drop if c in b.coords])


def _text(v: Any) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    return str(v)


def differences(sa: Any, sb: Any) -> list[dict[str, str]]:
    """Every setting in which sweep B differs from sweep A: ``{"what", "a", "b"}`` rows (none: the same)."""
    from netesto.report.sweep import host_facts

    rows: list[dict[str, str]] = []

    def add(what: str, a: Any, b: Any) -> None:
        if a != b:
            rows.append({"what": what, "a": _text(a), "b": _text(b)})

    ma, mb = sa.manifest, sb.manifest
    for name in dict.fromkeys([*ma.grid, *mb.grid]):
        add(f"swept {name}", ma.grid.get(name), mb.grid.get(name))
    for name in dict.fromkeys([*ma.fixed, *mb.fixed]):
        add(f"--set {name}", ma.fixed.get(name), mb.fixed.get(name))
    add("repetitions", ma.reps, mb.reps)
    add("steady window", ma.steady or "0s", mb.steady or "0s")
    add("checks", ma.checks, mb.checks)
    add("notebook", Path(ma.notebook).name, Path(mb.notebook).name)
    for name in dict.fromkeys([*ma.defaults, *mb.defaults]):
        if name not in ma.grid and name not in ma.fixed and name not in mb.grid and name not in mb.fixed:
            add(f"notebook default {name}", ma.defaults.get(name), mb.defaults.get(name))
    pa, pb = ma.provenance, mb.provenance
    for key in ("netesto", "python", "kernel", "platform"):
        add(f"controller {key}", pa.get(key), pb.get(key))
    for pkg in dict.fromkeys([*pa.get("packages", {}), *pb.get("packages", {})]):
        add(f"package {pkg}", pa.get("packages", {}).get(pkg), pb.get("packages", {}).get(pkg))
    ha, hb = host_facts(sa), host_facts(sb)
    for kind, what in (("kernels", "kernel"), ("tools", "tool"), ("sysctls", "sysctl")):
        a_hosts, b_hosts = ha.get(kind, {}), hb.get(kind, {})
        for host in dict.fromkeys([*a_hosts, *b_hosts]):
            va, vb = a_hosts.get(host), b_hosts.get(host)
            if kind == "kernels" or va is None or vb is None:
                add(f"{host} {what}" if kind == "kernels" else f"{host} {kind}", va, vb)
                continue
            for key in dict.fromkeys([*va, *vb]):
                add(f"{host} {what} {key}", va.get(key), vb.get(key))
    return rows


def _per_cc(a: xr.Dataset, b: xr.Dataset) -> xr.Dataset:
    """:func:`compare` of each congestion control's measures, for the algorithms both sweeps ran (none: empty)."""
    measures = [m for m in CC_MEASURES if m in a and m in b]
    if not measures or "cc" not in a.dims or "cc" not in b.dims:
        return xr.Dataset()
    both = [c for c in a.cc.values if c in set(b.cc.values)]
    if not both:
        return xr.Dataset()
    return compare(a.sel(cc=both), b.sel(cc=both), measures)


def _table(diff: xr.Dataset, dims: list[str], measures: list[str]) -> list[dict[str, Any]]:
    """A row per cell of ``dims`` (a point, or a point and an algorithm) with a number on either side:
    each measure's A, B, B - A, the interval's half-width and whether it leaves out 0."""
    if not measures:
        return []
    stacked = diff.stack(cell=dims) if dims else diff.expand_dims(cell=[0])
    rows: list[dict[str, Any]] = []
    for i in range(stacked.sizes["cell"]):
        c = stacked.isel(cell=i)
        if all(not math.isfinite(float(c[f"{m}_{side}"])) for m in measures for side in "ab"):
            continue  # an algorithm this point did not run
        cells = []
        for m in measures:
            changed = float(c[f"{m}_changed"])
            cells.append({"a": _fmt(c[f"{m}_a"]), "b": _fmt(c[f"{m}_b"]), "delta": _fmt(c[m]),
                          "ci": _fmt(c[f"{m}_ci95"]), "changed": None if math.isnan(changed) else bool(changed)})
        rows.append({"params": [str(c[d].values) for d in dims], "cells": cells})
    return rows


def _fmt(v: Any, digits: int = 3) -> str:
    f = float(v)
    return "" if not math.isfinite(f) else f"{f:.{digits}g}"


def write_compare(a_dir: str | os.PathLike[str], b_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                  *, templates: str | os.PathLike[str] | None = None) -> Path:
    """``compare.html`` of sweep B against sweep A (in B's directory unless ``out``)."""
    from netesto.plots.summary import sweep_figures
    from netesto.report.embed import bokeh_parts

    sa, sb = open_sweep(Path(a_dir)), open_sweep(Path(b_dir))
    settings = differences(sa, sb)
    dest = Path(out) if out else sb.directory / REPORT
    try:
        diff = compare(sa.cube, sb.cube)
        unmatched = ""
    except SweepError as exc:  # still a page: it says what differs, which is why no point matches
        diff, unmatched = xr.Dataset(), exc.message
    dims = [str(d) for d in diff.dims]
    measures = [m for m in MEASURES if m in diff]
    rows = _table(diff, dims, measures)
    per_cc = _per_cc(sa.cube, sb.cube) if not unmatched else xr.Dataset()
    cc_measures = [m for m in CC_MEASURES if m in per_cc]
    cc_rows = _table(per_cc, [*dims, "cc"], cc_measures) if cc_measures else []
    figures = {"delta": sweep_figures(diff, measures)} if rows else {}

    def rel(p: Path) -> str:  # relative to the page, percent-encoded: never a scheme
        return href(Path(os.path.relpath(p, dest.parent)).as_posix())

    context = {
        "title": f"netesto sweeps compared: {sb.directory.name} against {sa.directory.name}",
        "a": {"dir": str(sa.directory), "report": rel(sa.directory / "sweep.html"), "provenance": sa.manifest.provenance},
        "b": {"dir": str(sb.directory), "report": rel(sb.directory / "sweep.html"), "provenance": sb.manifest.provenance},
        "dims": dims, "measures": [(m, LABELS.get(m, m), diff[m].attrs.get("units", "")) for m in measures],
        "rows": rows, "changed": sum(bool(c["changed"]) for r in [*rows, *cc_rows] for c in r["cells"]),
        "cc_measures": [(m, CC_LABELS[m], per_cc[m].attrs.get("units", "")) for m in cc_measures],
        "cc_dims": [*dims, "algorithm"], "cc_rows": cc_rows,
        "bokeh": bokeh_parts(figures), "differences": settings, "unmatched": unmatched,
    }
    dest.write_text(render("compare.html.j2", context, templates=templates), encoding="utf-8")
    return dest


__all__ = ["CC_MEASURES", "REPORT", "compare", "differences", "write_compare"]
