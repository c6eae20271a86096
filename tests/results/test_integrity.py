"""Integrity wherever netCDF files are read (issue 32): exp.nc and sweep.nc are checked by every reader."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from netesto.errors import ResultsError
from netesto.results import open_experiment, open_experiments
from netesto.results.cube import open_sweep
from netesto.results.integrity import IntegrityWarning

from ..sweep.test_cube import make_sweep


def _flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def _report(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netesto", "report", "sweep", str(directory)],
                          capture_output=True, text=True, timeout=300)


def test_a_damaged_exp_nc_is_refused_by_every_reader(processed: Path, tmp_path: Path) -> None:
    # open_experiment refused a damaged exp.nc, but Sweep.flows() and `report sweep` read it unchecked.
    out = make_sweep(processed, tmp_path / "sw", fail=None)
    sw = open_sweep(out)
    first = sw.paths()[0]
    _flip(first)
    with pytest.raises(ResultsError, match=r"exp.nc: damaged: its sha256 is not the one exp.nc.sha256 recorded"):
        open_experiment(first)
    with pytest.raises(ResultsError, match="damaged"):
        open_experiments(first.parent.parent)[int(first.parent.name)]
    with pytest.raises(ResultsError, match=rf"{first}: damaged"):
        sw.flows()
    other = next(r for r in sw.manifest if r.experiments and out / r.experiments[0] / "exp.nc" != first)
    assert sw.flows(**other.params, rep=other.rep).sizes["point"] == 1  # the others still open
    with pytest.warns(IntegrityWarning, match=r"the hosts table is left out: .*damaged"):
        from netesto.report.sweep import write_report

        write_report(out)
    done = _report(out)  # `netesto report sweep` rebuilds the cube from the exp.nc files: refused, named
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{first}: damaged" in done.stderr, done.stderr
    # a damaged sweep.nc: open_sweep refuses it, naming it
    _flip(out / "sweep.nc")
    with pytest.raises(ResultsError, match=r"sweep.nc: damaged"):
        open_sweep(out)


def test_a_missing_or_empty_sidecar_is_a_warning_that_says_so(processed: Path, tmp_path: Path) -> None:
    # An empty .sha256 disabled the check without a word.
    nc = processed / "1" / "exp.nc"
    side = nc.with_name("exp.nc.sha256")
    side.write_text("")
    with pytest.warns(IntegrityWarning, match=r"exp.nc: an empty exp.nc.sha256: damage to it cannot be detected"):
        open_experiment(nc)
    side.unlink()
    with pytest.warns(IntegrityWarning, match=r"exp.nc: no exp.nc.sha256"):
        open_experiment(nc)
    out = make_sweep(processed, tmp_path / "sw", fail=None)
    assert (out / "sweep.nc.sha256").read_text().split()[1] == "sweep.nc"  # written with its cube
    with warnings.catch_warnings():
        warnings.simplefilter("error", IntegrityWarning)
        open_sweep(out)  # checked, and whole: no warning
    (out / "sweep.nc.sha256").unlink()
    with pytest.warns(IntegrityWarning, match=r"sweep.nc: no sweep.nc.sha256"):
        open_sweep(out)
