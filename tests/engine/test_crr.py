"""TCP_CRR between two namespaces: back-to-back runs keep their rate; a transaction's latency includes its close."""

from __future__ import annotations

import pytest

from tests.engine.test_engine import Server, ends, run_client, spec

pytestmark = pytest.mark.netns

# A narrow ephemeral range on the client: connections left in TIME_WAIT by the
# first run would use it up during the second (today's kernels keep them 60 s).
PORTS = "40000 44999"


def crr_run(pair, server: Server, tmp_path, flow_id: str, **kw) -> tuple[dict, dict]:
    code, events = run_client(pair, pair.a, tmp_path, [spec(server, flow_id, "TCP_CRR", dur=1.5, **kw)])
    assert code == 0, [e for e in events if e["event"] == "error"]
    server.wait_done(1 + len([s for s in server.seen if s["event"] in ("done", "error")]))
    cli, srv = ends(tmp_path, flow_id)
    return cli.summary, srv.summary


@pytest.mark.xfail(reason="TIME_WAIT piles up on the client, which closes first", strict=False)
def test_crr_twice_back_to_back_keeps_its_rate(veth_pair, tmp_path):
    pair = veth_pair
    pair.run(pair.a, ["sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={PORTS}"]).check_returncode()
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    try:
        first, _ = crr_run(pair, server, tmp_path, "a-b-crr-0")
        second, srv = crr_run(pair, server, tmp_path, "a-b-crr-1")
    finally:
        server.events()
    assert first["transactions"] > 100
    assert second["status"] == "ok" and srv["status"] == "ok", (second["error"], srv["error"])
    assert second["tps"] >= 0.8 * first["tps"], (first["tps"], second["tps"])
    assert second["connections"] == second["transactions"] == srv["connections"] == srv["transactions"]


def test_crr_latency_counts_the_whole_transaction(veth_pair, tmp_path):
    """connect + request + reply + close: one transaction follows another, so the
    latencies add up to (nearly) the flow's whole duration."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    try:
        cli, _ = crr_run(pair, server, tmp_path, "a-b-crr-0")
    finally:
        server.events()
    lat = cli["latency_us"]
    assert lat["count"] == cli["transactions"] > 100
    busy = lat["mean"] * lat["count"] / 1e6
    assert busy >= 0.97 * cli["duration"], (busy, cli["duration"])
