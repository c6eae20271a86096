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
        assert float(f.duration) == pytest.approx(1.0, abs=0.15)
        assert float(f.rate) > 0 and float(f.mean_rtt) > 0
        assert int(f.remote_port) > 0 and int(f.local_port) > 0
        bits = float(f.goodput.fillna(0).sum()) * ds.attrs["interval"]
        assert bits == pytest.approx(float(f.bytes) * 8, rel=1e-6)
    # veth0 carried the flows: the client's interface counters saw them.
    v = dict(parse_exp_out((tmp_path / "7" / "h1-h2-1.exp.out").read_text())[0])
    assert int(v["client-tx-bytes"]) >= float(ds.bytes.sel(flow="h1-h2-1-0"))
    assert int(v["pingRtt"]) > 0
    assert float(ds.host_delta.sel(node="h1", counter="Tcp.OutSegs")) > 0
