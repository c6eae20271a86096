"""A multi-process server spreads new flows evenly over its workers (LoadBoard, hand-off)."""

from __future__ import annotations

import os
import socket
from collections import Counter

import pytest

from netesto.engine.core import handshake as hs
from netesto.engine.core.balance import LoadBoard
from netesto.engine.core.loop import Loop
from netesto.engine.serve.accept import ServerWorker, TokenSet
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


class Watched(ServerWorker):
    """A server worker that notes, as each hello's flow is set up, the load the board shows for it."""

    def __init__(self, tmp_path, board: LoadBoard, index: int, inbox: socket.socket | None = None) -> None:
        self.listener_sock = socket.create_server(("127.0.0.1", 0))
        super().__init__(Loop(), str(tmp_path / str(index)), lambda event: None, self.listener_sock, TokenSet())
        self.set_peers(index, inbox, {}, board)
        self.seen: list[int] = []
        self.clients: list[socket.socket] = []

    def hello(self, conn: socket.socket, hello: hs.Hello) -> None:
        assert self.board is not None
        self.seen.append(self.board.load(self.index))
        super().hello(conn, hello)

    def connection(self) -> socket.socket:
        """The server side of a fresh connection to this worker's listener (the client side kept)."""
        self.clients.append(socket.create_connection(self.listener_sock.getsockname()))
        conn, _ = self.listener_sock.accept()
        conn.setblocking(False)
        return conn

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.loop.run(lambda: not self.flows)  # each flow ends at its client's EOF
        self.listener_sock.close()


def test_a_hello_counts_on_the_board_while_its_flow_is_set_up(tmp_path):
    """Kept by the worker that accepted it, or handed to another, a hello's flow is counted on the board
    from its choice on: placed while it was set up (a few ms of files opened), a flow arriving at
    another worker of the same burst saw this one's worker idle and could join it there."""
    board = LoadBoard(2)
    fields = {"test": "TCP_STREAM", "dur": 5, "interval": 0.01, "kind": "main"}
    inbox, outbox = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    kept, handed = Watched(tmp_path, board, 0), Watched(tmp_path, board, 1, inbox)
    try:
        raw = hs.encode_hello({**fields, "flow": "a-b-0-0"})
        kept.route_hello(kept.connection(), hs.decode_hello(raw), raw)  # both idle: kept where it came
        assert kept.seen == [1] and board.load(0) == 1 and len(kept.flows) == 1  # counted, then live
        assert board.choose(1) == 1  # the next flow goes to the idle worker
        raw = hs.encode_hello({**fields, "flow": "a-b-0-1"})
        conn = handed.connection()
        socket.send_fds(outbox, [b"H" + raw], [conn.fileno()])  # (what worker 0 does when it hands a hello over)
        conn.close()
        board.hand(0, 1)
        handed.loop.run(lambda: bool(handed.flows))  # the inbox is read, the flow set up
        assert handed.seen == [1] and board.load(1) == 1 and board.load(0) == 1
    finally:
        kept.close()
        handed.close()
        inbox.close()
        outbox.close()
    assert board.load(0) == board.load(1) == 0


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
