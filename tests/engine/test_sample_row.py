"""The sampler's row builder: the C one (fastloop.sample_row) and the Python one build the same rows;
the C tick (fastloop.sample_tick) builds the rows FlowEnd.sample builds and writes the blocks
FlowEnd.flush writes."""

from __future__ import annotations

import fcntl
import os
import socket
import random
import struct
import threading
import zlib
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from netesto.engine.native import fastloop
from netesto.collectors import tcpinfo
from netesto.engine.kinds.client import StreamClient
from netesto.engine.sampling import records
from netesto.engine.kinds.flowend import FlowEnd, Worker
from netesto.engine.sampling.flowrecord import LAT_BATCH
from netesto.engine.sampling.histogram import Histogram
from netesto.engine.sampling.records import GAPS, HEAD, INFO_LEN, LAT, interval_summary, sample_row_py
from netesto.engine.core.loop import Loop
from netesto.raw.nflow import read_flow
from netesto.raw.nflow_format import PREAMBLE
from netesto.protocol.flowspec import FlowSpec
from tests.raw.test_nflow_writer import blocks

_ext = pytest.importorskip("netesto.engine.native._fastloop")
BUILDERS = {"C": _ext.sample_row, "python": sample_row_py}
LAST = INFO_LEN + 24


@pytest.fixture
def conn():
    """An established loopback connection (client end, server end), data exchanged and quiet."""
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(lsock.getsockname())
    s, _ = lsock.accept()
    c.sendall(b"x" * 5000)
    got = 0
    while got < 5000:
        got += len(s.recv(65536))
    yield c, s
    for sock in (c, s, lsock):
        sock.close()


def build(name: str, sock, parts: int, counters=(1, 2, 3, 4, 5, 6), last=None, gaps=None, mono=2.5):
    rec, last = bytearray(), last if last is not None else bytearray(LAST)
    read = BUILDERS[name](rec, 0, sock, parts, 1.25, mono, *counters, last, gaps or bytearray(GAPS.size))
    return rec, last, read


def test_the_extension_lays_rows_out_as_the_engine_does():
    assert fastloop.ROW_LAYOUT in (None, (HEAD.size, INFO_LEN, 24))
    assert (_ext.ROW_HEAD, _ext.ROW_INFO, _ext.ROW_CC_SLOT) == (HEAD.size, INFO_LEN, 24)


@pytest.mark.parametrize("name", BUILDERS)
def test_head_and_tcp_info_of_a_real_socket(conn, name):
    c, _ = conn
    rec, last, read = build(name, c, 1)
    assert read == 1 and len(rec) == HEAD.size + INFO_LEN
    assert HEAD.unpack_from(rec) == (1.25, 2.5, 1, 2, 3, 4, 5, 6)
    info = tcpinfo.decode_record(bytes(rec[HEAD.size:]))
    assert info["state"] == 1 and info["bytes_acked"] == 5001  # established; SYN + 5000 bytes acked
    assert rec[HEAD.size:] == last[:INFO_LEN]  # what was read is kept as the last values


@pytest.mark.parametrize("name", BUILDERS)
def test_cc_info_of_a_bbr_socket(name):
    if "bbr" not in tcpinfo.available_congestion_controls():
        pytest.skip("no bbr here")
    lsock = socket.create_server(("127.0.0.1", 0))
    c = socket.socket()
    tcpinfo.set_congestion_control(c, "bbr")
    c.connect(lsock.getsockname())
    s, _ = lsock.accept()
    try:
        c.sendall(b"x" * 1000)
        s.recv(1000)
        rec, last, read = build(name, c, 2)
        assert read == 2 and len(rec) == HEAD.size + INFO_LEN + 24
        cc = bytes(rec[HEAD.size + INFO_LEN:])
        assert cc[20:] == bytes(4)  # the pad
        bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain = struct.unpack_from("=5I", cc)
        assert 0 < min_rtt < 1_000_000 and pacing_gain > 0 and cwnd_gain > 0
        assert last[INFO_LEN:] == cc
    finally:
        for sock in (c, s, lsock):
            sock.close()


