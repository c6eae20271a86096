"""The public surface of netesto.results: exports, doctests, lazy root access."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import netesto
import netesto.results as results

MODULES = ["analysis", "cube", "dataset", "expcsv", "expscript", "fairness", "hostfiles", "load", "manifest", "numerics",
           "process", "safeexpr", "schema", "series", "storage", "summaries", "sweep"]


def test_exports_sorted_and_present() -> None:
    assert results.__all__ == sorted(results.__all__)
    for name in results.__all__:
        assert getattr(results, name) is not None
    assert netesto.open_experiment is results.open_experiment
    assert netesto.open_experiments is results.open_experiments


@pytest.mark.parametrize("name", MODULES)
def test_every_module_says_what_it_is(name: str) -> None:
    mod = importlib.import_module(f"netesto.results.{name}")
    assert mod.__doc__ and mod.__doc__.strip()


def test_agent_side_does_not_pull_results() -> None:
    code = "import sys, netesto.raw.nflow; print(json.dumps(sorted(m for m in sys.modules if m in ('xarray', 'pandas', 'numpy'))))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == []


def test_offloads_and_provenance_attrs(workdir: Path) -> None:
    ds = results.build_dataset(results.load_experiment(workdir / "1"))
    offl = json.loads(ds.attrs["offloads"])
    assert set(offl) == {"h1", "h2"} and offl["h1"]["tso"] in ("on", "off")
    assert "net.ipv4.tcp_rmem" in json.loads(ds.attrs["sysctls"])["h1"]
    assert json.loads(ds.attrs["kernels"])["h1"]
    assert [f["flow_id"] for f in json.loads(ds.attrs["flows_resolved"])] == list(ds.flow.values)
