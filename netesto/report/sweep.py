"""The sweep report: grid summary plots, a table of points, links to every point's pages.

``write_report("out")`` renders ``out/sweep.html`` from ``sweep.html.j2``
(netesto's ``report_templates`` or a user's own directory of templates),
self-contained: bokeh's JavaScript is inline, links are relative.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import quote

from netesto.report.render import render
from netesto.results.manifest import DONE
from netesto.results.ncio import NC_LOCK

REPORT = "sweep.html"
COLUMNS = (("rate", "goodput", "Mbit/s", 2), ("mean_rtt", "sRTT", "ms", 2), ("qdelay", "queueing", "ms", 2),
           ("retrans_pkts_pct", "retrans", "%", 3), ("jain", "Jain", "", 3))
# per congestion control, in the table of means: (measure, label, units, decimals)
CC_COLUMNS = (("share", "share", "", 3), ("rate", "goodput", "Mbit/s", 2), ("qdelay", "queueing", "ms", 2),
              ("retrans_pct", "retrans", "%", 3))


def href(path: str) -> str:
    """A link to ``path``, a file of the sweep (relative, checked when the manifest was read):
    percent-encoded, so no part of it can read as a scheme (``javascript:``) or leave the URL."""
    if path.startswith(("http://", "https://")):
        return path
    return quote(path)


def _num(v: Any, decimals: int) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(f) else f"{f:.{decimals}f}"


def _point_rows(sw: Any) -> list[dict[str, Any]]:
    """A row per point: its parameters, status, pages, and its numbers as the cube has them."""
    cube, names = sw.cube, list(sw.manifest.grid)
    label_pos = {n: {str(v): i for i, v in enumerate(sw.manifest.grid[n])} for n in names}
    reps = [int(r) for r in cube["rep"].values]
    rows = []
    for rec in sw.manifest:
        try:
            cell = cube.isel({**{n: label_pos[n][str(rec.params[n])] for n in names}, "rep": reps.index(rec.rep)})
            values = [_num(cell[k].values, d) for k, _, _, d in COLUMNS]
        except (KeyError, ValueError):
            values = [""] * len(COLUMNS)
        links = [{"text": "notebook", "href": href(rec.html)}] if rec.html else []
        links += [{"text": f"exp {Path(e).name}", "href": href(f"{e}/exp.html")} for e in rec.experiments
                  if (sw.directory / e / "exp.html").exists()]
        links += [{"text": f"attempt {a.n} ({a.status})", "href": href(f"{a.dir}/notebook.html")} for a in rec.attempts
                  if (sw.directory / a.dir / "notebook.html").exists()]
        rows.append({
            "key": rec.key, "params": rec.params, "rep": rec.rep, "status": rec.status, "error": rec.error,
            "seconds": _num(rec.seconds, 1), "checks": rec.checks, "links": links, "values": values,
        })
    return rows


def host_facts(sw: Any) -> dict[str, Any]:
    """``kernels``, ``tools``, ``sysctls`` and ``qdiscs`` per host, as the sweep's first finished
    experiment recorded them (the testbed or lab the points ran on); {} without one."""
    import netCDF4

    from netesto.errors import ResultsError
    from netesto.results.integrity import IntegrityWarning, checked

    first = next((sw.directory / e / "exp.nc" for r in sw.manifest if r.status == DONE for e in r.experiments), None)
    if first is None:
        return {}
    try:
        with NC_LOCK, netCDF4.Dataset(checked(first)) as nc:  # a damaged exp.nc is refused before HDF5 reads it
            return {k: json.loads(nc.getncattr(k)) for k in ("kernels", "tools", "sysctls", "qdiscs")
                    if k in nc.ncattrs()}
    except ResultsError as exc:
        warnings.warn(f"sweep report: the hosts table is left out: {exc}", IntegrityWarning, stacklevel=2)
        return {}
    except (OSError, ValueError, RuntimeError):
        return {}


def _hosts(sw: Any) -> list[dict[str, Any]]:
    """Per host: kernel, tool versions, sysctls that shape TCP, qdiscs (:func:`host_facts`)."""
    attrs = host_facts(sw)
    tcp = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_ecn",
           "net.core.default_qdisc")
    rows = []
    for host in sorted(attrs.get("kernels", {})):
        sysctls = attrs.get("sysctls", {}).get(host, {})
        rows.append({"host": host, "kernel": attrs["kernels"][host],
                     "tools": ", ".join(f"{k} {v}" for k, v in sorted(attrs.get("tools", {}).get(host, {}).items())),
                     "sysctls": "; ".join(f"{k.rsplit('.', 1)[-1]}={sysctls[k]}" for k in tcp if k in sysctls),
                     "qdiscs": attrs.get("qdiscs", {}).get(host, "")})
    return rows


def _interval(st: Any, var: str, at: dict[str, Any], decimals: int) -> str:
    """``mean [lo, hi] n=k`` of one cell (n beside every interval; no interval with one value)."""
    cell = st.sel(at)
    mean, n = _num(cell[var].values, decimals), int(cell[f"{var}_n"].values)
    if not mean:
        return ""
    lo, hi = _num(cell[f"{var}_lo"].values, decimals), _num(cell[f"{var}_hi"].values, decimals)
    return f"{mean} [{lo}, {hi}] n={n}" if lo and hi else f"{mean} n={n}"


def _mean_rows(st: Any, names: list[str]) -> list[dict[str, Any]]:
    """A row per grid cell and congestion control: its means with their intervals and n."""
    import itertools

    if "cc" not in st.dims or not st.sizes["cc"]:
        return []
    from netesto.results.stats import fair_share

    fair = fair_share(st)
    rows = []
    for combo in itertools.product(*(list(st[n].values) for n in names)):
        at = dict(zip(names, combo))
        for cc in st["cc"].values:
            here = {**at, "cc": cc}
            cells = [_interval(st, f"cc_{m}", here, d) for m, _, _, d in CC_COLUMNS]
            if any(cells):
                verdict, side = _verdict(st, here, None if fair is None else float(fair.sel(here)))
                rows.append({"params": [str(v) for v in combo], "cc": str(cc), "cells": cells, "verdict": verdict,
                             "side": side})
    return rows


def _verdict(st: Any, here: dict[str, Any], fair: float | None) -> tuple[str, str]:
    """Whether an algorithm took more or less than its ``fair`` share at a point beyond the noise of the
    repetitions (its share's 95 % interval leaves the fair share out), and ``"above"``, ``"below"`` or ``""``;
    nothing where it has no fair share (alone at the point: no one to win against)."""
    if fair is None or not math.isfinite(fair):
        return "", ""
    cell = st.sel(here)
    lo, hi = float(cell["cc_share_lo"]), float(cell["cc_share_hi"])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"fair {fair:.2f}; one repetition: no verdict", ""
    if lo > fair:
        return f"above its fair {fair:.2f}", "above"
    if hi < fair:
        return f"below its fair {fair:.2f}", "below"
    return f"within the noise of its fair {fair:.2f}", ""


Drawn = Callable[[], tuple[list[dict[str, Any]], dict[str, Any]]]  # (captions, bokeh parts), drawn once


class _Captions(Sequence[dict[str, Any]]):
    """``figures`` of the context: name, caption and whether it was drawn, per figure. The figures are
    drawn the first time a template reads this or ``bokeh``: a user's template that shows none does not
    pay for them (holoviews and bokeh: about a second a figure)."""

    def __init__(self, drawn: Drawn) -> None:
        self._drawn = drawn

    def __getitem__(self, i: Any) -> Any:
        return self._drawn()[0][i]

    def __len__(self) -> int:
        return len(self._drawn()[0])


class _Parts(Mapping[str, Any]):
    """``bokeh`` of the context: ``resources``, ``script`` and ``divs`` (see :func:`bokeh_parts`)."""

    def __init__(self, drawn: Drawn) -> None:
        self._drawn = drawn

    def __getitem__(self, key: str) -> Any:
        return self._drawn()[1][key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._drawn()[1])

    def __len__(self) -> int:
        return len(self._drawn()[1])


def report_context(directory: str | Path, figures: Any = None) -> dict[str, Any]:
    """What the template gets: the sweep's settings, provenance, figures (``figures``: names, else the
    sweep's choice, else the default: :mod:`netesto.report.figures`), means and points. The figures are
    drawn when the template first reads ``figures`` or ``bokeh``."""
    from netesto.report.embed import bokeh_parts
    from netesto.report.figures import build, chosen, resolve
    from netesto.results.cube import open_sweep

    root = Path(directory)
    sw = open_sweep(root)
    m = sw.manifest
    counts = m.counts()
    st = sw.stats(warn=False)
    names = resolve(chosen(figures, None) or m.figures, sw.cube)

    @functools.cache
    def draw() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        drawn = build(names, sw, st) if counts[DONE] else []
        parts = bokeh_parts({name: obj for name, _, obj in drawn if obj is not None})
        return [{"name": name, "caption": caption, "drawn": obj is not None} for name, caption, obj in drawn], parts

    failing = [r.key for r in m if r.checks and not all(r.checks.values())]
    return {
        "title": f"netesto sweep {root.name}",
        "notebook": m.notebook, "notebook_name": Path(m.notebook).name,
        "grid": m.grid, "fixed": m.fixed, "reps": m.reps, "checks": m.checks, "failing": failing,
        "counts": counts, "total": len(m.points),
        "created": datetime.datetime.fromtimestamp(m.created).isoformat(timespec="seconds"),
        "provenance": m.provenance, "provenance_json": json.dumps(m.provenance, indent=1, default=str),
        "columns": [(label, units) for _, label, units, _ in COLUMNS],
        "rows": _point_rows(sw), "param_names": list(m.grid), "hosts": _hosts(sw),
        "bokeh": _Parts(draw), "figures": _Captions(draw), "steady": m.steady or "0s (each flow's whole life)",
        "interval": st.attrs.get("interval", ""), "warning": st.attrs.get("warning", ""),
        "cc_columns": [(label, units) for _, label, units, _ in CC_COLUMNS], "means": _mean_rows(st, list(m.grid)),
    }


def write_report(directory: str | Path, *, templates: str | os.PathLike[str] | None = None,
                 figures: Any = None) -> Path:
    """Render ``<directory>/sweep.html``; ``templates`` is a directory whose
    ``sweep.html.j2`` replaces netesto's; ``figures`` the figures to draw (names, see
    :mod:`netesto.report.figures`)."""
    root = Path(directory)
    out = root / REPORT
    out.write_text(render("sweep.html.j2", report_context(root, figures), templates=templates), encoding="utf-8")
    return out


__all__ = ["REPORT", "host_facts", "report_context", "write_report"]
