"""Hot rows: an RR flow end takes its row at its own idle point just after each grid point
(``fastloop.sample_end``, the C loops), the row the sweep would build, stamped at its own instant;
a flow end whose idle point does not come is sampled by the sweep; both ends of real RR flows, alone or
many on one worker, take their rows so, with the Python twin sampling at the grid points."""

from __future__ import annotations

import json
import math
import socket
import time
from array import array

import pytest

from netesto.engine.sampling import records
from netesto.engine.native import fastloop
from netesto.engine.sampling.grid import backlog
from netesto.engine.kinds.flowend import FlowEnd, Worker
from netesto.engine.core.loop import Loop
from netesto.engine.sampling.records import HEAD, LAT, interval_summary
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.nflow import read_flow
from netesto.results.ticks import tick_stats
from tests.engine.grid import assert_on_grid
from tests.engine.test_engine import ENGINE, Server, ends, spec

hot = pytest.mark.skipif(records.sample_end is None, reason="the engine samples in Python here")


class HotEnd(FlowEnd):
    """A flow end that takes hot rows (as RRClient, RRServer), with no traffic of its own."""

    hot_sampled = True


def _rr_end(worker: Worker, i: int, sock: socket.socket | None = None) -> HotEnd:
    end = HotEnd(worker, FlowSpec(flow_id=f"rr-{i}", test="TCP_RR", server="127.0.0.1", port=1, interval=0.01, exp=1))
    end.sock = sock
    end.begin()
    end.flush()
    return end


def written(tmp_path, end: FlowEnd):
    """The file a finished flow end of these tests wrote."""
    (path,) = tmp_path.rglob(f"{end.spec.flow_id}.*.nflow")
    return read_flow(path)


def _done(worker: Worker, made: list[HotEnd]) -> None:
    """Every flow end finished (its file closed), then the worker's loop."""
    for end in made:
        end.finish()
    worker.loop.close()


@pytest.fixture
def pair(tmp_path):
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    made = [_rr_end(worker, i) for i in range(2)]
    yield worker, made
    _done(worker, made)


@hot
def test_a_hot_row_is_the_row_the_sweep_builds_stamped_at_its_own_instant(pair):
    worker, (a, b) = pair
    assert a.due_every == 0.01 and a.due_at < math.inf  # gridded by the Sampler
    for end in (a, b):
        end.tx, end.rx, end.trans = 70, 80, 3
        end.lat_raw.extend(array("q", [5_000, 9_000, 7_000]))
    b.gaps[:] = a.gaps
    due_at = a.due_at = time.monotonic() - 0.025  # two grid points missed
    acc = array("q", [0] * fastloop.ACC_FIELDS)
    before = time.monotonic()
    assert records.sample_end is not None and records.sample_end(a, acc) == 0
    wall, mono = HEAD.unpack_from(a.b_rec)[:2]
    assert before <= mono <= time.monotonic() and abs(wall - time.time()) < 1
    b.due_at = math.inf
    assert fastloop.sample_tick is not None
    assert fastloop.sample_tick([b], wall, mono) == ([], [], [])
    assert a.b_rec[:a.rec_len] == b.b_rec[:b.rec_len] and a.gaps == b.gaps and a.nrows == b.nrows == 1
    assert bytes(a.b_rec[a.rec_len - LAT.size:a.rec_len]) == interval_summary(array("q", [5_000, 9_000, 7_000]))
    assert not a.lat_raw and list(a.lat_done) == [5_000, 9_000, 7_000]
    # its next row: the next grid point, already past (owed: the row late by two points is followed by
    # the rows of the points it passed), on its own grid
    assert a.due_at == due_at + 0.01 and a.due_at < mono
    # more than the backlog behind: the first grid point after its stamp (the points passed given up)
    due_at = a.due_at = time.monotonic() - 0.01 * (backlog(0.01) + 2.5)
    assert records.sample_end(a, acc) == 0
    mono = HEAD.unpack_from(a.b_rec, a.rec_len)[1]
    assert mono < a.due_at <= mono + 0.01 and abs((a.due_at - due_at) / 0.01 - round((a.due_at - due_at) / 0.01)) < 1e-6
    assert acc[1] == 2 and acc[4] == 1 and acc[3] > 0  # the rows, the first probed (its thread CPU)


@hot
def test_a_row_the_c_side_cannot_build_is_left_to_python_and_nothing_moves(pair):
    worker, (a, _b) = pair
    a.lat_raw.extend(array("q", [5_000]))
    a.sample(1.0, 2.0)  # the Python path: this row's latency part waits (lat_pending)
    a.due_at = due_at = time.monotonic() - 0.001
    acc = array("q", [0] * fastloop.ACC_FIELDS)
    assert records.sample_end is not None and records.sample_end(a, acc) == 2
    assert a.nrows == 1 and a.due_at == due_at and acc[1] == 1
    worker.sampler.hot_rest(a, 2, None)  # what Sampler.hot does with it: the row in Python, then on
    assert a.nrows == 2 and a.due_at > time.monotonic() - 0.001


