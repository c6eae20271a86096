"""PROCESS_EXP through the real controller and agents: `netesto run` -> exp.nc, exp.csv."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from netesto.results import Table, convergence_time, figure8, open_experiment

from ..controller.test_integration import netesto_run, start_pair

pytestmark = pytest.mark.netns

SCRIPT = """
SOURCE inlib
RUN InlibShortWaits
RUN TwoFlowBaseStream server=h2 client1=h1 client2=h1 ca1=cubic ca2=bbr dur1=2 dur2=1 delay2=0.5 expName=twoflow
"""


def test_run_processes_the_experiment(veth_pair, tmp_path: Path) -> None:
    lab, _agents = start_pair(veth_pair, tmp_path)
    work = tmp_path / "work"
    script = tmp_path / "two.script"
    script.write_text(SCRIPT)
    rc, out, err = netesto_run(veth_pair, script, lab, work)
    assert rc == 0, out + err
    d = work / "1"
    assert (d / "exp.nc").is_file() and (d / "all.exp.out").is_file(), out + err
    ds = open_experiment(d)
    assert sorted(ds.flow.values) == ["h1-h2-1-0", "h1-h2-2-0"]
    f1, f2 = ds.sel(flow="h1-h2-1-0"), ds.sel(flow="h1-h2-2-0")
    assert str(f2.ca.values) == "bbr" and float(f2.delay) == pytest.approx(0.5)
    # The second flow joined 0.5 s after the first (plus the measured start
    # skews of experiment.json) on the common time axis.
    doc = json.loads((d / "experiment.json").read_text())
    skew = {f["flow_id"]: f["start_skew"] for f in doc["flows"]}
    expected = 0.5 + skew["h1-h2-2-0"] - skew["h1-h2-1-0"]
    assert float(f2.start - f1.start) == pytest.approx(expected, abs=0.02)
    assert float(f1.duration) == pytest.approx(2.0, abs=0.2)
    assert float(f2.duration) == pytest.approx(1.0, abs=0.2)
    for f in (f1, f2):
        bits = float(f.goodput.fillna(0).sum()) * ds.attrs["interval"]
        assert bits == pytest.approx(float(f.bytes) * 8, rel=1e-6)
    assert "TwoFlowBaseStream" in ds.attrs["script"]
    c = convergence_time(ds, "h1-h2-2-0", tolerance=0.5, hold=0.2)
    # NaN (never converged) or within the joining flow's life.
    assert c != c or 0 <= c <= float(f2.duration)
    with open(work / "exp.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["exp"] for r in rows] == ["1.0", "1.1", "1.2"]
    assert rows[0]["ca"] == "cubic/bbr" and rows[0]["expName"] == "twoflow"
    # sumRateDur: (rate1 x 2 s + rate2 x 1 s) / 2 s
    r1, r2 = float(rows[1]["rate"]), float(rows[2]["rate"])
    assert float(rows[0]["rate"]) == pytest.approx((r1 * 2 + r2 * 1) / 2, abs=0.2)
    assert int(rows[1]["client-tx-packets"].split(".")[0] or 0) > 0
    fig = figure8(Table.read(work)).to_pandas()
    assert list(fig["exp"]) == ["1.0"]
