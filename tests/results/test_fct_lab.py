"""Short flows beside a long one on the namespace testbed: a few hundred web-search-sized connections at half the
bottleneck's load next to a cubic stream, from the script through agents, the engine and results to the page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from netesto.controller import run
from netesto.results import load_experiment, open_experiment
from netesto.testbed import lifecycle
from netesto.workload import TIME, parse
from tests.testbed import tbutil

pytestmark = [pytest.mark.netns, pytest.mark.slow]

BW, RTT = 30_000_000, 10.0
# the example docs/workloads.md runs: 3 s of a cubic stream h1 -> h2 and, beside it, connections at Poisson times
# carrying sizes of the web-search CDF scaled to a hundredth, at half the bottleneck's rate (load=0.5, seed=1)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fct_websearch.nts"
MEAN_SIZE = 17112.5  # bytes: cdf(websearch,scale=0.01)'s mean, the requests' (the busier direction; replies are 1 byte)


def test_short_flows_beside_a_long_one_every_one_accounted_for_and_drawn(tmp_path: Path) -> None:
    name = tbutil.unique_name()
    with lifecycle.testbed(name=name, hosts=2, bw="30mbit", rtt=f"{RTT:g}ms", dir=tmp_path / "tb") as tb:
        result = run(EXAMPLE, lab=tb.lab, workdir=tmp_path / "w")
    assert tbutil.leftovers(name) == []  # the testbed and everything the run set on it are gone
    assert result.ok, result.errors
    expdir = tmp_path / "w" / str(result.exps[-1])
    ds = open_experiment(expdir)
    long_flow, workload = "h1-h2-1-0", "h1-h2-2-0"
    assert float(ds.rate.sel(flow=long_flow)) > 1  # Mbit/s: the stream ran beside the workload
    assert set(ds.txn_flow.values) == {workload}
    status = ds.txn_status.values
    started = int(np.isin(status, ["ok", "failed", "unfinished"]).sum())
    completed, failed = int((status == "ok").sum()), int(np.isin(status, ["failed", "unfinished"]).sum())
    # every flow accounted for: started = completed + failed, as the engine counted them too
    assert started == completed + failed == ds.sizes["txn"] - int((status == "refused").sum())
    client = next(r.client for r in load_experiment(expdir).flows if r.flow_id == workload)
    engine = client.summary["txn"]
    assert (engine["started"], engine["completed"], engine["failed"]) == (started, completed, failed)
    assert completed >= 0.95 * started, engine["errors"]
    # a few hundred Poisson arrivals: the load's rate (0.5 x 30 Mbit/s over 17.1 kB) within 5 sigma
    workloads = json.loads(ds.attrs["workloads"])[workload]
    per_second = 1 / parse(workloads["gap"], TIME).mean
    assert workloads["load"] == 0.5 and per_second * MEAN_SIZE * 8 == pytest.approx(0.5 * BW, rel=1e-3)
    expect = per_second * float(ds.dur.sel(flow=workload))
    assert abs(ds.sizes["txn"] - expect) < 5 * math.sqrt(expect) and ds.sizes["txn"] >= 200
    # no completed transaction beat the ideal: a base RTT plus its bytes past the shaper's burst at 30 Mbit/s
    ok = status == "ok"
    slow = ds.txn_slowdown.values[ok]
    assert np.isfinite(slow).all() and slow.min() >= 1.0, np.sort(slow)[:5]
    assert json.loads(ds.attrs["fct_ideal"])["base_rtt_s"] == pytest.approx(RTT / 1e3)
    # the page draws the FCT figure (a dot per completed transaction) in chromium, with no console error
    from tests.plots.browser import show

    shown = show(expdir / "exp.html", tmp_path / "exp.png")
    assert shown.errors == []
    (fig,) = [f for f in shown.figures if f["title"].startswith("Flow completion time slowdown")]
    dots = [g for g in fig["glyphs"] if g["type"] == "Scatter" and g["n"] > 10]
    assert [g["n"] for g in dots] == [completed]
    assert any(g["type"] == "Line" for g in fig["glyphs"])
    assert "Flow completion times" in shown.text and f"\t{started}\t{completed}\t{failed}" in shown.text