@hot
def test_a_flow_end_whose_idle_point_does_not_come_is_sampled_by_the_sweep(tmp_path):
    """A hot flow end with no traffic (stalled) still gets a row per interval, from the sweeps, GRACE
    of the interval after each grid point; a stream end in the same worker is sampled at the sweep too."""
    a, b = socket.socketpair()
    loop = Loop()
    worker = Worker(loop, str(tmp_path), lambda event: None)
    began = time.monotonic()
    end = _rr_end(worker, 0, a)
    stop = time.monotonic() + 0.3
    loop.run(lambda: time.monotonic() >= stop)
    rows = end.nrows + end.samples
    # every row by the sweeps, at most one a grid point passed (0.3 s: 30) and the baseline, on the grid
    assert worker.sampler.hot_rows == 0 and worker.sampler.swept == rows - 1
    assert rows <= (time.monotonic() - began) / 0.01 + 2, rows
    end.finish()
    loop.close()
    assert_on_grid(written(tmp_path, end))
    a.close()
    b.close()


def _client(pair, tmp_path, specs):
    where = tmp_path / "specs.json"
    where.write_text(json.dumps(specs))
    argv = [*ENGINE, "client", "--specs", str(where), "--datadir", str(tmp_path / "cli"), "--workers", "1"]
    return pair.run(pair.a, argv, timeout=60)


@pytest.mark.alone
@pytest.mark.netns
@hot
@pytest.mark.parametrize("flows", [1, 16])
def test_rr_ends_take_their_rows_at_their_own_idle_points(veth_pair, tmp_path, flows):
    """Both ends of 1 (the lone C loops) and 16 (the C loop of many) RR flows: nearly every row is hot,
    stamped at its own instant (the rows of one grid point do not share stamps as a sweep's would),
    one per interval; the rows' counters end at the summaries'."""
    pair = veth_pair
    server = Server(pair, pair.b, pair.addr_b, tmp_path / "srv", "--workers", "1")
    specs = [spec(server, f"a-b-0-{i}", "TCP_RR", dur=1.5) for i in range(flows)]
    proc = _client(pair, tmp_path, specs)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    server.events()
    for side in (0, 1):
        stamps = []
        for s in specs:
            flow = ends(tmp_path, s["flow_id"])[side]
            cpu = flow.summary["cpu"]
            assert cpu["sampling_hot_rows"] >= 0.8 * (cpu["sampling_hot_rows"] + cpu["sampling_swept_rows"])
            # one row per grid point, never before it. The C loop of 16 RR flows once took the first server
            # end's rows a steady ~9.7 ms after their grid points (p25 9.6, p99 10.4 ms, on a quiet machine):
            # its schedule offset from the header's grid by the flow's start, an open question (not lost
            # rows: each is stamped with its own instant); held to under three intervals at the median.
            late = assert_on_grid(flow)
            assert late.size + tick_stats(flow).missed >= 0.9 * 1.5 / 0.01  # a row per grid point, or a missed one
            stamps += list(flow.columns["t_mono"])[1:-1]
            assert flow.columns["transactions"][-1] == flow.summary["transactions"]
        if flows > 1:
            assert len(set(stamps)) >= 0.8 * len(stamps)  # own instants, not one per grid point


@hot
@pytest.mark.skipif(fastloop.rrloop is None, reason="netesto.engine.native._rrloop is not built")
def test_the_c_loop_of_rr_flow_ends_runs_the_sweep_of_its_members(tmp_path):
    """Two members of the C loop of RR flow ends with nothing in flight (stalled: no idle point comes)
    still get a row per interval: the Sampler hands its sweep to the C loop (no timer, no return to
    Python for it) and takes it back when a member leaves."""
    from netesto.engine.kinds.rrgroup import group_of

    lsock = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(lsock.getsockname())
    b, _ = lsock.accept()
    loop = Loop()
    worker = Worker(loop, str(tmp_path), lambda event: None)
    made = []
    began = time.monotonic()
    for i, sock in enumerate((a, b)):
        sock.setblocking(False)
        end = _rr_end(worker, i, sock)
        end.fd, end.got, end.t0, end.rr_slot = sock.fileno(), 0, time.perf_counter_ns(), -1
        loop.register(end.fd, 1, lambda events: None)
        group_of(loop, fastloop.rrloop).join(end, i == 1, 1, 1)
        made.append(end)
    group = loop.rr_group
    stop = time.monotonic() + 0.3
    loop.call_at(stop, lambda: None)  # (the C loop serves until a timer is due: the test's end)
    loop.run(lambda: time.monotonic() >= stop)
    sampler = worker.sampler
    assert sampler.handed and group.sweep_interval == 0.01
    rows = [end.nrows + end.samples for end in made]
    # at most one a grid point passed (about 30 in 0.3 s, more if joining took long) and the baseline
    assert max(rows) <= (time.monotonic() - began) / 0.01 + 2, rows
    # all but the baselines and the first sweep's (2 quiet, with the rows they owed if it came late): the C loop's
    assert sampler.swept <= 0.25 * sum(rows) and sampler.hot_rows >= sum(rows) - 2 - sampler.swept
    group.leave(made[0])  # the sweep goes back to a timer
    assert not sampler.handed and group.sweep_interval == 0.0
    swept = sampler.swept
    stop = time.monotonic() + 0.05
    loop.call_at(stop, lambda: None)
    loop.run(lambda: time.monotonic() >= stop)
    assert sampler.swept >= swept + 2  # the timer's sweeps again (5 grid points)
    _done(worker, made)
    for sock in (a, b, lsock):
        sock.close()
    for end in made:
        assert_on_grid(written(tmp_path, end))  # one schedule, whoever ran the sweep
