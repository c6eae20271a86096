"""Transactions of drawn workloads in the Dataset: every row of the log on dim txn, the ideal and slowdowns,
tables by size, across experiments, and the page's block; from flows recorded between two namespaces."""

from __future__ import annotations

import doctest
import json
import math
from pathlib import Path

import numpy as np
import pytest

from netesto.results import fct, fct_compare, fct_table, open_experiment
from netesto.results.fct import TESTBED_BURST, add_transactions, ideal, page_rows, recompute

WEB = ("cdf(label=websearch,scale=0.01,points=0:0;10000:0.15;20000:0.2;30000:0.3;50000:0.4;80000:0.53;"
       "200000:0.6;1000000:0.7;2000000:0.8;5000000:0.9;10000000:0.97;30000000:1)")


def test_doctests() -> None:
    result = doctest.testmod(fct)
    assert result.failed == 0 and result.attempted > 0


def test_the_testbed_burst_is_the_testbeds_own() -> None:
    from netesto.testbed.shaping import BURST

    assert BURST.endswith("k") and int(BURST[:-1]) * 1024 == TESTBED_BURST  # tc's k is 1024


def test_the_ideal_counts_what_passes_the_burst_at_the_rate() -> None:
    req, reply = np.array([1000.0, 15360 + 1_250_000]), np.array([1.0, 15360 + 125_000])
    got = ideal(req, reply, 10e6, 0.01, 15360)
    assert got.tolist() == pytest.approx([0.01, 0.01 + 1.0 + 0.1])
    assert math.isnan(ideal(req, reply, 0.0, 0.01, 0)[1])  # no rate: no ideal


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A closed-loop RR flow, an open-loop CRR workload and a stream between two namespaces, processed."""
    from tests import netns
    from netesto.report.experiment import process_experiment
    from tests.engine.test_engine import ENGINE, Server

    tmp = tmp_path_factory.mktemp("fct")
    pair = netns.make_veth_pair()
    try:
        server = Server(pair, pair.b, pair.addr_b, tmp / "srv")
        common = dict(server=server.addr, port=server.port, dur=1.5, exp=4, link_bps=1_000_000_000)
        specs = [dict(flow_id="h1-h2-1-0", test="TCP_RR", req_dist="exp(mean=2000)", reply_dist="exp(mean=8000)",
                      gap="exp(mean=1ms)", seed=5, **common),
                 dict(flow_id="h1-h2-2-0", test="TCP_CRR", req_dist=WEB, gap="exp(mean=5ms)", open_loop=True,
                      seed=5, load=0.5, **common),
                 dict(flow_id="h1-h2-3-0", test="TCP_STREAM", **{k: v for k, v in common.items() if k != "link_bps"})]
        path = tmp / "specs.json"
        path.write_text(json.dumps(specs))
        pair.run(pair.a, [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp / "w")], timeout=60)
        server.wait_done(len(specs))
        server.events()
    finally:
        pair.close()
    for p in (tmp / "srv" / "4" / "flows").iterdir():
        (tmp / "w" / "4" / "flows" / p.name).write_bytes(p.read_bytes())
    res = process_experiment(tmp / "w", 4)
    assert res.ok, res.errors
    return tmp / "w" / "4"


@pytest.mark.netns
def test_every_transaction_is_a_row_with_its_flow(recorded: Path) -> None:
    from netesto.results import load_experiment
    from netesto.raw.nflow import read_flow

    ds = open_experiment(recorded)
    logs = {f: read_flow(recorded / "flows" / f"{f}.txn.nflow") for f in ("h1-h2-1-0", "h1-h2-2-0")}
    assert ds.sizes["txn"] == sum(log.rows for log in logs.values())
    assert set(ds.txn_flow.values) == set(logs)  # the stream has none
    for flow, log in logs.items():
        mine = ds.sel(txn=ds.txn_flow == flow)
        assert list(mine.txn_seq.values) == sorted(log.columns["seq"])  # in draw order
        assert int(mine.txn_req.sum()) == sum(log.columns["req"])
        assert (mine.txn_size == mine.txn_req + mine.txn_reply).all()
        assert (mine.txn_status == "ok").all()
        assert (mine.txn_fct > 0).all() and (mine.txn_start >= -0.01).all()
        assert float(mine.txn_start.max()) <= float(ds.start.sel(flow=flow)) + 1.5 + 0.5
    # the seed and the draws of each flow are in the attrs
    workloads = json.loads(ds.attrs["workloads"])
    assert workloads["h1-h2-2-0"]["seed"] == 5 and workloads["h1-h2-2-0"]["open_loop"] is True
    assert load_experiment(recorded).errors == []


@pytest.mark.netns
def test_slowdowns_are_fct_over_the_ideal(recorded: Path) -> None:
    ds = open_experiment(recorded)
    doc = json.loads(ds.attrs["fct_ideal"])
    # no testbed: the base RTT is the smallest min_rtt the transactions' connections saw, and no burst
    assert doc["base_rtt_s"] == pytest.approx(float(np.nanmin(ds.txn_min_rtt.values)) / 1e6)
    assert doc["burst_bytes"] == 0
    want = doc["base_rtt_s"] + (ds.txn_req + ds.txn_reply) * 8 / 1e9
    assert np.allclose(ds.txn_ideal.values, want.values)
    assert np.allclose(ds.txn_slowdown.values, ds.txn_fct.values / want.values)
    # a lab's numbers given afterwards
    again = recompute(ds, rate=100e6, base_rtt=0.02, burst=0)
    assert np.allclose(again.txn_ideal.values, 0.02 + (again.txn_size.values * 8 / 100e6))
    assert json.loads(again.attrs["fct_ideal"])["base_rtt_s"] == 0.02


@pytest.mark.netns
def test_tables_by_size_and_across_experiments(recorded: Path) -> None:
    ds = open_experiment(recorded)
    table = fct_table(ds)
    assert table["count"].sum() == ds.sizes["txn"] == table["completed"].sum()
    assert (table["slowdown_p99"] >= table["slowdown_p50"]).all() and (table["fct_p99_ms"] >= table["fct_p50_ms"]).all()
    both = fct_compare({"cubic": ds, "again": recompute(ds, rate=100e6)}, label="ca")
    assert list(both["ca"].unique()) == ["cubic", "again"] and len(both) == 2 * len(table)
    with pytest.raises(ValueError, match="no transactions"):
        fct_table(ds.drop_dims("txn"))


@pytest.mark.netns
def test_the_page_block_counts_every_transaction(recorded: Path) -> None:
    ds = open_experiment(recorded)
    rows = page_rows(ds)
    counts = {c["flow"]: c for c in rows["fct_counts"]}
    for c in counts.values():
        assert c["started"] == c["completed"] + c["failed"] and c["arrivals"] == c["started"] + c["refused"]
    assert "open loop at load 0.5, seed 5" in counts["h1-h2-2-0"]["draws"]
    assert "cdf(websearch,scale=0.01)" in counts["h1-h2-2-0"]["draws"]
    page = (recorded / "exp.html").read_text()
    assert 'id="fct"' in page and 'id="fct-buckets"' in page and 'id="fct-slowdown"' in page


@pytest.mark.netns
def test_an_experiment_without_transactions_is_unchanged(recorded: Path) -> None:
    from netesto.results import load_experiment

    ds = open_experiment(recorded)
    raw = load_experiment(recorded)
    raw.flows = [r for r in raw.flows if r.flow_id == "h1-h2-3-0"]
    assert add_transactions(ds.drop_dims("txn"), raw).sizes.get("txn") is None
    assert page_rows(ds.drop_dims("txn"))["fct_counts"] == []
