"""What a flow end records: its counters, a sample row per tick, the ``.nflow`` file they go to.

:class:`FlowRecord` is the base of :class:`~netesto.engine.kinds.flowend.FlowEnd`.
The worker's Sampler calls :meth:`FlowRecord.sample` on a fixed grid; a
sample appends one fixed-length record (stamps, counters, the raw
``tcp_info`` bytes, no decoding; see :mod:`netesto.engine.sampling.records`) and every
~0.5 s the buffered records are written as they are, as one ``records`` block
(the reader splits them into columns, so that costs the sampling host nothing).
"""

from __future__ import annotations

import math
import os
import socket
import time
from array import array
from pathlib import Path
from typing import Any

from netesto.collectors import tcpinfo
from netesto.engine.sampling.grid import next_point
from netesto.engine.sampling.histogram import Histogram
from netesto.engine.sampling.records import CC_SLOT, GAPS, INFO_LEN, LAT, LAYOUTS, ZERO_LAT, lat_summary, sample_row
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import RR_TESTS
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter

# a block per ~0.5 s: a crash loses at most that much. Writing a block costs per call (the syscall, the
# inode's times, the checksum's start) and per byte: 0.94 us a row in blocks of 20 rows (0.2 s), 0.71 in
# blocks of 50 (bench_sampling --cost prints both), a quarter of what a stream flow end's row costs.
FLUSH_SECONDS = 0.5
LAT_BATCH = 16384  # latencies already in rows go into the flow's histogram this many at a time
LAT_FOLD = 65536  # buffered latencies that go into the interval's histogram at once (bounded memory)


