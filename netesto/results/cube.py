"""The sweep cube: every point's summary on dims (sweep parameters..., ``rep``), per algorithm and group too.

``sweep.nc`` holds the summary numbers of each point (the mean over the
point's experiments when it ran several) over the sweep's steady window, the
same numbers per congestion control (``cc_<measure>``, dim ``cc``) and per flow
group (``grp_<measure>``, dim ``grp``), its status, and where its experiments
are; :func:`open_sweep` reads it at once (it is small) and opens the per-flow
time series only when asked, lazily through dask::

    sw = open_sweep("sweep-out")
    sw.cube.cc_share.sel(cc="bbr", buffer="1bdp")     # bbr's share, one value per rep
    sw.stats().cc_share_lo                             # mean over reps, interval bounds and n beside it
    sw.flows(ca="bbr").goodput                         # dask-backed, points along "point"
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from netesto.errors import ResultsError, SweepError
from netesto.results.axes import companions
from netesto.results.groups import DIMS, MEASURES
from netesto.results.integrity import checked, seal
from netesto.results.manifest import DONE, Manifest, relative
from netesto.results.stats import stats as _stats
from netesto.results.stats import t95
from netesto.results.storage import open_experiment
from netesto.results.sweep import SUMMARY_UNITS, experiment_summary
from netesto.results.ncio import NC_LOCK

CUBE = "sweep.nc"


def _coord(values: list[Any]) -> np.ndarray:
    """Numbers stay numbers (``dur=2,3`` selects with ``dur=3``); anything else is text."""
    try:
        nums = [float(v) for v in values]
    except (TypeError, ValueError):
        return np.array([str(v) for v in values], dtype=object)
    if all(n.is_integer() for n in nums):
        return np.array([int(n) for n in nums])
    return np.array(nums)


def _mean_parts(all_parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of several experiments' parts, measure by measure (NaN-skipping; None where none has one)."""
    if len(all_parts) == 1:
        return all_parts[0]
    out: dict[str, Any] = {"grp_ca": {}}
    for dim in DIMS:
        keys = list(dict.fromkeys(k for p in all_parts for k in p.get(dim, {})))
        out[dim] = {}
        for k in keys:
            rows = [p[dim][k] for p in all_parts if k in p.get(dim, {})]
            out[dim][k] = {m: (float(np.nanmean(v)) if (v := [r[m] for r in rows if r.get(m) is not None]) else None)
                           for m in MEASURES}
    for p in all_parts:
        for k, v in p.get("grp_ca", {}).items():
            out["grp_ca"][k] = v if out["grp_ca"].get(k, v) == v else f"{out['grp_ca'][k]}/{v}"
    return out