@pytest.mark.parametrize("name", BUILDERS)
def test_an_unreadable_socket_repeats_the_last_values(conn, name):
    c, _ = conn
    known = bytearray(range(256)) + bytearray(LAST - 256)
    for sock in (None, c):
        if sock is c:
            c.close()  # fileno() is -1 now
        rec, last, read = build(name, sock, 2, last=bytearray(known))
        assert read == 0
        assert rec[HEAD.size:] == known and last == known


class _NoFileno(socket.socket):
    """A socket whose fileno() says closed, though its fd is open."""

    def fileno(self) -> int:
        return -1


def test_the_c_builder_reads_the_fd_fileno_gives(conn):
    # the C builder reads a socket's fd in place once its type's fileno() is _socket.socket's:
    # a closed socket of a type read so, and a type redefining fileno(), still repeat the last values
    c, _ = conn
    known = bytearray(range(256)) + bytearray(LAST - 256)
    assert records.sample_tick is None or build("C", c, 1)[2] == 1  # the type is read in place from here
    other = _NoFileno(fileno=os.dup(c.fileno()))
    try:
        rec, last, read = build("C", other, 1, last=bytearray(known))
        assert read == 0 and rec[HEAD.size:] == known[:INFO_LEN]
    finally:
        other.close()
    assert build("C", c, 1)[2] == 1
    c.close()
    rec, last, read = build("C", c, 1, last=bytearray(known))
    assert read == 0 and rec[HEAD.size:] == known[:INFO_LEN]


@pytest.mark.parametrize("name", BUILDERS)
def test_head_only_rows_and_counters(name):
    rec, last, read = build(name, None, 0, counters=(10, 20, 30, 40, -3, 60))
    assert read == 0 and last == bytearray(LAST)
    assert HEAD.unpack(rec) == (1.25, 2.5, 10, 20, 30, 40, 0, 60)  # late datagrams ahead: lost counts as 0


def test_both_builders_keep_the_same_gaps():
    stamps = [5.0, 5.01, 5.025, 5.03, 5.05, 5.2]
    kept = {}
    for name, fn in BUILDERS.items():
        gaps = bytearray(GAPS.size)
        for mono in stamps:
            fn(bytearray(), 0, None, 0, 0.0, mono, 0, 0, 0, 0, 0, 0, bytearray(LAST), gaps)
        kept[name] = gaps
    assert kept["C"] == kept["python"]
    first, last, count, low, high = GAPS.unpack(kept["C"])
    assert (first, last, count) == (5.0, 5.2, 5)
    assert low == pytest.approx(0.005) and high == pytest.approx(0.15)


@pytest.mark.parametrize("args, error", [
    ((bytes(0), 0, None, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(40)), TypeError),
    ((bytearray(), 0, None, 3, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(40)), ValueError),
    ((bytearray(), 0, None, 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(10), bytearray(40)), ValueError),
    ((bytearray(), 0, None, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(8)), ValueError),
    ((bytearray(), 0, None, 0, "x", 0.0, 0, 0, 0, 0, 0, 0, bytearray(LAST), bytearray(40)), TypeError),
    ((bytearray(), 0, None, 0, 0.0, 0.0, 0, 0), TypeError),
])
def test_bad_arguments_raise(args, error):
    with pytest.raises(error):
        _ext.sample_row(*args)


