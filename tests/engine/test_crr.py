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


@pytest.mark.alone
def test_crr_twice_back_to_back_keeps_its_rate(veth_pair, tmp_path):
    pair = veth_pair
    pair.run(pair.a, ["sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={PORTS}"]).check_returncode()
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    try:
        first, _ = crr_run(pair, server, tmp_path, "a-b-crr-0")
        runs = [crr_run(pair, server, tmp_path, "a-b-crr-1")]
        # A neighbour's burst on these shared CPUs can slow one 1.5 s run by more than 20 %; the collapse
        # this guards against (the first run's TIME_WAITs using up the ports) slows every later run, more
        # and more: a third run back to back tells them apart.
        if runs[0][0]["tps"] < 0.8 * first["tps"]:
            runs.append(crr_run(pair, server, tmp_path, "a-b-crr-2"))
    finally:
        server.events()
    assert first["transactions"] > 100
    for later, srv in runs:
        assert later["status"] == "ok" and srv["status"] == "ok", (later["error"], srv["error"])
        assert later["connections"] == later["transactions"] == srv["connections"] == srv["transactions"]
    # Beside two busy loops a run's rate takes one of two modes, 8-11k or 18-35k transactions/s (where the
    # scheduler puts the two ends beside the loops), whatever ran before it: a first run in the high mode and
    # two later ones in the low kept 0.27 of its rate. The collapse is another order: with the ports in
    # TIME_WAIT (crr_close="client" on this range) the first run already fails, "cannot assign requested
    # address", and a later one would be held to the ports' 60 s expiry (83 connections/s for 5000 ports).
    assert max(later["tps"] for later, _ in runs) >= 0.2 * first["tps"], (first["tps"], [r["tps"] for r, _ in runs])


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
    # What is not in a latency is Python's work at each sample (a transaction's clock stops there and
    # restarts when the loop takes the next one): 3 % of the flow quietly, and more when a neighbour takes
    # the CPU in the middle of it (0.9696 with four test workers). A latency that left out the connect
    # (one round trip of the two) would sum to little more than half the flow's duration.
    assert busy >= 0.9 * cli["duration"], (busy, cli["duration"])


def time_waits(pair, ns: str) -> int:
    out = pair.run(ns, ["ss", "-H", "-t", "-n", "state", "time-wait"]).stdout
    return len([line for line in out.splitlines() if line.strip()])


@pytest.mark.parametrize("close, waits_on", [("rst", None), ("client", "a"), ("server", "b")])
def test_crr_close_policy_says_who_keeps_time_wait(veth_pair, tmp_path, close, waits_on):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    try:
        cli, srv = crr_run(pair, server, tmp_path, "a-b-crr-0", crr_close=close, reply=3000)
    finally:
        server.events()
    assert cli["status"] == srv["status"] == "ok", (cli["error"], srv["error"])
    assert cli["connections"] == cli["transactions"] == srv["connections"] == srv["transactions"] > 100
    assert cli["bytes_rx"] == srv["bytes_tx"] == 3000 * cli["transactions"]
    waits = {"a": time_waits(pair, pair.a), "b": time_waits(pair, pair.b)}
    for ns, n in waits.items():
        if ns == waits_on:  # (a new namespace keeps at most a few hundred: tcp_max_tw_buckets)
            assert n >= min(cli["transactions"] * 0.9, 400), waits
        else:
            assert n <= 2, waits  # the control connection's
