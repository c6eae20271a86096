"""The lone RR loops (``rr_client``/``rr_server`` of ``_fastloop``, one flow end alone in its worker) take
their flow end's hot rows in C: no return to Python for a row; and the sampler's sweep, which then has
nothing to do for that flow end but re-arm, is held back (``client_rr.lone_deadline``, up to SWEEP_HOLD),
so a real 1-flow RR run comes back to Python about once per SWEEP_HOLD, not twice per sampling interval
(row and sweep); the rows are still one per interval, hot, with counters ending at the summaries'."""

from __future__ import annotations

import os
import socket
import time
from array import array

import numpy as np
import pytest

from netesto.engine.sampling import records
from netesto.engine.native import fastloop
from netesto.engine.kinds.flowend import FlowEnd, Worker
from netesto.engine.core.loop import Loop
from netesto.protocol.flowspec import FlowSpec
from netesto.results.ticks import tick_stats
from tests.engine.grid import assert_on_grid
from tests.engine.test_engine import Server, ends, spec
from tests.engine.test_sample_hot import _client

hot = pytest.mark.skipif(records.sample_end is None or fastloop.ext is None,
                         reason="the engine samples in Python here (no C loops, no hot rows)")
DUR, INTERVAL = 1.5, 0.01


class HotEnd(FlowEnd):
    """A flow end that takes hot rows (as RRServer), its socket one end of a pair."""

    hot_sampled = True


@hot
def test_rr_server_takes_a_due_row_itself_and_goes_on(tmp_path):
    """With the flow end and the sampler's acc, a due row is taken inside rr_server (no DUE return):
    the loop serves on until its deadline, and the row carries the loop's counters."""
    ext = fastloop.ext
    assert ext is not None
    a, b = socket.socketpair()
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    end = HotEnd(worker, FlowSpec(flow_id="rr-0", test="TCP_RR", server="127.0.0.1", port=1, interval=INTERVAL,
                                  exp=1))
    end.sock = a
    end.begin()
    end.flush()
    try:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, b"\0" * 8 + (1000).to_bytes(8, "little"))
        rows0, hot0 = end.nrows + end.samples, worker.sampler.hot_rows
        end.due_at = time.monotonic() - 0.001  # a row is due
        b.send(b"x" * 3)
        st = array("q", [0] * ext.SERVER_STATE)
        before = time.monotonic()
        status = ext.rr_server(a.fileno(), 1, 1, time.monotonic() + 0.05, st, end.due_at, end, worker.sampler.acc)
        assert status == ext.AGAIN  # served on past the due row, until nothing came within 1 ms
        assert list(st[:4]) == [0, 3, 3, 3] and b.recv(16) == b"\0" * 3
        assert worker.sampler.hot_rows == hot0 + 1 and end.nrows + end.samples == rows0 + 1
        assert end.due_at > before  # moved on to its next grid point
        with pytest.raises(TypeError):
            ext.rr_server(a.fileno(), 1, 1, 0.0, st, end.due_at, end)  # a flow end needs the acc
    finally:
        end.finish()
        worker.loop.close()
        a.close()
        b.close()


@pytest.mark.skipif(fastloop.ext is None, reason="netesto.engine.native._fastloop is not built")
@pytest.mark.parametrize("readable", [False, True])
def test_rr_server_comes_back_when_its_wake_fd_is_readable(readable):
    """wake_fd (the loop's epoll fd in the engine) readable: rr_server returns DEADLINE at its next check
    (every 4 reads) though its deadline is far; not readable: it serves on (the GIL is kept: the client is
    another process)."""
    ext = fastloop.ext
    assert ext is not None
    a, b = socket.socketpair()
    r, w = os.pipe()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, b"\0" * 8 + (200_000).to_bytes(8, "little"))
    if readable:
        os.write(w, b"!")
    pid = os.fork()
    if pid == 0:  # the client: 12 transactions
        try:
            for _ in range(12):
                b.send(b"x")
                b.recv(1)
        finally:
            os._exit(0)
    try:
        st = array("q", [0] * ext.SERVER_STATE)
        status = ext.rr_server(a.fileno(), 1, 1, time.monotonic() + 5, st, float("inf"), None, None, r, 1e-9)
        served = st[3]
        if status == ext.DEADLINE:
            ext.rr_server(a.fileno(), 1, 1, time.monotonic() + 5, st, float("inf"))  # the rest
        assert status == (ext.DEADLINE if readable else ext.AGAIN)
        assert served == (4 if readable else 12) and st[3] == 12  # back at its 4th read
    finally:
        os.waitpid(pid, 0)
        for fd in (r, w):
            os.close(fd)
        a.close()
        b.close()


@pytest.mark.netns
@hot
def test_a_lone_rr_flow_seldom_comes_back_to_python(veth_pair, tmp_path):
    """Both ends of one RR flow (each alone in its worker): their C loops return to Python about once per
    SWEEP_HOLD, where rows taken in Python cost a return per row and one per sweep; every row is hot, one per
    interval, and the rows' counters end at the summaries'."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "1")
    s = spec(server, "a-b-0-0", "TCP_RR", dur=DUR, interval=INTERVAL)
    proc = _client(pair, tmp_path, [s])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    server.events()
    intervals = DUR / INTERVAL
    for side, flow in enumerate(ends(tmp_path, s["flow_id"])):
        summary = flow.summary
        if side == 0:
            assert summary["duration"] < DUR + 0.05  # its end timer, the loop's next after the sweep, not held
        assert summary["rr_loop"] == "C"
        cpu = summary["cpu"]
        # about one return per SWEEP_HOLD (the held-back sweep), a few more for stalls; a return per row and per
        # sweep (the Python rows) would be 2 per interval
        assert summary["rr_returns"] <= 0.4 * intervals, summary["rr_returns"]
        # its rows hot (the sweep held back had none to take), but for the stalls of an end a loaded machine
        # kept off the CPU past the sweep's grace (one or two in 150 quiet), with the rows such a stall owes,
        # taken in that sweep: each of those but the stall's last is an interval late or more (15 in 150
        # beside two busy loops, 61 on a busy CI runner). A sweep of every row would take them all, on time.
        late = assert_on_grid(flow, interval=INTERVAL)
        held = int(np.count_nonzero(late >= INTERVAL * 1e6))
        assert cpu["sampling_swept_rows"] <= max(3, 0.15 * intervals) + held, (cpu, held)
        assert late.size + tick_stats(flow).missed >= 0.9 * intervals  # a row per grid point, or a missed one
        assert flow.columns["transactions"][-1] == summary["transactions"]
