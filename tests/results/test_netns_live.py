"""Re-record real flows between two namespaces and process them (fresh data)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from record_fixtures import record  # noqa: E402

from netesto.results import open_experiment, process_experiment  # noqa: E402
from netesto.results.summaries import parse_exp_out  # noqa: E402

pytestmark = pytest.mark.netns


def test_live_flows_between_namespaces(veth_pair, tmp_path: Path) -> None:
    pair = veth_pair
    record(tmp_path, 7, "mixed", server_addr=pair.addr_b,
           client_prefix=["ip", "netns", "exec", pair.a],
           server_prefix=["ip", "netns", "exec", pair.b])
    res = process_experiment(tmp_path, 7)
    assert res.ok, res.errors
    ds = open_experiment(tmp_path / "7")
    assert ds.sizes["flow"] == 3 and list(ds.ca.values) == ["cubic", "bbr", "cubic"]
    for fid in ds.flow.values:
        f = ds.sel(flow=fid)
        # 1 s flows; a CPU-starved end only ends late
        assert 0.85 <= float(f.duration) <= 1.5
        assert float(f.rate) > 0 and float(f.mean_rtt) > 0
        assert int(f.remote_port) > 0 and int(f.local_port) > 0
        bits = float(f.goodput.fillna(0).sum()) * ds.attrs["interval"]
        assert bits == pytest.approx(float(f.bytes) * 8, rel=1e-6)
    # what sampling cost each end's worker, from the flow summaries
    from netesto.results import load_experiment

    for rec in load_experiment(tmp_path / "7").flows:
        for var, end in (("local_sampling_cpu", rec.client), ("remote_sampling_cpu", rec.server)):
            got = float(ds[var].sel(flow=rec.flow_id))
            assert got == end.summary["cpu"]["sampling_percent"] and 0 < got < 100
    # veth0 carried the flows: the client's interface counters saw them.
    v = dict(parse_exp_out((tmp_path / "7" / "h1-h2-1.exp.out").read_text())[0])
    assert int(v["client-tx-bytes"]) >= float(ds.bytes.sel(flow="h1-h2-1-0"))
    assert int(v["pingRtt"]) > 0
    assert float(ds.host_delta.sel(node="h1", counter="Tcp.OutSegs")) > 0
    # packetsSent is the kernel's data segment count when the engine records it.
    from netesto.raw.columns import FLOW_COLUMNS

    recorded = "data_segs_out" in {c.name for c in FLOW_COLUMNS}
    for rec in load_experiment(tmp_path / "7").flows:
        assert ("data_segs_out" in rec.client.columns) == recorded
        if recorded:
            segs = rec.client.columns["data_segs_out"][-1]
            mss = rec.client.columns["snd_mss"][-1]
            assert float(ds.packets_sent.sel(flow=rec.flow_id)) == segs
            assert segs >= float(ds.bytes_sent.sel(flow=rec.flow_id)) / mss * 0.99


def test_live_directions_maerts_bidir_crr(veth_pair, tmp_path: Path) -> None:
    """The data direction decides goodput and whose TCP state is shown."""
    pair = veth_pair
    record(tmp_path, 8, "directions", server_addr=pair.addr_b,
           client_prefix=["ip", "netns", "exec", pair.a],
           server_prefix=["ip", "netns", "exec", pair.b])
    from netesto.results import load_experiment

    raw = load_experiment(tmp_path / "8")
    ds = open_experiment(tmp_path / "8")
    by = {r.flow_id: r for r in raw.flows}
    # TCP_MAERTS: the server sends; the client receives what the server sent.
    m = by["h1-h2-1-0"]
    assert float(ds.bytes.sel(flow="h1-h2-1-0")) == m.client.summary["bytes_rx"] == m.server.summary["bytes_tx"] > 0
    assert float(ds.retrans_total.sel(flow="h1-h2-1-0")) == m.server.columns["total_retrans"][-1]
    assert float(ds.packets_sent.sel(flow="h1-h2-1-0")) >= m.server.summary["bytes_tx"] / 65536
    # TCP_BIDIR: the forward (client -> server) direction is the flow's data.
    b = by["h1-h2-2-0"]
    assert float(ds.bytes.sel(flow="h1-h2-2-0")) == b.server.summary["bytes_rx"] > 0
    # TCP_CRR: transactions (one connection each) and their latencies.
    c = ds.sel(flow="h1-h2-3-0")
    assert float(c.transactions_total) == by["h1-h2-3-0"].client.summary["transactions"] > 10
    assert float(c.lat_count) == by["h1-h2-3-0"].client.summary["latency_us"]["count"]
    assert float(c.transactions.mean()) > 0
    for fid in ds.flow.values:
        bits = float(ds.goodput.sel(flow=fid).fillna(0).sum()) * ds.attrs["interval"]
        assert bits == pytest.approx(float(ds.bytes.sel(flow=fid)) * 8, rel=1e-6)