def flow_path(datadir: str | os.PathLike[str], exp: int, flow_id: str, side: str) -> Path:
    path = Path(datadir) / str(exp) / "flows" / f"{flow_id}.{side}.nflow"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class FlowRecord:
    """Counters and samples of one flow end and its ``.nflow`` file (the bytes move in its subclass FlowEnd).

    What the C sampler tick reads is in slots (it reads them in place), so
    subclasses must not redefine these names as properties or class values.
    """

    __slots__ = ("sock", "rec_parts", "tx", "rx", "trans", "conns", "udp_lost", "udp_reord", "last_tcp", "gaps",
                 "b_rec", "nrows", "rec_len", "flush_at", "lat_raw", "lat_done", "ihist", "lat_pending", "due_at",
                 "due_every", "__dict__", "__weakref__")
    side = "client"
    hot_sampled = False  # takes its rows at its idle points (the Sampler's hot rows: RR ends) rather than at the sweep

    def __init__(self, spec: FlowSpec) -> None:
        self.spec = spec
        self.tx = 0
        self.rx = 0
        self.trans = 0
        self.conns = 0
        self.udp_lost = 0
        self.udp_reord = 0
        self.udp_sent = 0
        self.udp_received = 0
        self.sock: socket.socket | None = None  # the socket whose TCP_INFO is sampled
        self.is_tcp = spec.test.startswith("TCP")
        self.is_bbr = False
        self.is_rr = spec.test in RR_TESTS
        self._hist = Histogram()  # overall latency, ns (see hist)
        self.ihist = Histogram()  # this interval's latency, ns, when folded before its end (see record_latency)
        self.lat_raw = array("q")  # latencies (ns) not yet in ihist: appending is the cheapest hot path
        self.lat_done = array("q")  # latencies already in a row's summary, not yet in _hist (see hist)
        # (byte offset in b_rec, the interval's latencies) of rows whose latency part waits (see sample)
        self.lat_pending: list[tuple[int, array[int]]] = []
        self.gaps = bytearray(GAPS.size)  # the sampling jitter, see GAPS
        # monotonic instant from which this flow end's next row is due (at its next idle point, see the
        # Sampler): inf while the Sampler does not sample it so; a row moves it on by due_every
        self.due_at = math.inf
        self.due_every = float(spec.interval)
        self.ca = ""
        self.local: tuple[str, int] = ("", 0)
        self.remote: tuple[str, int] = ("", 0)
        self.start_wall = 0.0
        self.start_mono = 0.0
        self.writer: FlowWriter | None = None
        self.flush_rows = max(1, round(FLUSH_SECONDS / spec.interval))
        self.last_tcp = bytearray(INFO_LEN + CC_SLOT)  # the last tcp_info and padded tcp_bbr_info read
        self.rec_cc = False  # records carry cc info (bbr): fixed when the file is opened
        self.rec_parts = 1 if self.is_tcp else 0  # what sample_row puts after the head: 0, 1 (+tcp_info), 2 (+cc)
        self.rec_len = LAYOUTS[self.is_tcp, False, self.is_rr].length
        # The rows of the next block, one record each (see records.py), row i at i * rec_len: allocated
        # once for a block and kept (rows written in place; a growing bytearray would be copied on append).
        self.b_rec = bytearray()
        self._reset_buffers()
        self.samples = 0  # rows written

    @property
    def hist(self) -> Histogram:
        """The flow end's latency histogram (ns) of every transaction sampled in a row so far."""
        self.fill_latency()
        self._fold_done()
        return self._hist

    def _fold_done(self) -> None:
        if self.lat_done:
            self._hist.record_many(self.lat_done)
            del self.lat_done[:]

    # recording

    def _reset_buffers(self) -> None:
        self.nrows = 0
        self.flush_at = self.flush_rows  # the Sampler makes a flow end's first block shorter

    def open_writer(self, datadir: str, extra_meta: dict[str, Any] | None = None) -> None:
        spec = self.spec.to_dict()
        spec.pop("token", None)
        meta = {
            "flow": spec,
            "side": self.side,
            "host": socket.gethostname(),
            "engine": "builtin",
            "start_wall": self.start_wall,
            "start_mono": self.start_mono,
            "interval": self.spec.interval,
            "ca": self.ca,
            "local": list(self.local),
            "remote": list(self.remote),
            "tcp_info_len": tcpinfo.TCP_INFO_LEN,
            "pid": os.getpid(),
        }
        meta.update(extra_meta or {})
        path = flow_path(datadir, self.spec.exp, self.spec.flow_id, self.side)
        # The record layout is fixed for the file: rows already buffered keep theirs.
        if self.nrows == 0:
            self.rec_cc = self.is_tcp and self.is_bbr
            self.rec_parts = 2 if self.rec_cc else int(self.is_tcp)
        layout = LAYOUTS[self.is_tcp, self.rec_cc, self.is_rr]
        self.rec_len = layout.length
        if len(self.b_rec) < (self.flush_rows + 1) * self.rec_len:  # a block and the last row of a flow end
            self.b_rec.extend(bytes((self.flush_rows + 1) * self.rec_len - len(self.b_rec)))
        self.writer = FlowWriter(path, FLOW_COLUMNS, meta, flush_rows=self.flush_rows, record=layout)

    def read_info(self) -> None:
        """Keep the sampled socket's tcp_info and cc info as the last known values
        (CRR: the connection is about to close; its rows until the next one carry them).
        Read by the row builder, into a row that is thrown away."""
        sock = self.sock
        if sock is not None and self.is_tcp:
            sample_row(bytearray(), 0, sock, 2 if self.is_bbr else 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0, self.last_tcp,
                        bytearray(GAPS.size))

    def sample(self, mono: float, wall: float | None = None) -> None:
        """Append one row stamped ``mono``/``wall`` (the Sampler's tick instant;
        ``wall`` defaults to now). Called by the Sampler, and once more at the end.

        Kept lean: the row (stamps, counters, one getsockopt, two for bbr) is
        built by one call (in C when the extension is built); the block of
        records is written as it is (see :meth:`flush`).
        """
        if self.lat_pending and self.nrows >= self.flush_at:
            # the last rows' parts were not filled before this tick (a busy loop): their block is
            # due and the buffer holds one row more, so they are filled and written now
            self.fill_latency()
        rec = self.b_rec
        at = self.nrows * self.rec_len
        sample_row(rec, at, self.sock, self.rec_parts, time.time() if wall is None else wall, mono, self.tx,
                    self.rx, self.trans, self.conns, self.udp_lost, self.udp_reord, self.last_tcp, self.gaps)
        if self.is_rr:
            at += self.rec_len - LAT.size
            lat = self.lat_raw
            if lat and not self.ihist.count:
                # the interval ends here; its summary can wait (fill_latency): the Sampler has it
                # computed between the loop's next handlers, not all flow ends' in the tick
                self.lat_pending.append((at, lat[:]))
                del lat[:]
            else:
                rec[at:at + LAT.size] = self._latency_record()
        self.nrows += 1
        due, every = self.due_at, self.due_every
        if due <= mono and every > 0:  # its next row: the next grid point (the C advance_due's twin)
            self.due_at = next_point(due, mono, every)
        if self.nrows >= self.flush_at and not self.lat_pending:  # else the block goes with its last part
            self.flush()

    def fill_latency(self) -> None:
        """Put the latency parts of the rows whose summary waits (see :meth:`sample`) into them,
        and write the block if it is due (it waited for them, out of the tick too).

        Each comes from the interval's latencies ranked (sorted in Python, selected in C)
        (:func:`~netesto.engine.sampling.records.lat_summary`: the same bytes as the interval
        histogram's at a fraction of the cost); the latencies wait in ``lat_done`` for the flow's
        histogram, which takes them in batches (one dict update per bucket and batch, where each
        tick's few dozen values hit about as many buckets as there are values).
        """
        pending = self.lat_pending
        if not pending:
            return
        rec, done = self.b_rec, self.lat_done
        for at, lat in pending:
            part = lat_summary(lat)
            if part is None:  # a negative latency (or a huge one): the histogram's way (it counts it as 0)
                part = self._interval_part(lat)
            rec[at:at + LAT.size] = part
            done.extend(lat)
        pending.clear()
        if len(done) >= LAT_BATCH:
            self._fold_done()
        if self.nrows >= self.flush_at:  # the block waited for its rows' parts (sample)
            self.flush()

    @staticmethod
    def _interval_part(lat: "array[int]") -> bytes:
        ih = Histogram()
        ih.record_many(lat)
        s = ih.summary(0.001)
        return LAT.pack(s.count, s.min, s.mean, s.max, s.p50, s.p90, s.p99, s.p999)

    def _latency_record(self) -> bytes:
        """The latency part of a row at once: the interval's summary, then a new interval
        (:meth:`fill_latency`'s way, or the interval histogram's when latencies were folded into
        it before the interval ended)."""
        lat = self.lat_raw
        ih = self.ihist
        if not ih.count:  # nothing folded early this interval (see record_latency)
            if not lat:
                return ZERO_LAT
            part = lat_summary(lat) or self._interval_part(lat)
            self.lat_done.extend(lat)
            del lat[:]
            if len(self.lat_done) >= LAT_BATCH:
                self._fold_done()
            return part
        if lat:
            self.fold_latency()
        s = ih.summary(0.001)
        self.hist.merge(ih)  # the order values come in does not matter to a histogram
        ih.clear()
        return LAT.pack(s.count, s.min, s.mean, s.max, s.p50, s.p90, s.p99, s.p999)

    def fold_latency(self) -> None:
        """Move the buffered latencies into this interval's histogram."""
        self.ihist.record_many(self.lat_raw)
        del self.lat_raw[:]

    def record_latency(self, ns: int) -> None:
        self.lat_raw.append(ns)
        if len(self.lat_raw) >= LAT_FOLD:
            self.fold_latency()

    def flush(self, written: int = 0) -> None:
        """Write the buffered rows as one ``records`` block (about every 0.5 s);
        ``written`` bytes of it are already out (the C tick's writev fell short). The latencies
        the block's rows whose latency part waits get it first (:meth:`fill_latency`)."""
        self.fill_latency()
        n = self.nrows
        if n == 0 or self.writer is None:
            return
        rows = memoryview(self.b_rec)[:n * self.rec_len]
        try:
            self.writer.write_records(n, rows, written)
        finally:
            rows.release()  # b_rec may grow again (a bytearray with a live view cannot)
        self.samples += n
        self._reset_buffers()



__all__ = ["FLUSH_SECONDS", "FlowRecord", "LAT_BATCH", "LAT_FOLD", "flow_path"]
