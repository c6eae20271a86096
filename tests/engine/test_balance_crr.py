"""TCP_CRR flows get server workers of their own when there are enough (LoadBoard), and keep their rate."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter

import pytest

from netesto.engine.native import crrfast
from netesto.engine.core.balance import CRR_WEIGHT, LoadBoard, deal
from tests.engine.test_engine import ENGINE, Server, ends, spec, wait_started


def test_board_gives_crr_its_own_worker():
    board = LoadBoard(2)
    board.set_live(0, 1)  # a stream came first
    assert board.choose(0, crr=True) == 1
    board.set_live(1, 1, crr=1)
    # other flows keep off the CRR worker, even when it is the less loaded ...
    board.set_live(0, CRR_WEIGHT - 1)
    assert board.choose(1) == 0 and board.choose(0) == 0
    # ... until theirs is busier than a CRR flow weighs
    board.set_live(0, CRR_WEIGHT + 1)
    assert board.choose(0) == 1
    # a second CRR flow: where the fewest other flows run
    assert board.choose(0, crr=True) == 1


def test_board_with_crr_flows_everywhere_balances_as_before():
    board = LoadBoard(2)
    board.set_live(0, 1, crr=1)
    board.set_live(1, 2, crr=1)
    assert board.choose(1) == 0  # every worker has a CRR flow: the least loaded
    assert board.choose(0, crr=True) == 0


def test_the_client_deals_crr_flows_workers_of_their_own():
    assert deal(["TCP_CRR", "TCP_STREAM", "TCP_STREAM", "TCP_RR"], 2) == [[0], [1, 2, 3]]
    assert deal(["TCP_STREAM", "TCP_CRR", "TCP_CRR"], 2) == [[0, 1], [2]]  # one CRR flow each first
    assert deal(["TCP_CRR"] + ["TCP_STREAM"] * 6, 2) == [[0, 5], [1, 2, 3, 4, 6]]  # a CRR flow weighs 3
    assert deal(["TCP_STREAM"] * 5, 3) == [[0, 3], [1, 4], [2]]  # as the round robin did
    assert deal(["TCP_CRR"], 1) == [[0]] and deal([], 2) == [[], []]


PACING = 100_000_000  # bits/s: bulk senders that leave the 2 CPUs room to run the CRR flow at all


def run_specs(pair, tmp_path, specs: list[dict], name: str, background: bool = False):
    """The engine's client running ``specs``, every flow in a worker of its own."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(specs))
    argv = [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp_path / "cli"), "--workers", str(len(specs))]
    if background:
        return pair.popen(pair.a, argv, stdout=subprocess.PIPE, text=True)
    proc = pair.run(pair.a, argv, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:]
    return proc


def crr_tps(pair, server: Server, tmp_path, name: str, streams: int) -> tuple[float, list]:
    """The CRR flow's rate (3 s) beside ``streams`` paced bulk senders (2 s, from its 0.5th s on): the CRR
    flow's hello comes first, as its worker is chosen then (no placement moves a running flow)."""
    crr = [spec(server, f"a-b-{name}-0", "TCP_CRR", dur=3.0)]
    bulk = [spec(server, f"a-b-{name}s{i}-0", "TCP_STREAM", dur=2.0, pacing=PACING) for i in range(streams)]
    client = run_specs(pair, tmp_path, crr, name, background=True)
    wait_started(client, 1)
    if bulk:
        time.sleep(0.5)
        run_specs(pair, tmp_path, bulk, name + "s")
    client.communicate(timeout=30)
    assert client.returncode == 0
    server.wait_done(1 + streams + sum(e["event"] in ("done", "error") for e in server.seen))
    flows = [ends(tmp_path, s["flow_id"]) for s in crr + bulk]
    for cli, srv in flows:
        assert cli.summary["status"] == srv.summary["status"] == "ok"
        assert cli.summary["bytes_tx"] == srv.summary["bytes_rx"]
    return flows[0][0].summary["tps"], flows


@pytest.mark.netns
def test_crr_beside_bulk_senders_gets_a_server_worker_of_its_own(veth_pair, tmp_path):
    """The server places a CRR flow, then three bulk senders: they keep off the CRR flow's worker.

    No rate is compared: beside senders paced to 100 Mbit/s a CRR flow sharing its worker keeps
    ~90 % of its rate too, while two busy loops beside the suite spread its rate alone over 3x
    (5.8-16.9 k/s in one run), so a rate bar tests the scheduler, not the placement."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "2")
    try:
        tps, flows = crr_tps(pair, server, tmp_path, "beside", 3)
    finally:
        server.events()
    pids = Counter(srv.header["pid"] for _, srv in flows)
    assert len(pids) == 2 and pids[flows[0][1].header["pid"]] == 1, pids
    cli, srv = flows[0]
    assert tps > 0 and cli.summary["transactions"] == srv.summary["transactions"]


@pytest.mark.netns
@pytest.mark.skipif(crrfast.ext is None, reason="the CRR C loop is not built or not allowed")
def test_a_crr_flow_among_others_of_one_client_runs_in_c(veth_pair, tmp_path):
    """One client process, 2 workers, the CRR flow listed between paced bulk senders: it gets a
    worker of its own, where its transactions run in C (round robin put a stream beside it)."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "2")
    specs = [spec(server, "a-b-s0-0", "TCP_STREAM", dur=1.5, pacing=PACING),
             spec(server, "a-b-c-0", "TCP_CRR", dur=1.5),
             spec(server, "a-b-s1-0", "TCP_STREAM", dur=1.5, pacing=PACING)]
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    try:
        proc = pair.run(pair.a, [*ENGINE, "client", "--specs", str(path), "--datadir", str(tmp_path / "cli"),
                                 "--workers", "2"], timeout=60)
        assert proc.returncode == 0, proc.stdout[-2000:]
        server.wait_done(3)
    finally:
        server.events()
    cli, srv = ends(tmp_path, "a-b-c-0")
    pids = Counter(ends(tmp_path, s["flow_id"])[0].header["pid"] for s in specs)
    assert pids[cli.header["pid"]] == 1, pids
    assert cli.summary["rr_loop"] == "C" and cli.summary["transactions"] == srv.summary["transactions"] > 0