@pytest.mark.parametrize("name", BUILDERS)
def test_rows_go_in_place_and_the_buffer_grows_only_past_its_end(name):
    size = HEAD.size + INFO_LEN
    rec, last = bytearray(2 * size), bytearray(range(256)) + bytearray(LAST - 256)
    for i in range(2):
        BUILDERS[name](rec, i * size, None, 1, 1.0, 2.0 + i, i, 0, 0, 0, 0, 0, last, bytearray(GAPS.size))
    assert len(rec) == 2 * size  # preallocated: written in place
    assert [HEAD.unpack_from(rec, i * size)[1:3] for i in range(2)] == [(2.0, 0), (3.0, 1)]
    BUILDERS[name](rec, 2 * size, None, 1, 1.0, 4.0, 2, 0, 0, 0, 0, 0, last, bytearray(GAPS.size))
    assert len(rec) == 3 * size and rec[2 * size + HEAD.size:] == last[:INFO_LEN]
    for at in (-1, 3 * size + 1):
        with pytest.raises(ValueError, match="a row at"):
            BUILDERS[name](rec, at, None, 0, 1.0, 1.0, 0, 0, 0, 0, 0, 0, last, bytearray(GAPS.size))
    assert len(rec) == 3 * size


# the engine's Sampler uses the C tick (not with NETESTO_PURE_PYTHON=1)
c_tick = pytest.mark.skipif(records.sample_tick is None, reason="the engine samples in Python here")


def _begun(worker, cls, test: str, n: int) -> list:
    """n begun flow ends of cls without sockets (their rows repeat the last values), with a file each."""
    made = []
    for i in range(n):
        end = cls(worker, FlowSpec(flow_id=f"{test}-{i}", test=test, server="127.0.0.1", port=1, interval=0.01,
                                   exp=1))
        end.begin()  # one row, through FlowEnd.sample
        end.flush()  # no rows buffered, the next block in flush_rows rows
        end.last_tcp[:] = bytes(range(256)) + bytes(LAST - 256)
        made.append(end)
    return made


@pytest.fixture
def ends(tmp_path):
    """Three begun stream flow ends of one worker."""
    loop = Loop()
    worker = Worker(loop, str(tmp_path), lambda event: None)
    made = _begun(worker, StreamClient, "TCP_STREAM", 3)
    yield worker, made
    for end in made:
        end.finish()
    loop.close()


@c_tick
def test_the_c_tick_builds_the_rows_flowend_sample_builds(ends):
    _, (a, b, _c) = ends
    for end in (a, b):
        end.tx, end.rx, end.trans, end.conns, end.udp_lost, end.udp_reord = 7, 8, 9, 10, -1, 12
    b.gaps[:] = a.gaps
    due, failed, python = _ext.sample_tick([a], 100.5, 50.25)
    b.sample(50.25, 100.5)
    assert (due, failed) == ([], []) and (a.nrows, a.gaps) == (b.nrows, b.gaps) == (1, b.gaps)
    assert a.b_rec[:a.rec_len] == b.b_rec[:b.rec_len]
    assert HEAD.unpack_from(a.b_rec) == (100.5, 50.25, 7, 8, 9, 10, 0, 12)
    assert a.b_rec[HEAD.size:a.rec_len] == a.last_tcp[:INFO_LEN]


@c_tick
def test_a_flow_end_the_c_tick_cannot_sample_is_reported_and_the_others_are_sampled(ends):
    worker, (a, bad, c) = ends
    bad.b_rec = bytes(bad.rec_len)  # not a bytearray
    a.flush_at = a.nrows + 1  # a's block is due after this tick
    due, failed, python = _ext.sample_tick([a, bad, c], 1.0, 2.0)
    assert [(f, type(e)) for f, e in failed] == [(bad, TypeError)]
    if _ext.TICK_WRITES:  # the tick wrote a's block itself
        assert due == [] and (a.nrows, a.samples, a.writer.rows) == (0, 2, 2)
    else:
        assert due == [(a, 0)] and a.nrows == 1
        a.flush()
    assert (bad.nrows, c.nrows) == (0, 1)
    # the Sampler ends the flow it could not sample and goes on with the others
    worker.sampler._tick(0.01)
    assert bad.finished and bad.error.startswith("sampling failed: TypeError")
    assert not a.finished and not c.finished and c.nrows == 2 and a.nrows == 1


