"""Sampling and its records: real flow ends on real loopback connections, real .nflow files."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from array import array
from pathlib import Path
from typing import Iterator

import msgpack
import pytest

from netesto.errors import RawDataError
from netesto.collectors import tcpinfo
from netesto.raw.columns import CC_COLUMNS, FLOW_COLUMNS, LATENCY_COLUMNS, TCP_INFO_COLUMNS
from netesto.engine.kinds.flowend import FlowEnd, Worker
from netesto.engine.sampling.flowrecord import FLUSH_SECONDS
from netesto.engine.core.loop import Loop
from netesto.engine.sampling.sampler import FLUSH_GROUP
from netesto.raw.nflow import Column, FlowWriter, RecordLayout, read_flow
from netesto.protocol.flowspec import FlowSpec

REPO = Path(__file__).resolve().parents[2]


def _connections(n: int, ca: str = "") -> tuple[list[socket.socket], list[socket.socket]]:
    lsock = socket.create_server(("127.0.0.1", 0), backlog=n)
    mine, peers = [], []
    for _ in range(n):
        c = socket.socket()
        if ca:
            tcpinfo.set_congestion_control(c, ca)
        c.connect(lsock.getsockname())
        s, _ = lsock.accept()
        mine.append(c)
        peers.append(s)
    lsock.close()
    return mine, peers


def _end(worker: Worker, sock: socket.socket | None, flow_id: str, test: str = "TCP_STREAM") -> FlowEnd:
    end = FlowEnd(worker, FlowSpec(flow_id=flow_id, test=test, server="127.0.0.1", port=1, interval=0.01, exp=1))
    end.sock = sock
    return end


@contextlib.contextmanager
def _loopback_ends(tmp_path: Path, n: int, test: str = "TCP_STREAM") -> Iterator[tuple[Worker, list[FlowEnd]]]:
    """A worker with ``n`` flow ends (``test``, stream by default) on established loopback
    connections; every end is finished (its file closed) and every socket closed on the way out."""
    socks, peers = _connections(n)
    loop = Loop()
    worker = Worker(loop, str(tmp_path), lambda event: None)
    ends = [_end(worker, sock, f"f-{i}", test) for i, sock in enumerate(socks)]
    try:
        yield worker, ends
        for end in ends:
            end.finish()
    finally:
        for s in socks + peers:
            s.close()
        loop.close()


def _file(tmp_path: Path, end: FlowEnd):
    return read_flow(tmp_path / "1" / "flows" / f"{end.spec.flow_id}.client.nflow")


def test_rows_of_one_tick_share_their_stamps_and_jitter_stats_match_the_file(tmp_path):
    with _loopback_ends(tmp_path, 5) as (worker, ends):
        for end in ends:
            end.begin()
            end.sock.sendall(b"x" * 5000)
            end.tx = 5000
        deadline = ends[0].start_mono + 0.5
        worker.loop.run(lambda: ends[0].elapsed() >= 0.5)
    flows = [_file(tmp_path, end) for end in ends]
    assert all(f.header["format"] == [1, 1] and "record" in f.header for f in flows)
    # every row but the first (joining) and the last (ending) comes from a tick
    ticks = [list(f.columns["t_mono"][1:-1]) for f in flows]
    walls = [list(f.columns["t_wall"][1:-1]) for f in flows]
    assert len(ticks[0]) >= 10
    assert all(t == ticks[0] for t in ticks) and all(w == walls[0] for w in walls)
    for flow in flows:
        mono, wall = flow.columns["t_mono"], flow.columns["t_wall"]
        assert all(b > a for a, b in zip(mono, mono[1:]))
        assert flow.header["start_mono"] <= mono[0] and mono[-1] <= deadline + 5
        # the two clocks are read together: their offset barely moves
        offsets = [w - m for w, m in zip(wall, mono)]
        assert max(offsets) - min(offsets) < 0.05
        assert abs(offsets[0] - (flow.header["start_wall"] - flow.header["start_mono"])) < 0.05
        assert flow.columns["app_bytes_tx"][-1] == 5000 and flow.columns["bytes_acked"][-1] >= 5000
        assert flow.columns["state"][-2] == 1  # established while ticking
        gaps = [b - a for a, b in zip(mono, mono[1:])]
        sp = flow.summary["sample_spacing_us"]
        assert sp["count"] == len(gaps) == flow.rows - 1 == flow.summary["samples"] - 1
        assert sp["min"] == pytest.approx(min(gaps) * 1e6, abs=0.01)
        assert sp["max"] == pytest.approx(max(gaps) * 1e6, abs=0.01)
        assert sp["mean"] == pytest.approx(statistics.mean(gaps) * 1e6, rel=1e-6)
        assert not flow.truncated


def test_due_timers_run_between_the_handlers_of_one_poll():
    """A round of slow handlers (busy senders: ~10 ms of copying for 32 flows) does not hold a
    due timer (the sampler's tick) back to the end of the round."""
    loop = Loop()
    pipes = [os.pipe() for _ in range(3)]
    order: list[str] = []

    def handler(name: str):
        def on_ready(events: int) -> None:
            if not order:  # the round's first handler: the timer falls due while it runs, whatever the load
                loop.call_later(0.005, lambda: order.append("timer"))
            order.append(name)
            time.sleep(0.02)  # longer than the timer's delay

        return on_ready

    try:
        for i, (r, w) in enumerate(pipes):
            os.write(w, b"x")  # all three ready before the loop polls: one round of three handlers
            loop.register(r, select.EPOLLIN, handler(f"fd{i}"))
        loop.run(lambda: len(order) >= 4)
    finally:
        loop.close()
        for r, w in pipes:
            os.close(r)
            os.close(w)
    assert order[1] == "timer" and sorted(order[:1] + order[2:]) == ["fd0", "fd1", "fd2"], order


def test_record_parts_follow_the_flow_end(tmp_path):
    """cubic: no cc part; bbr: the cc part with bbr's numbers; UDP: no tcp_info; RR: latency."""
    (cubic, bbr), peers = _connections(2, "cubic")
    tcpinfo.set_congestion_control(bbr, "bbr")
    loop = Loop()
    worker = Worker(loop, str(tmp_path), lambda event: None)
    ends = [_end(worker, cubic, "f-cubic"), _end(worker, bbr, "f-bbr")]
    rr = _end(worker, cubic, "f-rr", "TCP_RR")
    udp = _end(worker, None, "f-udp", "UDP_STREAM")
    try:
        for end in ends + [rr, udp]:
            end.begin()
        bbr.sendall(b"y" * 200_000)
        got = 0
        while got < 200_000:
            got += len(peers[1].recv(65536))
        for ns in (50_000, 70_000, 90_000):
            rr.record_latency(ns)
        rr.trans = 3
        udp.udp_sent, udp.udp_lost = 7, -2  # a negative running loss count is written as 0
        worker.sampler._tick(0.01)
        for end in ends + [rr, udp]:
            end.finish()
    finally:
        for s in [cubic, bbr] + peers:
            s.close()
        loop.close()
    fc, fb, fr, fu = (_file(tmp_path, e) for e in ends + [rr, udp])
    assert fc.header["record"]["length"] == 64 + 280
    assert fb.header["record"]["length"] == 64 + 280 + 24
    assert fr.header["record"]["length"] == 64 + 280 + 64
    assert fu.header["record"]["length"] == 64
    for flow in (fc, fb, fr, fu):
        assert set(flow.columns) == {c.name for c in FLOW_COLUMNS}
        assert all(len(v) == flow.rows == 3 for v in flow.columns.values())
    assert fc.header["ca"] == "cubic" and fb.header["ca"] == "bbr"
    assert all(max(fc.columns[c.name]) == 0 for c in CC_COLUMNS)
    assert fb.columns["bbr_bw"][1] > 0 and fb.columns["bbr_min_rtt"][1] > 0
    assert fb.columns["bbr_pacing_gain"][1] > 0 and fb.columns["bbr_cwnd_gain"][1] > 0
    assert fb.columns["bytes_acked"][1] >= 200_000
    # the row after the tick holds the three latencies; the others none
    assert list(fr.columns["lat_count"]) == [0, 3, 0]
    assert fr.columns["lat_min"][1] == pytest.approx(50, rel=0.01)
    assert fr.columns["lat_max"][1] == pytest.approx(90, rel=0.01)
    assert fr.columns["lat_mean"][1] == pytest.approx(70, rel=0.01)
    assert list(fr.columns["transactions"]) == [0, 3, 3]
    assert fr.summary["latency_us"]["count"] == 3
    assert all(max(fu.columns[c.name]) == 0 for c in TCP_INFO_COLUMNS + CC_COLUMNS + LATENCY_COLUMNS)
    assert list(fu.columns["udp_lost"]) == [0, 0, 0]


def test_a_killed_writer_loses_at_most_one_flush_period(tmp_path):
    """The child samples 2.5 flush periods' worth of rows through the real Sampler, then is SIGKILLed."""
    code = textwrap.dedent(f"""
        import os, signal, socket
        from netesto.engine.kinds.flowend import FlowEnd, Worker
        from netesto.engine.core.loop import Loop
        from netesto.protocol.flowspec import FlowSpec
        lsock = socket.create_server(("127.0.0.1", 0))
        c = socket.create_connection(lsock.getsockname())
        s, _ = lsock.accept()
        worker = Worker(Loop(), {str(tmp_path)!r}, lambda e: None)
        end = FlowEnd(worker, FlowSpec(flow_id="k", test="TCP_STREAM", server="127.0.0.1", port=1,
                                       interval=0.01, exp=1))
        end.sock = c
        end.begin()  # row 1
        for i in range(2 * end.flush_rows + end.flush_rows // 2 - 1):
            c.sendall(b"z" * 100)
            end.tx += 100
            worker.sampler._tick(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    flow = read_flow(tmp_path / "1" / "flows" / "k.client.nflow")
    flush_rows = round(FLUSH_SECONDS / 0.01)
    sampled = 2 * flush_rows + flush_rows // 2
    assert flow.summary is None and not flow.truncated
    # on disk: the baseline row (the first flow of a group writes it at once),
    # then two whole blocks; the 9 rows of the unfinished block are lost
    assert flow.rows == 1 + 2 * flush_rows
    assert sampled - flow.rows < flush_rows
    assert list(flow.columns["app_bytes_tx"][:3]) == [0, 100, 200]
    assert flow.columns["app_bytes_tx"][-1] == (flow.rows - 1) * 100


def test_the_flushes_of_a_group_go_in_groups_spread_over_the_ticks(tmp_path):
    # 45 flow ends at once, then a 46th later: groups of FLUSH_GROUP write in the same sweep, and the groups'
    # sweeps are apart; a flow end that comes later joins its group's sweeps
    with _loopback_ends(tmp_path, 46) as (worker, ends):
        flush_rows = ends[0].flush_rows
        for end in ends[:45]:
            end.begin()  # one row each
        wrote: dict[int, list[int]] = {i: [] for i in range(46)}  # the ticks in which each flow end wrote a block
        for tick in range(1, 2 * flush_rows + 1):
            before = [end.samples for end in ends]
            worker.sampler._tick(0.01)
            if tick == 7:
                ends[45].begin()
            for i, end in enumerate(ends):
                if end.samples != before[i]:
                    assert end.samples - before[i] == (flush_rows if before[i] else end.samples), (tick, i)
                    wrote[i].append(tick)
            assert sum(end.samples != b for end, b in zip(ends, before)) <= FLUSH_GROUP
    for i in range(45):
        assert len(wrote[i]) == 2 and wrote[i][1] - wrote[i][0] == flush_rows, (i, wrote[i])
    assert 45 // FLUSH_GROUP == 40 // FLUSH_GROUP and wrote[45] == wrote[40][-1:]  # the latecomer joins its group
    groups = [{tuple(wrote[i]) for i in range(k, min(k + FLUSH_GROUP, 45))} for k in range(0, 45, FLUSH_GROUP)]
    assert all(len(g) == 1 for g in groups), groups  # a group writes in the same sweeps
    firsts = sorted(next(iter(g))[0] for g in groups)
    gaps = [b - a for a, b in zip(firsts, firsts[1:] + [firsts[0] + flush_rows])]
    assert min(gaps) >= flush_rows // (2 * len(groups)), firsts  # the groups' sweeps are spread over the cycle
    for end in ends:
        flow = _file(tmp_path, end)
        assert flow.rows == flow.summary["samples"] == end.samples  # every row written, in whole blocks


COLS = (Column("a", "I", "1"), Column("b", "d", "s"), Column("c", "B", "1"), Column("z", "Q", "1"))
LAYOUT = RecordLayout(16, (("b", 0), ("a", 8), ("c", 12)))  # z is not in the record: zero


def test_records_blocks_round_trip_after_column_rows(tmp_path):
    path = tmp_path / "r.nflow"
    rec = struct.Struct("=dIB3x")
    with FlowWriter(path, COLS, {"side": "client"}, record=LAYOUT) as writer:
        writer.append([9, 0.5, 1, 4])  # buffered rows go first
        writer.write_records(2, rec.pack(1.5, 10, 200) + rec.pack(2.5, 11, 201))
        writer.write_records(1, bytearray(rec.pack(3.5, 12, 202)))
        with pytest.raises(RawDataError, match="16 bytes"):
            writer.write_records(2, rec.pack(1.0, 1, 1))
        assert writer.rows == 4
        writer.append([13, 4.5, 5, 6])  # a samples block after the records blocks (at close)
    flow = read_flow(path)
    assert flow.header["format"] == [1, 1]
    assert flow.header["record"] == {"length": 16, "offsets": [["b", 0], ["a", 8], ["c", 12]]}
    assert list(flow.columns["a"]) == [9, 10, 11, 12, 13]
    assert list(flow.columns["b"]) == [0.5, 1.5, 2.5, 3.5, 4.5]
    assert list(flow.columns["c"]) == [1, 200, 201, 202, 5]
    assert list(flow.columns["z"]) == [4, 0, 0, 0, 6]
    assert path.read_bytes()[8:12] == struct.pack("<HH", 1, 1)


def test_a_writer_without_records_still_writes_version_1_0(tmp_path):
    path = tmp_path / "c.nflow"
    with FlowWriter(path, COLS) as writer:
        writer.append([1, 2.0, 3, 4])
        with pytest.raises(RawDataError, match="no record layout"):
            writer.write_records(1, bytes(16))
    assert path.read_bytes()[8:12] == struct.pack("<HH", 1, 0)
    flow = read_flow(path)
    assert flow.header["format"] == [1, 0] and "record" not in flow.header and flow.rows == 1


def test_files_written_before_records_existed_still_read():
    old = sorted((REPO / "tests" / "results" / "data").glob("*/flows/*.nflow"))
    assert old
    for path in old:
        flow = read_flow(path)
        assert flow.header["format"] == [1, 0] and flow.rows > 0
        assert set(flow.columns) >= {"t_mono", "snd_cwnd"}


@pytest.mark.parametrize("layout, why", [
    (RecordLayout(16, (("a", 2),)), "misaligned"),
    (RecordLayout(16, (("b", 16),)), "out of range"),
    (RecordLayout(12, (("a", 0),)), "multiple of 8"),
    (RecordLayout(16, (("nope", 0),)), "unknown column"),
])
def test_a_bad_record_layout_is_refused_by_writer_and_reader(tmp_path, layout, why):
    with pytest.raises(ValueError, match=why):
        FlowWriter(tmp_path / "w.nflow", COLS, record=layout)
    # the same layout in a file's header: the reader refuses it, naming the file
    path = tmp_path / "bad.nflow"
    header = {"type": "header", "format": [1, 1], "columns": [[c.name, c.typecode, c.unit] for c in COLS],
              "record": {"length": layout.length, "offsets": [list(o) for o in layout.offsets]}}
    path.write_bytes(b"NETESTO\x00" + struct.pack("<HH", 1, 1) + _block(header))
    with pytest.raises(RawDataError, match=why) as info:
        read_flow(path)
    assert str(path) in str(info.value)


def test_a_records_block_must_match_the_header(tmp_path):
    head = {"type": "header", "format": [1, 1], "columns": [[c.name, c.typecode, c.unit] for c in COLS]}
    path = tmp_path / "x.nflow"
    path.write_bytes(b"NETESTO\x00" + struct.pack("<HH", 1, 1) + _block(head)
                     + _block({"type": "records", "n": 1, "rec": bytes(16)}))
    with pytest.raises(RawDataError, match="no record layout"):
        read_flow(path)
    head["record"] = {"length": 16, "offsets": [["a", 8]]}
    path.write_bytes(b"NETESTO\x00" + struct.pack("<HH", 1, 1) + _block(head)
                     + _block({"type": "records", "n": 2, "rec": bytes(16)}))
    with pytest.raises(RawDataError, match="expected 2 x 16"):
        read_flow(path)


def test_a_big_endian_records_file_reads_on_this_host(tmp_path):
    other = "big" if sys.byteorder == "little" else "little"
    fmt = (">" if other == "big" else "<") + "dIB3x"
    head = {"type": "header", "format": [1, 1], "columns": [[c.name, c.typecode, c.unit] for c in COLS],
            "byteorder": other, "record": {"length": 16, "offsets": [["b", 0], ["a", 8], ["c", 12]]}}
    rec = struct.pack(fmt, 2.25, 70000, 7) + struct.pack(fmt, -1.0, 1, 255)
    path = tmp_path / "be.nflow"
    path.write_bytes(b"NETESTO\x00" + struct.pack("<HH", 1, 1) + _block(head)
                     + _block({"type": "records", "n": 2, "rec": rec}))
    flow = read_flow(path)
    assert list(flow.columns["b"]) == [2.25, -1.0]
    assert list(flow.columns["a"]) == [70000, 1]
    assert list(flow.columns["c"]) == [7, 255]
    assert flow.columns["z"] == array("Q", [0, 0])


def _block(payload: dict) -> bytes:
    data = msgpack.packb(payload, use_bin_type=True)
    return struct.pack("<II", len(data), zlib.crc32(data)) + data
