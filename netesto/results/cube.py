"""The sweep cube: every point's summary on dims (sweep parameters..., ``rep``).

``sweep.nc`` holds the summary numbers of each point (the mean over the
point's experiments when it ran several), its status, and where its
experiments are; :func:`open_sweep` reads it at once (it is small) and opens
the per-flow time series only when asked, lazily through dask::

    sw = open_sweep("sweep-out")
    sw.cube.rate.sel(ca="bbr", bw="100mbit")          # one value per rep
    sw.stats().rate                                    # mean over reps; rate_ci95 beside it
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
from netesto.results.integrity import checked, seal
from netesto.results.storage import open_experiment
from netesto.results.manifest import DONE, Manifest, relative
from netesto.results.sweep import SUMMARY_UNITS, experiment_summary
from netesto.vocab import parse_rate, parse_time_ms

CUBE = "sweep.nc"
# Two-sided 95 % Student t quantiles for 1..30 degrees of freedom (then ~normal).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(dof: int) -> float:
    """The 95 % two-sided t quantile for ``dof`` degrees of freedom (NaN for none).

    >>> t95(1), t95(4), round(t95(100), 2), math.isnan(t95(0))
    (12.706, 2.776, 1.96, True)
    """
    if dof < 1:
        return math.nan
    return _T95[dof - 1] if dof <= len(_T95) else 1.96


def _coord(values: list[Any]) -> np.ndarray:
    """Numbers stay numbers (``dur=2,3`` selects with ``dur=3``); anything else is text."""
    try:
        nums = [float(v) for v in values]
    except (TypeError, ValueError):
        return np.array([str(v) for v in values], dtype=object)
    if all(n.is_integer() for n in nums):
        return np.array([int(n) for n in nums])
    return np.array(nums)


def _companions(name: str, labels: np.ndarray) -> tuple[str, np.ndarray] | None:
    """``bw`` -> ``bw_bps``, ``rtt``/``jitter`` -> ``_ms``: numbers to plot against."""
    parse = {"bw": ("bw_bps", parse_rate), "rtt": ("rtt_ms", parse_time_ms),
             "jitter": ("jitter_ms", parse_time_ms)}.get(name)
    if parse is None or labels.dtype != object:
        return None
    try:
        return parse[0], np.array([float(parse[1](str(v))) for v in labels])
    except Exception:  # noqa: BLE001 - not a rate/time after all: no companion
        return None


def point_summary(exp_dirs: Sequence[Path]) -> dict[str, float]:
    """The point's summary numbers: the mean over its experiments."""
    rows = [experiment_summary(open_experiment(d))["values"] for d in exp_dirs]
    if not rows:
        return {}
    return {k: float(np.nanmean([r[k] for r in rows])) if any(math.isfinite(r[k]) for r in rows) else math.nan
            for k in rows[0]}


def build_cube(directory: str | Path, manifest: Manifest) -> xr.Dataset:
    """The cube of ``manifest``'s points (failed ones are NaN, with their status)."""
    root = Path(directory)
    names = list(manifest.grid)
    coords: dict[str, Any] = {n: _coord(manifest.grid[n]) for n in names}
    reps = sorted({r.rep for r in manifest.points.values()}) or [0]
    coords["rep"] = np.array(reps)
    shape = tuple(len(coords[n]) for n in [*names, "rep"])
    data = {k: np.full(shape, np.nan) for k in SUMMARY_UNITS}
    status = np.full(shape, "missing", dtype=object)
    exps = np.full(shape, "", dtype=object)
    errors = np.full(shape, "", dtype=object)
    label_pos = {n: {str(v): i for i, v in enumerate(manifest.grid[n])} for n in names}
    for rec in manifest:
        try:
            at = tuple(label_pos[n][str(rec.params[n])] for n in names) + (reps.index(rec.rep),)
        except (KeyError, ValueError):
            continue  # a point of another grid (resumed with --reps lower): not in this cube
        status[at], errors[at] = rec.status, rec.error
        exps[at] = ";".join(rec.experiments)
        if rec.status == DONE and rec.experiments:
            # read when the point ended (manifests written by hand or before have none)
            for k, v in (rec.summary or point_summary([root / e for e in rec.experiments])).items():
                if k in data:
                    data[k][at] = v
    dims = [*names, "rep"]
    ds = xr.Dataset({k: (dims, v, {"units": SUMMARY_UNITS[k]}) for k, v in data.items()}, coords=coords)
    ds["status"] = (dims, status.astype(str))
    ds["error"] = (dims, errors.astype(str))
    ds["experiments"] = (dims, exps.astype(str))
    for n in names:
        extra = _companions(n, coords[n])
        if extra:
            ds = ds.assign_coords({extra[0]: (n, extra[1])})
        if coords[n].dtype == object:
            ds[n] = ds[n].astype(str)
    ds.attrs.update(notebook=manifest.notebook, grid=json.dumps(manifest.grid), reps=manifest.reps,
                    fixed=json.dumps(manifest.fixed, default=str), checks=json.dumps(manifest.checks),
                    provenance=json.dumps(manifest.provenance, default=str))
    return ds


def write_cube(directory: str | Path, manifest: Manifest) -> Path:
    path = Path(directory) / CUBE
    tmp = path.with_name(f".{CUBE}.tmp")
    build_cube(directory, manifest).to_netcdf(tmp, engine="netcdf4")
    return seal(tmp, path)  # with its sha256 sidecar, checked by open_sweep


def stats(cube: xr.Dataset) -> xr.Dataset:
    """Mean over ``rep`` of every summary variable, with ``<var>_ci95`` (the
    half-width of its 95 % confidence interval, Student t) and ``n`` (reps that ran)."""
    out = {}
    for k in SUMMARY_UNITS:
        if k not in cube:
            continue
        v = cube[k]
        n = v.count("rep")
        sd = v.std("rep", ddof=1) if cube.sizes["rep"] > 1 else xr.full_like(v.isel(rep=0), np.nan)
        t = xr.apply_ufunc(np.vectorize(lambda m: t95(int(m) - 1)), n)
        out[k] = v.mean("rep").assign_attrs(v.attrs)
        out[f"{k}_ci95"] = (t * sd / np.sqrt(n.where(n > 0))).assign_attrs(units=v.attrs.get("units", ""))
    out["n"] = (cube["status"] == DONE).sum("rep").assign_attrs(long_name="repetitions that ran")
    return xr.Dataset(out, attrs=cube.attrs)


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

    def stats(self) -> xr.Dataset:
        return stats(self.cube)

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
        with xr.open_dataset(checked(root / CUBE), engine="netcdf4") as ds:
            cube = ds.load()
    except ResultsError:
        raise
    except Exception as exc:  # netCDF4/HDF5 raise many kinds for a damaged file
        raise SweepError(f"{root / CUBE}: cannot open: {type(exc).__name__}: {exc}") from exc
    return Sweep(root, cube, manifest)


__all__ = ["CUBE", "Sweep", "build_cube", "open_sweep", "point_summary", "stats", "t95", "write_cube"]
