"""`netesto demo` end to end: testbed, agents, controller, results, tear-down."""

from __future__ import annotations

import subprocess
import sys

import pytest

from . import tbutil


@pytest.mark.netns
def test_demo_runs_and_leaves_results_and_nothing_else(tmp_path) -> None:
    name = tbutil.unique_name()
    proc = subprocess.run(
        [sys.executable, "-m", "netesto", "demo", "--dir", str(tmp_path), "--dur", "5", "--name", name],
        capture_output=True, text=True, timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "100%" in out and "demo finished" in out
    for rel in ("exp.csv", "1/all.exp.out", "1/exp.nc", "1/experiment.json"):
        assert (tmp_path / rel).exists(), f"{rel} missing:\n{out}"
    rows = (tmp_path / "exp.csv").read_text().splitlines()
    assert len(rows) == 4  # header, the aggregate and one row per flow group
    header = rows[0].split(",")
    by_group = {r.split(",")[0]: dict(zip(header, r.split(","))) for r in rows[1:]}
    assert by_group["1.1"]["ca"] == "cubic" and by_group["1.2"]["ca"] == "bbr"
    # Both flows crossed the 100 Mbit/s bottleneck: neither beats it.
    for group in ("1.1", "1.2"):
        assert 5 < float(by_group[group]["rate"]) <= 100, by_group[group]
    assert tbutil.leftovers(name) == []