def point_summary(exp_dirs: Sequence[Path], steady: str | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """The point's summary numbers and its per-algorithm and per-group parts over the ``steady`` window:
    the mean over its experiments."""
    summaries = [experiment_summary(open_experiment(d), steady) for d in exp_dirs]
    if not summaries:
        return {}, {}
    rows = [s["values"] for s in summaries]
    values = {k: float(np.nanmean([r[k] for r in rows])) if any(math.isfinite(r[k]) for r in rows) else math.nan
              for k in rows[0]}
    return values, _mean_parts([s["parts"] for s in summaries])


def _labels(manifest: Manifest) -> dict[str, list[Any]]:
    """The algorithms (in order of first appearance) and the group numbers the points' parts name."""
    cc: dict[str, None] = {}
    grp: set[int] = set()
    for rec in manifest:
        cc.update(dict.fromkeys(rec.parts.get("cc", {})))
        grp.update(int(g) for g in rec.parts.get("grp", {}) if str(g).lstrip("-").isdigit())
    return {"cc": list(cc), "grp": sorted(grp)}


def build_cube(directory: str | Path, manifest: Manifest) -> xr.Dataset:
    """The cube of ``manifest``'s points (failed ones are NaN, with their status)."""
    root = Path(directory)
    for rec in manifest:  # manifests written before parts (or by hand): read from the experiments once
        if rec.status == DONE and rec.experiments and (not rec.summary or not rec.parts):
            rec.summary, rec.parts = point_summary([root / e for e in rec.experiments], manifest.steady or None)
    names = list(manifest.grid)
    coords: dict[str, Any] = {n: _coord(manifest.grid[n]) for n in names}
    reps = sorted({r.rep for r in manifest.points.values()}) or [0]
    coords["rep"] = np.array(reps)
    labels = _labels(manifest)
    coords["cc"] = np.array(labels["cc"], dtype=object)
    coords["grp"] = np.array(labels["grp"], dtype=np.int64)
    shape = tuple(len(coords[n]) for n in [*names, "rep"])
    data = {k: np.full(shape, np.nan) for k in SUMMARY_UNITS}
    parted = {f"{dim}_{m}": np.full(shape + (len(labels[dim]),), np.nan) for dim in DIMS for m in MEASURES}
    grp_ca = np.full(shape + (len(labels["grp"]),), "", dtype=object)
    status = np.full(shape, "missing", dtype=object)
    exps = np.full(shape, "", dtype=object)
    errors = np.full(shape, "", dtype=object)
    label_pos = {n: {str(v): i for i, v in enumerate(manifest.grid[n])} for n in names}
    pos = {"cc": {k: i for i, k in enumerate(labels["cc"])}, "grp": {str(k): i for i, k in enumerate(labels["grp"])}}
    for rec in manifest:
        try:
            at = tuple(label_pos[n][str(rec.params[n])] for n in names) + (reps.index(rec.rep),)
        except (KeyError, ValueError):
            continue  # a point of another grid (resumed with --reps lower): not in this cube
        status[at], errors[at] = rec.status, rec.error
        exps[at] = ";".join(rec.experiments)
        if rec.status != DONE or not rec.experiments:
            continue
        for k, v in rec.summary.items():
            if k in data:
                data[k][at] = v
        for dim in DIMS:
            for key, row in rec.parts.get(dim, {}).items():
                i = pos[dim].get(str(key))
                for m, v in row.items():
                    if i is not None and f"{dim}_{m}" in parted and v is not None:
                        parted[f"{dim}_{m}"][at + (i,)] = v
        for key, ca in rec.parts.get("grp_ca", {}).items():
            if str(key) in pos["grp"]:
                grp_ca[at + (pos["grp"][str(key)],)] = ca
    dims = [*names, "rep"]
    ds = xr.Dataset({k: (dims, v, {"units": SUMMARY_UNITS[k]}) for k, v in data.items()}, coords=coords)
    what = {"cc": "the points' flows of one congestion control", "grp": "the points' flows of one DO_CLIENT group"}
    for name, arr in parted.items():
        dim, m = name.split("_", 1)
        ds[name] = ([*dims, dim], arr, {"units": MEASURES[m][0], "long_name": f"{what[dim]}: {MEASURES[m][1]}"})
    ds["grp_ca"] = ([*dims, "grp"], grp_ca.astype(str), {"long_name": "congestion control of the group's flows"})
    ds["status"] = (dims, status.astype(str))
    ds["error"] = (dims, errors.astype(str))
    ds["experiments"] = (dims, exps.astype(str))
    ds = ds.assign_coords(companions(manifest, coords))
    for n in [*names, "cc"]:
        if ds[n].dtype == object:
            ds[n] = ds[n].astype(str)
    steady = manifest.steady or "0s"
    for k in [*SUMMARY_UNITS, *parted]:
        ds[k].attrs["steady"] = steady
    ds.attrs.update(notebook=manifest.notebook, grid=json.dumps(manifest.grid), reps=manifest.reps,
                    fixed=json.dumps(manifest.fixed, default=str), checks=json.dumps(manifest.checks),
                    steady=steady, provenance=json.dumps(manifest.provenance, default=str))
    return ds


def write_cube(directory: str | Path, manifest: Manifest) -> Path:
    path = Path(directory) / CUBE
    tmp = path.with_name(f".{CUBE}.tmp")
    with NC_LOCK:
        build_cube(directory, manifest).to_netcdf(tmp, engine="netcdf4")
    return seal(tmp, path)  # with its sha256 sidecar, checked by open_sweep


def stats(cube: xr.Dataset, *, method: str = "t", warn: bool = True) -> xr.Dataset:
    """Mean over ``rep`` of every summary variable with ``<var>_lo``/``<var>_hi`` (its 95 % interval,
    inside the measure's range) and ``<var>_n``; ``n``: the repetitions that ran
    (:func:`netesto.results.stats.stats`)."""
    return _stats(cube, method=method, warn=warn)


def _labels_in_memory(ds: xr.Dataset) -> xr.Dataset:
    """Text variables (host, ca, ... per flow: small) read now: points with other flows
    fill them with NaN, which dask cannot chunk as text; the numbers stay lazy."""
    text = [k for k, v in ds.variables.items() if v.dtype.kind in "OUS" and k not in ds.indexes]
    return ds.assign({k: ds[k].load() for k in text if k in ds.data_vars}).assign_coords(
        {k: ds[k].load() for k in text if k in ds.coords})


@dataclass
class Sweep:
    """An opened sweep: ``cube`` in memory, the flows of its points on demand."""

    directory: Path
    cube: xr.Dataset
    manifest: Manifest

    def stats(self, method: str = "t", warn: bool = True) -> xr.Dataset:
        return stats(self.cube, method=method, warn=warn)

    def paths(self, **sel: Any) -> list[Path]:
        """The ``exp.nc`` files of the points ``sel`` picks (all points without it)."""
        picked = self.cube["experiments"].sel(**sel) if sel else self.cube["experiments"]
        out = []
        for cell in np.atleast_1d(picked.values).ravel():
            for e in str(cell).split(";"):
                if not e:
                    continue
                try:  # sweep.nc is a file like any other: its paths stay inside the sweep
                    relative(e, "experiment")
                except ValueError as exc:
                    raise SweepError(f"{self.directory / CUBE}: {exc}; refused") from None
                out.append(self.directory / e / "exp.nc")
        return out

    def flows(self, **sel: Any) -> xr.Dataset:
        """The per-flow datasets of the points ``sel`` picks, lazily (dask), along ``point``."""
        paths = [checked(p) for p in self.paths(**sel)]  # a damaged exp.nc is refused, not read lazily
        if not paths:
            raise SweepError(f"{self.directory}: no experiments where {sel or 'anywhere'}")
        ds = xr.open_mfdataset([str(p) for p in paths], combine="nested", concat_dim="point", engine="netcdf4",
                               chunks={}, join="outer", data_vars="all", coords="different", compat="no_conflicts",
                               combine_attrs="drop_conflicts", preprocess=_labels_in_memory)
        return ds.assign_coords(point=[str(p.parent.relative_to(self.directory)) for p in paths])

    def flow_table(self, **sel: Any) -> pd.DataFrame:
        """One row per flow of the points ``sel`` picks: the point's parameters, rep, the flow's
        congestion control, group, host and its steady-window numbers (the sweep's window)."""
        from netesto.results.groups import breakdown

        rows: list[dict[str, Any]] = []
        picked = self.cube["experiments"].sel(**sel) if sel else self.cube["experiments"]
        stacked = picked.stack(cell=list(picked.dims)) if picked.dims else picked.expand_dims(cell=[0])
        for i in range(stacked.sizes["cell"]):
            c = stacked.isel(cell=i)
            params: dict[str, Any] = {**sel, **{str(d): c[d].item() for d in picked.dims}}
            for path in self.paths(**params):
                ds = open_experiment(path)
                b = breakdown(ds, self.manifest.steady or None)
                for j, flow in enumerate(ds.flow.values):
                    rows.append({**params, "flow": str(flow), "ca": str(ds.ca.values[j]), "grp": int(ds.group.values[j]),
                                 "host": str(ds.host.values[j]),
                                 **{m: float(b[f"steady_{m}"].values[j]) for m in MEASURES if m != "flows"}})
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """One row per point: parameters, rep, status and the headline numbers."""
        cols = ["rate", "mean_rtt", "retrans_pkts_pct", "jain", "status", "error"]
        return self.cube[[c for c in cols if c in self.cube]].to_dataframe().reset_index()

    def _repr_html_(self) -> str:
        # xarray's own repr escapes the cube's values; the directory is text too
        return f"<p>netesto sweep <code>{html.escape(str(self.directory))}</code></p>" + self.cube._repr_html_()


def open_sweep(directory: str | Path) -> Sweep:
    """A sweep directory's cube (``sweep.nc``) and manifest; nothing else is read."""
    root = Path(directory)
    manifest = Manifest.load(root)
    if not (root / CUBE).is_file():
        raise SweepError(f"{root}: no {CUBE} (the sweep has not finished: `netesto sweep ... --resume` ends it)")
    try:
        with NC_LOCK, xr.open_dataset(checked(root / CUBE), engine="netcdf4") as ds:
            cube = ds.load()
    except ResultsError:
        raise
    except Exception as exc:  # netCDF4/HDF5 raise many kinds for a damaged file
        raise SweepError(f"{root / CUBE}: cannot open: {type(exc).__name__}: {exc}") from exc
    return Sweep(root, cube, manifest)


__all__ = ["CUBE", "Sweep", "build_cube", "open_sweep", "point_summary", "stats", "t95", "write_cube"]