def _twins(ends, rows: int):
    """Flow ends a and b of the fixture with the same state, rows rows buffered, a block due."""
    _, (a, b, _c) = ends
    for end in (a, b):
        end.tx, end.rx, end.trans, end.conns, end.udp_lost, end.udp_reord = 7, 8, 9, 10, 11, 12
        end.flush_at = rows
    b.gaps[:] = a.gaps
    for i in range(rows - 1):
        for end in (a, b):
            end.sample(60.0 + i, 30.0 + i)
    return a, b


tick_writes = pytest.mark.skipif(records.sample_tick is None or not getattr(_ext, "TICK_WRITES", 0),
                                 reason="the C tick does not write blocks here (pure Python, or built without zlib)")


def _last_block(path) -> bytes:
    """The payload of the last block of a .nflow file (its checksum verified)."""
    return blocks(open(path, "rb").read())[-1]


# 20 rows: n a fixint, the rows a bin16; 200 rows (1 ms sampling): n a uint8, the rows a bin32
@tick_writes
@pytest.mark.parametrize("rows", [20, 200])
def test_the_c_tick_writes_the_block_flowend_flush_writes(ends, rows):
    a, b = _twins(ends, rows)
    due, failed, python = _ext.sample_tick([a], 100.0, 70.0)
    b.sample(70.0, 100.0)
    b.flush()
    assert (due, failed) == ([], [])
    assert (a.nrows, a.flush_at, a.samples, a.writer.rows) == (0, a.flush_rows, rows + 1, rows + 1)
    assert _last_block(a.writer.path) == _last_block(b.writer.path)  # byte for byte: crc, msgpack, rows
    path = a.writer.path
    a.finish()
    flow = read_flow(path)  # the tick's block, then finish()'s last row and summary
    assert not flow.truncated and flow.summary["samples"] == rows + 2
    assert list(flow.columns["t_mono"][-3:-1]) == [60.0 + rows - 2, 70.0]


