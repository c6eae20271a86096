"""iperf3 driver: parsing of real iperf3 3.12 JSON, and real flows between namespaces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from netesto.errors import TrafficError
from netesto.drivers import iperf3
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import read_flow
from netesto.protocol.flowspec import FlowSpec

DATA = Path(__file__).parents[1] / "data"


def doc(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def spec(test: str = "TCP_STREAM", **kw) -> FlowSpec:
    kw.setdefault("dur", 2)
    return FlowSpec("a-b-1-0", test, kw.pop("server", "10.0.0.2"), kw.pop("port", 5201), **kw)


@pytest.mark.parametrize(
    "name, test, tx_key, rx_key",
    [
        ("iperf3_tcp_cubic.json", "TCP_STREAM", "sum_sent", None),
        ("iperf3_tcp_reverse.json", "TCP_MAERTS", None, "sum_received"),
        ("iperf3_tcp_bidir.json", "TCP_BIDIR", "sum_sent", "sum_received_bidir_reverse"),
        ("iperf3_udp.json", "UDP_STREAM", "sum_sent", None),
    ],
)
def test_rows_add_up_to_iperf3_totals(name, test, tx_key, rx_key):
    d = doc(name)
    rows = iperf3.interval_rows(d["intervals"], 1000.0, 5.0, 1448)
    assert len(rows) == len(d["intervals"])
    summary = iperf3.client_summary(d, spec(test))
    assert summary["status"] == "ok" and summary["tool_version"] == "iperf 3.12"
    end = d["end"]
    if tx_key:
        assert rows[-1]["app_bytes_tx"] == summary["bytes_tx"] == end[tx_key]["bytes"] > 0
    else:
        assert rows[-1]["app_bytes_tx"] == summary["bytes_tx"] == 0
    if rx_key:
        assert summary["bytes_rx"] == end[rx_key]["bytes"] > 0
        assert abs(rows[-1]["app_bytes_rx"] - summary["bytes_rx"]) <= 0.01 * summary["bytes_rx"]
    times = [r["t_wall"] for r in rows]
    assert times == sorted(times) and times[0] > 1000.0
    assert rows[0]["t_mono"] - rows[0]["t_wall"] == pytest.approx(5.0)


def test_tcp_state_from_sender_stream():
    d = doc("iperf3_tcp_cubic.json")
    first = d["intervals"][0]["streams"][0]
    rows = iperf3.interval_rows(d["intervals"], 0.0, 0.0, 1448)
    assert rows[0]["snd_cwnd"] == math.ceil(first["snd_cwnd"] / 1448)
    assert (rows[0]["rtt"], rows[0]["rttvar"], rows[0]["pmtu"]) == (first["rtt"], first["rttvar"], 1500)
    retrans = sum(i["streams"][0]["retransmits"] for i in d["intervals"])
    assert rows[-1]["total_retrans"] == retrans == d["end"]["sum_sent"]["retransmits"]
    summary = iperf3.client_summary(d, spec())
    assert summary["ca"] == "cubic" and summary["cpu"]["percent"] > 0
    assert set(rows[0]) <= {c.name for c in FLOW_COLUMNS}


def test_maerts_client_has_no_tcp_state_but_server_output_does():
    d = doc("iperf3_tcp_maerts_server.json")
    client = iperf3.interval_rows(d["intervals"], 0.0, 0.0, 1448)
    assert "snd_cwnd" not in client[0] and client[-1]["app_bytes_rx"] > 0
    server = iperf3.interval_rows(d["server_output_json"]["intervals"], 0.0, 0.0, 1448)
    assert server[0]["snd_cwnd"] > 0 and server[0]["rtt"] > 0
    assert server[-1]["app_bytes_tx"] == d["server_output_json"]["end"]["sum_sent"]["bytes"]


def test_udp_summary_counts_loss():
    summary = iperf3.client_summary(doc("iperf3_udp.json"), spec("UDP_STREAM", rate=50_000_000))
    assert summary["udp_sent"] == doc("iperf3_udp.json")["end"]["sum"]["packets"] > 0
    assert summary["udp_lost"] == 0 and summary["ca"] == ""
    assert summary["rate_tx_bps"] == pytest.approx(50e6, rel=0.05)


def test_refused_json_is_error():
    summary = iperf3.client_summary(doc("iperf3_refused.json"), spec())
    assert summary["status"] == "error" and "Connection refused" in summary["error"]
    assert iperf3.interval_rows(doc("iperf3_refused.json")["intervals"], 0, 0, 1448) == []


@pytest.mark.parametrize(
    "kw, expected",
    [
        ({}, ["-C", "cubic"]),
        ({"test": "TCP_BIDIR", "ca": "bbr"}, ["-C", "bbr", "--bidir"]),
        ({"test": "UDP_STREAM", "rate": 10**8}, ["-u", "-b", "100000000"]),
        ({"local_buffer": 65536, "pacing": 10**9}, ["-w", "65536", "--fq-rate", "1000000000"]),
    ],
)
def test_argv(kw, expected):
    argv = iperf3.iperf3_argv(spec(kw.pop("test", "TCP_STREAM"), interval=0.5, **kw))
    assert argv[:10] == ["iperf3", "-c", "10.0.0.2", "-p", "5201", "-t", "2", "-J", "-i", "0.5"]
    text = " ".join(argv)
    assert " ".join(expected) in text


@pytest.mark.parametrize("test", ["TCP_RR", "TCP_CRR", "UDP_RR"])
def test_rr_tests_are_unsupported(test, tmp_path):
    with pytest.raises(TrafficError, match=f"driver iperf3 does not support {test}"):
        iperf3.run_flow(spec(test), tmp_path)


def test_missing_iperf3_is_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TrafficError, match=r"iperf3 not found on PATH; install it \(apt-get install iperf3\)"):
        iperf3.run_flow(spec(), tmp_path)
    with pytest.raises(TrafficError, match="iperf3 not found"):
        iperf3.start_server(5201)


@pytest.mark.netns
def test_real_flow_between_namespaces(veth_pair, tmp_path):
    server = iperf3.start_server(5211, argv_prefix=["ip", "netns", "exec", veth_pair.b])
    events: list[dict] = []
    try:
        s = spec(server=veth_pair.addr_b, port=5211, ca="cubic", exp=7, interval=0.2)
        ok = iperf3.run_flow(s, tmp_path, events.append,
                             argv_prefix=["ip", "netns", "exec", veth_pair.a])
    finally:
        iperf3.stop_server(server)
    assert ok, events
    assert [e["event"] for e in events] == ["started", "done"]
    flow = read_flow(tmp_path / "7" / "flows" / "a-b-1-0.client.nflow")
    assert flow.header["driver"] == "iperf3" and flow.header["tool_version"].startswith("iperf 3")
    assert flow.summary["status"] == "ok" and flow.summary["ca"] == "cubic"
    total = flow.summary["bytes_tx"]
    assert total == events[-1]["bytes_tx"] > 10_000_000
    assert flow.columns["app_bytes_tx"][-1] == total  # rows add up to iperf3's own total
    assert 8 <= flow.rows <= 12  # 2 s at 0.2 s
    assert all(c > 0 for c in flow.columns["snd_cwnd"])
    assert all(r > 0 for r in flow.columns["rtt"])
    assert set(flow.columns) == {c.name for c in FLOW_COLUMNS}
    assert sum(flow.columns["lat_p99"]) == 0  # not given by iperf3: zeros
    wall = list(flow.columns["t_wall"])
    assert wall[-1] - wall[0] == pytest.approx(1.8, abs=0.15)
    srv = read_flow(tmp_path / "7" / "flows" / "a-b-1-0.server.nflow")
    assert srv.header["side"] == "server"
    assert srv.columns["app_bytes_rx"][-1] == pytest.approx(total, rel=0.01)


@pytest.mark.netns
def test_no_server_fails_with_host_and_port(veth_pair, tmp_path):
    events: list[dict] = []
    s = spec(server=veth_pair.addr_b, port=5212, dur=1)
    ok = iperf3.run_flow(s, tmp_path, events.append, argv_prefix=["ip", "netns", "exec", veth_pair.a])
    assert not ok
    assert events[-1]["event"] == "error"
    assert f"{veth_pair.addr_b}:5212" in events[-1]["error"]
    assert "refused" in events[-1]["error"]
    flow = read_flow(tmp_path / "0" / "flows" / "a-b-1-0.client.nflow")
    assert flow.summary["status"] == "error" and flow.rows == 0


@pytest.mark.netns
def test_server_port_in_use_is_clear(veth_pair):
    first = iperf3.start_server(5213, argv_prefix=["ip", "netns", "exec", veth_pair.b])
    try:
        with pytest.raises(TrafficError, match="TCP port 5213 is already in use"):
            iperf3.start_server(5213, argv_prefix=["ip", "netns", "exec", veth_pair.b])
    finally:
        iperf3.stop_server(first)
    assert first.poll() is not None


@pytest.mark.netns
def test_engine_client_runs_iperf3_flows(veth_pair, tmp_path):
    """The engine's ``client`` entry point hands driver=iperf3 flows to this driver."""
    import subprocess
    import sys

    server = iperf3.start_server(5214, argv_prefix=["ip", "netns", "exec", veth_pair.b])
    specs = tmp_path / "specs.json"
    s = spec(server=veth_pair.addr_b, port=5214, dur=1, driver="iperf3", exp=3, interval=0.25)
    specs.write_text(json.dumps([s.to_dict()]))
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["ip", "netns", "exec", veth_pair.a, sys.executable, "-m", "netesto.engine", "client",
             "--specs", str(specs), "--datadir", str(tmp_path)],
            capture_output=True, text=True, timeout=30, cwd=root,
        )
    finally:
        iperf3.stop_server(server)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    done = [e for e in events if e["event"] == "done"]
    assert len(done) == 1 and done[0]["flow"] == "a-b-1-0" and done[0]["driver"] == "iperf3"
    flow = read_flow(tmp_path / "3" / "flows" / "a-b-1-0.client.nflow")
    assert flow.columns["app_bytes_tx"][-1] == done[0]["bytes_tx"] > 0
