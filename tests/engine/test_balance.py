"""A multi-process server spreads new flows evenly over its workers (LoadBoard, hand-off)."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from netesto.engine.core.balance import LoadBoard
from tests.engine.test_engine import Server, ends, run_client, spec


def test_board_prefers_the_least_loaded_worker_and_itself_on_ties():
    board = LoadBoard(3)
    assert board.choose(1) == 1  # all idle: keep it
    board.set_live(1, 2)
    board.set_live(0, 1)
    assert board.choose(1) == 2
    board.set_live(2, 1)
    assert board.choose(1) == 0  # 0 and 2 tie: the first of them
    assert board.choose(2) == 2


def test_board_counts_hellos_on_their_way():
    board = LoadBoard(2)
    board.hand(0, 1)
    board.hand(0, 1)
    assert board.load(1) == 2 and board.choose(0) == 0
    board.receive(1)
    board.set_live(1, 1)  # one arrived and runs; one still on its way
    assert board.load(1) == 2
    board.hand(0, 1, -1)  # a hand-off that failed is taken back
    assert board.load(1) == 1


def test_board_is_shared_across_fork():
    board = LoadBoard(2)
    pid = os.fork()
    if pid == 0:
        board.set_live(1, 5)
        board.hand(1, 0)
        os._exit(0)
    os.waitpid(pid, 0)
    assert board.load(1) == 5 and board.load(0) == 1


@pytest.mark.netns
def test_four_flows_spread_two_per_worker(veth_pair, tmp_path):
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "2")
    specs = [spec(server, f"a-b-0-{i}", "TCP_STREAM", dur=1.0) for i in range(4)]
    code, events = run_client(pair, pair.a, tmp_path, specs)
    assert code == 0, [e for e in events if e["event"] == "error"]
    pids = Counter()
    for s in specs:
        cli, srv = ends(tmp_path, s["flow_id"])
        assert cli.summary["bytes_tx"] == srv.summary["bytes_rx"] > 0
        pids[srv.header["pid"]] += 1
    assert sorted(pids.values()) == [2, 2], pids
    assert sum(e["event"] == "done" for e in server.events()) == len(specs)


@pytest.mark.netns
def test_default_server_runs_one_worker_per_cpu(veth_pair, tmp_path):
    server = Server(veth_pair, veth_pair.b, veth_pair.addr_b, tmp_path / "srv")
    server.events()
    assert server.first["workers"] == min(8, len(os.sched_getaffinity(0)))