@tick_writes
def test_a_short_write_of_the_c_tick_goes_on_in_python(ends):
    a, b = _twins(ends, 40)  # a block of 40 rows: more than a small pipe takes at once
    rd, wr = os.pipe()
    fcntl.fcntl(wr, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(wr, False)
    a.writer._fd, file_fd = wr, a.writer._fd
    try:
        due, failed, python = _ext.sample_tick([a], 100.0, 70.0)
        assert failed == [] and [f for f, _ in due] == [a] and 0 < due[0][1] < 40 * a.rec_len
        got = bytearray()
        reader = threading.Thread(target=lambda: [got.extend(chunk) for chunk in iter(lambda: os.read(rd, 65536), b"")])
        reader.start()
        a.flush(due[0][1])  # the Sampler's way: Python writes the rest
        os.close(wr)
        reader.join(5)
    finally:
        a.writer._fd = file_fd
        os.close(rd)
    b.sample(70.0, 100.0)
    b.flush()
    assert blocks(bytes(PREAMBLE.size) + got) == [_last_block(b.writer.path)]  # exactly one whole block
    assert (a.nrows, a.samples) == (0, 41)


@tick_writes
def test_a_block_the_c_tick_cannot_write_ends_its_flow_and_keeps_the_file(ends, tmp_path):
    worker, (a, _b, c) = ends
    a.flush_at = a.nrows + 1
    writer = a.writer
    os.close(writer._fd)
    writer._fd = os.open(tmp_path, os.O_RDONLY)  # writev fails: EBADF
    due, failed, python = _ext.sample_tick([a, c], 1.0, 2.0)
    assert failed == [] and due == [(a, 0)] and c.nrows == 1
    worker.sampler._sample([a], [], 2.0, 1.0)  # the Sampler hands it to FlowEnd.flush: OSError
    assert a.finished and a.error.startswith("sampling failed: OSError") and not c.finished
    assert a.writer is None and writer._fd is None  # the file is closed, not leaked


@c_tick
def test_the_c_tick_reads_only_flow_ends_with_their_slots(ends):
    _, (a, _b, _c) = ends

    class NoSlots:
        sock = None

    with pytest.raises(TypeError, match="is not a slot"):
        _ext.sample_setup(NoSlots, LAT_BATCH)
    with pytest.raises(TypeError):
        _ext.sample_setup(42, LAT_BATCH)
    due, failed, python = _ext.sample_tick([NoSlots(), a], 1.0, 2.0)
    assert due == [] and [type(e) for _, e in failed] == [TypeError] and a.nrows == 1
    del a.gaps
    due, failed, python = _ext.sample_tick([a], 1.0, 3.0)
    assert [(f, type(e)) for f, e in failed] == [(a, AttributeError)] and "gaps" in str(failed[0][1])
    a.gaps = bytearray(GAPS.size)  # the fixture's teardown finishes it


@pytest.fixture
def rr_ends(tmp_path):
    """Two begun RR flow ends (twins) of one worker."""
    loop = Loop()
    worker = Worker(loop, str(tmp_path), lambda event: None)
    made = _begun(worker, FlowEnd, "TCP_RR", 2)
    yield made
    for end in made:
        if not end.finished:
            end.finish()
    loop.close()


def _python_row(end, mono: float, wall: float) -> None:
    """An RR row as the Sampler's Python path builds it: FlowRecord.sample, its latency part filled after."""
    end.sample(mono, wall)
    end.fill_latency()


@c_tick
def test_the_c_tick_builds_the_rr_rows_the_python_twin_builds(rr_ends):
    """RR rows (client or server: latencies or none) from the C tick, byte for byte the Python
    path's: every row, the blocks in the files, the flow's histogram; and the rows the C tick
    leaves to Python (latencies folded early, a negative one) come back to the Sampler."""
    a, b = rr_ends
    rng = random.Random(4)
    whole = Histogram()
    for tick in range(2 * a.flush_rows + 5):  # two blocks and more
        values = [rng.randint(1_000, 3_000_000) for _ in range(rng.choice((0, 1, 5, 60, 700)))]
        if tick == 30:
            values.append(-5)  # the histogram's way: counted as 0
        for end in (a, b):
            end.tx, end.rx, end.trans = 100 * tick, 90 * tick, len(values)
            end.lat_raw.extend(array("q", values))
        if tick == 12:
            a.fold_latency()
            b.fold_latency()  # early, as a full lat_raw is: the interval histogram's path
        whole.record_many(array("q", values))
        due, failed, python = _ext.sample_tick([a], 200.0 + tick, 100.0 + tick)
        assert failed == [] and python == ([a] if tick in (12, 30) else [])
        if python:
            _python_row(a, 100.0 + tick, 200.0 + tick)
        for flow, written in due:
            flow.flush(written)
        _python_row(b, 100.0 + tick, 200.0 + tick)
        assert (a.nrows, a.samples) == (b.nrows, b.samples), tick
        assert a.b_rec[:a.nrows * a.rec_len] == b.b_rec[:b.nrows * b.rec_len], tick
        assert not a.lat_raw and not a.lat_pending
    assert a.hist.to_dict() == b.hist.to_dict() == whole.to_dict()
    paths = [end.writer.path for end in (a, b)]
    for end in (a, b):
        end.finish()
    flows = [read_flow(path) for path in paths]  # the C tick's blocks read back as the Python path's
    assert all(not f.truncated for f in flows) and flows[0].rows == flows[1].rows == 2 * a.flush_rows + 7
    for name in ("lat_count", "lat_p50", "lat_p999", "t_mono", "app_bytes_tx"):  # the ticks' rows (not begin's, finish's)
        assert list(flows[0].columns[name][1:-1]) == list(flows[1].columns[name][1:-1]), name
    assert flows[0].summary["latency_hist"] == whole.to_dict()


@c_tick
def test_the_c_tick_leaves_rows_whose_part_waits_to_python(rr_ends):
    a, _b = rr_ends
    a.lat_raw.extend(array("q", [5_000, 7_000]))
    a.sample(1.0, 2.0)  # the Python path: the part waits (lat_pending)
    assert a.lat_pending
    a.lat_raw.extend(array("q", [9_000]))
    due, failed, python = _ext.sample_tick([a], 2.5, 1.5)
    assert (due, failed, python) == ([], [], [a]) and a.nrows == 1  # nothing done: Python builds this row
    a.fill_latency()
    due, failed, python = _ext.sample_tick([a], 2.5, 1.5)
    assert (failed, python) == ([], []) and a.nrows == 2 and not a.lat_raw
    assert bytes(a.b_rec[2 * a.rec_len - LAT.size:2 * a.rec_len]) == interval_summary(array("q", [9_000]))


def test_rows_whose_parts_are_never_filled_between_ticks_stay_in_their_buffer(rr_ends):
    """A loop too busy to run the fills between two ticks: the block due waits for its parts and the
    buffer holds one row more than a block; the next row fills and writes it first (it used to be
    put past the buffer's end: "a row at ... of a ...-byte buffer", and the flow ended)."""
    a, _b = rr_ends
    whole = Histogram()
    for tick in range(3 * a.flush_rows):
        values = array("q", [1_000 + tick, 2_000 + tick])
        a.lat_raw.extend(values)
        whole.record_many(values)
        a.sample(1.0 + tick, 2.0 + tick)  # the Python path, no fill_latency between the ticks
        assert a.nrows <= a.flush_rows + 1 and len(a.b_rec) == (a.flush_rows + 1) * a.rec_len, tick
    a.fill_latency()
    path = a.writer.path
    a.finish()
    flow = read_flow(path)
    assert not flow.truncated and flow.rows == 3 * a.flush_rows + 2
    assert list(flow.columns["lat_count"][1:-1]) == [2] * (3 * a.flush_rows)
    assert flow.summary["latency_hist"] == whole.to_dict()


@pytest.mark.skipif(not hasattr(_ext, "crc32"), reason="built without zlib")
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1), st.integers(0, 15))
def test_the_c_ticks_checksum_is_zlibs(data, crc, skip):
    """The blocks' crc32 as the C tick computes it (carry-less multiplication where the CPU has it)
    is zlib's, for any length, start and alignment."""
    assert _ext.crc32(data[skip:], crc) == zlib.crc32(data[skip:], crc)
    assert _ext.crc32(data) == zlib.crc32(data)


