"""Experiment datasets on disk: ``exp.nc`` written with checksums, opened (one or a workdir's, lazily).

Every netCDF file netesto writes (``exp.nc``, a sweep's ``sweep.nc``) gets a
``.sha256`` sidecar, and every reader in the package checks it first
(:func:`~netesto.results.integrity.checked`): a damaged file is refused before HDF5 reads it, and a file
without its sidecar (or with an empty one) opens with an :class:`IntegrityWarning`
saying that damage to it cannot be detected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import xarray as xr

from netesto.errors import ResultsError
from netesto.results.dataset import build_dataset
from netesto.results.integrity import IntegrityWarning, check_digest, checked, seal
from netesto.results.load import load_experiment
from netesto.results.ncio import NC_LOCK


def write_netcdf(ds: xr.Dataset, path: str | os.PathLike[str]) -> Path:
    """Write ``ds`` to ``path`` (netCDF4) via a temporary file and a rename.

    Every variable is stored with HDF5's Fletcher-32 checksum, so damaged data
    is refused when read instead of read as other numbers. Text (flow ids,
    hosts, counter names) is stored as fixed-width characters, not as HDF5
    variable-length strings: those live in a heap no checksum covers, and a
    damaged heap made HDF5 loop for ever reading it. (Attributes carry none.)"""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    encoding: dict[str, dict[str, Any]] = {}
    for name, var in ds.variables.items():
        if not var.ndim or 0 in var.shape:
            continue
        if var.dtype.kind in "fiub":
            encoding[str(name)] = {"fletcher32": True}
        elif var.dtype.kind in "OUS":
            encoding[str(name)] = {"dtype": "S1", "fletcher32": True}
    try:
        with NC_LOCK:
            ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
        seal(tmp, path)
    except Exception as exc:
        tmp.unlink(missing_ok=True)
        raise ResultsError(f"{path}: cannot write netCDF: {exc}") from exc
    return path


def open_experiment(path: str | os.PathLike[str]) -> xr.Dataset:
    """Open an experiment's dataset: ``exp.nc``, or an experiment directory.

    A directory with ``exp.nc`` opens that file; a directory of raw data
    without it is built on the fly (nothing is written).
    """
    p = Path(path)
    nc = p / "exp.nc" if p.is_dir() else p
    if nc.is_file():
        check_digest(nc)
        try:
            with NC_LOCK, xr.open_dataset(nc, engine="netcdf4") as ds:
                return ds.load()
        # A damaged file makes netCDF4/HDF5 raise RuntimeError, AttributeError,
        # KeyError, ... besides OSError: all of them mean "this file is unreadable".
        except Exception as exc:
            raise ResultsError(f"{nc}: cannot open dataset: {type(exc).__name__}: {exc}") from exc
    if p.is_dir():
        return build_dataset(load_experiment(p))
    raise ResultsError(f"{p}: no such experiment (expected a directory or an exp.nc file)")


def experiment_dirs(workdir: str | os.PathLike[str]) -> list[Path]:
    """Numbered experiment directories of a working directory, in numeric order."""
    root = Path(workdir)
    if not root.is_dir():
        raise ResultsError(f"{root}: no such working directory")
    dirs = [p for p in root.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(dirs, key=lambda p: int(p.name))


class Experiments(Mapping[int, xr.Dataset]):
    """The processed experiments of a working directory, by number.

    A read-only mapping that opens each ``exp.nc`` on first access (and keeps
    it), so a workdir of thousands of experiments costs nothing until used.
    """

    def __init__(self, workdir: str | os.PathLike[str], exps: Iterable[int] | None = None) -> None:
        self.workdir = Path(workdir)
        wanted = set(exps) if exps is not None else None
        self._paths = {int(d.name): d / "exp.nc" for d in experiment_dirs(workdir)
                       if (wanted is None or int(d.name) in wanted) and (d / "exp.nc").is_file()}
        self._open: dict[int, xr.Dataset] = {}

    def __getitem__(self, exp: int) -> xr.Dataset:
        if exp not in self._paths:
            raise KeyError(exp)
        if exp not in self._open:
            self._open[exp] = open_experiment(self._paths[exp])
        return self._open[exp]

    def __iter__(self) -> Iterator[int]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __repr__(self) -> str:
        return f"<Experiments {self.workdir}: {sorted(self._paths)}>"

    def summaries(self) -> Any:
        """One row per experiment (from each all.exp.out) as an analysis Table."""
        from netesto.results.analysis import Table

        return Table.from_workdir(self.workdir)

    def combine(self, params: Mapping[int, Mapping[str, Any]] | None = None) -> xr.Dataset:
        """Summaries along ``exp`` with the parameters as coordinates (see sweep.combine)."""
        from netesto.results.sweep import combine

        return combine(self, params)


def open_experiments(workdir: str | os.PathLike[str], exps: Iterable[int] | None = None) -> Experiments:
    """Every processed experiment (with ``exp.nc``) of ``workdir``, by number, opened lazily."""
    return Experiments(workdir, exps)


__all__ = ["Experiments", "IntegrityWarning", "check_digest", "checked", "experiment_dirs", "open_experiment",
           "open_experiments", "seal", "write_netcdf"]
