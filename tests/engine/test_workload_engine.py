"""Drawn TCP_RR and TCP_CRR flows between two namespaces: the sizes and gaps on the wire are the seed's draws,
both ends count the same bytes, and every transaction is accounted for, also when the client is stopped."""

from __future__ import annotations

import math
import signal
import time

import pytest

from netesto.engine.kinds.workload import HEAD, Requests
from netesto.raw.nflow import read_flow
from netesto.workload import TIME, Workload, parse
from tests.engine.test_engine import Server, ends, run_client, spec, start_client, terminal, wait_started

pytestmark = pytest.mark.netns

WEB = ("cdf(label=websearch,scale=0.01,points=0:0;10000:0.15;20000:0.2;30000:0.3;50000:0.4;80000:0.53;"
       "200000:0.6;1000000:0.7;2000000:0.8;5000000:0.9;10000000:0.97;30000000:1)")


def txns(tmp, flow_id: str):
    """The flow's transaction log, its rows (written as transactions end) in draw order."""
    log = read_flow(tmp / "cli" / "0" / "flows" / f"{flow_id}.txn.nflow")
    order = sorted(range(log.rows), key=lambda i: log.columns["seq"][i])
    log.columns.update({k: [v[i] for i in order] for k, v in log.columns.items()})
    return log


def expected(s: dict, n: int) -> list[tuple[int, int, float]]:
    w = Workload.of(s.get("req_dist", ""), s.get("reply_dist", ""), s.get("gap", ""), s["seed"], s.get("stream", 0))
    return w.draws(s.get("req", 1), s.get("reply", 1)).take(n)


@pytest.mark.alone
def test_drawn_flows_send_the_seeds_sizes_and_both_ends_agree(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    specs = [
        spec(server, "a-b-1-0", "TCP_RR", dur=1.5, req_dist="exp(mean=2000)",
             reply_dist="lognormal(mean=20000,sigma=1)", gap="exp(mean=1ms)", seed=5),
        spec(server, "a-b-2-0", "TCP_CRR", dur=1.5, req_dist=WEB, gap="exp(mean=4ms)", open_loop=True, seed=5,
             stream=1),
        spec(server, "a-b-3-0", "TCP_CRR", dur=1.5, req=100, reply_dist="uniform(min=1,max=300000)", seed=6,
             crr_close="server"),
    ]
    try:
        code, events = run_client(pair, pair.a, tmp_path, specs)
        server.wait_done(len(specs))
    finally:
        server.events()
    assert code == 0, [e for e in events if e["event"] == "error"]
    done = terminal(events)
    for s in specs:
        fid = s["flow_id"]
        cli, srv = ends(tmp_path, fid)
        log = txns(tmp_path, fid)
        n = log.rows
        c = log.columns
        assert n > 20, fid
        # the wire carried the draws of the seed, in order
        want = expected(s, n)
        assert list(c["seq"]) == list(range(n))
        assert [(r, p) for r, p, _ in want] == list(zip(c["req"], c["reply"])), fid
        assert set(c["status"]) == {0}, fid  # all completed on a quiet pair
        # both ends count the same transactions and bytes: a header (16 bytes) and the payload each way in
        assert cli.summary["transactions"] == srv.summary["transactions"] == n
        assert srv.summary["bytes_rx"] == sum(c["req"]) + HEAD.size * n == cli.summary["bytes_tx"]
        assert cli.summary["bytes_rx"] == sum(c["reply"]) == srv.summary["bytes_tx"]
        # the flow's summary and header say how it drew
        txn = done[fid]["summary"]["txn"]
        assert txn["started"] == txn["completed"] + txn["failed"] == n and txn["arrivals"] == n
        assert cli.header["workload"]["seed"] == s["seed"] and cli.header["flow"]["seed"] == s["seed"]
        assert all(0 <= f < 1 for f in c["fct"]) and all(late >= -1e-3 for late in
                                                         (a - b for a, b in zip(c["t_start"], c["t_due"])))
    # open loop: arrival i is due gap[i] after arrival i - 1, whatever became of it
    c = txns(tmp_path, "a-b-2-0").columns
    gaps = [g for _, _, g in expected(specs[1], len(c["seq"]))]
    for i in range(1, len(gaps)):
        assert c["t_due"][i] - c["t_due"][i - 1] == pytest.approx(gaps[i], abs=2e-4)
    assert 1.5 / parse("exp(mean=4ms)", TIME).mean * 0.6 < len(gaps)  # ~375 arrivals in 1.5 s
    # closed loop: each request waits for the reply before it and its gap
    c = txns(tmp_path, "a-b-1-0").columns
    gaps = [g for _, _, g in expected(specs[0], len(c["seq"]))]
    for i in range(1, len(gaps)):
        assert c["t_due"][i] >= c["t_start"][i - 1] + c["fct"][i - 1] + gaps[i] - 1e-3
    # TCP_CRR: a connection per transaction, its min_rtt read
    c = txns(tmp_path, "a-b-3-0").columns
    assert all(r > 0 for r in c["min_rtt"]) and all(x > 0 for x in c["connect"])


def test_a_stopped_open_loop_client_accounts_for_every_transaction(veth_pair, tmp_path):
    """SIGTERM while transactions are in flight: the log is complete (started = completed + failed, those open
    counted unfinished) and the flow's file says how it ended."""
    pair = veth_pair
    pair.run(pair.b, ["tc", "qdisc", "add", "dev", "veth0", "root", "tbf", "rate", "20mbit", "burst", "20k",
                      "latency", "200ms"]).check_returncode()  # slow replies: some are always in flight
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv")
    s = spec(server, "a-b-1-0", "TCP_CRR", dur=5, req=64, reply_dist="exp(mean=100000)", gap="exp(mean=10ms)",
             open_loop=True, seed=1)
    try:
        client = start_client(pair, pair.a, tmp_path, [s])
        wait_started(client, 1)
        time.sleep(1.0)
        client.send_signal(signal.SIGTERM)
        out, _ = client.communicate(timeout=20)
    finally:
        server.events()
    log = txns(tmp_path, "a-b-1-0")
    assert log.summary is not None and not log.truncated
    status = list(log.columns["status"])
    summary = log.summary
    assert summary["started"] == summary["completed"] + summary["failed"] == len(status)
    assert summary["completed"] == status.count(0) > 10 and summary["unfinished"] == status.count(2) > 0
    unfinished = [f for f, st in zip(log.columns["fct"], status) if st == 2]
    assert all(math.isnan(f) for f in unfinished)
    cli = read_flow(tmp_path / "cli" / "0" / "flows" / "a-b-1-0.client.nflow")
    assert cli.summary["status"] == "error" and "stopped by SIGTERM" in cli.summary["error"]
    assert cli.summary["txn"]["unfinished"] == summary["unfinished"]


def test_the_server_reads_requests_however_they_are_cut() -> None:
    reqs = Requests()
    wire = HEAD.pack(5, 7) + b"abcde" + HEAD.pack(0, 3) + HEAD.pack(100_000, 9) + bytes(100_000)
    got = [reqs.feed(memoryview(wire[i:i + 7])) for i in range(0, len(wire), 7)]
    assert (sum(d for d, _ in got), sum(o for _, o in got)) == (3, 19)
    with pytest.raises(ValueError, match="asking for 0"):
        Requests().feed(memoryview(HEAD.pack(1, 0)))
    with pytest.raises(ValueError):
        Requests().feed(memoryview(HEAD.pack(1 << 40, 1)))