@pytest.mark.skipif(not hasattr(_ext, "crc32"), reason="built without zlib")
def test_the_fast_checksum_is_used_where_the_cpu_has_it():
    """CRC32_FAST is 0 when the CPU lacks PCLMULQDQ or the folds disagreed with zlib at their
    check (then the tick uses zlib's crc32): on an x86 CPU with it, it must be 1."""
    flags = open("/proc/cpuinfo").read().split()
    if os.uname().machine != "x86_64" or "pclmulqdq" not in flags or "sse4_1" not in flags:
        pytest.skip("no PCLMULQDQ here")
    assert _ext.CRC32_FAST == 1


def test_a_stop_the_c_tick_hands_back_as_a_rows_failure_goes_on_up_and_ends_no_flow(ends):
    """A SIGTERM's exception raised while the C tick ran Python comes back in its failed list (or a hot row's
    code -1): it is the worker's stop (reported as "stopped by SIGTERM"), not a sampling failure of that flow
    (a busy `make test-busy` had it end the flow as "sampling failed: _Stop: SIGTERM")."""
    worker, (a, _b, c) = ends

    class Stop(BaseException):
        pass

    with pytest.raises(Stop):
        worker.sampler._left([], [(a, Stop("SIGTERM"))], [], [], 2.0, 1.0)
    with pytest.raises(Stop):
        worker.sampler.hot_rest(c, -1, Stop("SIGTERM"))
    assert not a.finished and not c.finished
    worker.sampler._left([], [(a, ValueError("bad row"))], [], [], 2.0, 1.0)  # an error of the flow's own: ends it
    assert a.finished and a.error.startswith("sampling failed: ValueError")
