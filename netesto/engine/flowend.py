"""One end of a flow as the engine records it: counters, samples, the .nflow file, the summary.

:class:`FlowEnd` is the base of every client- and server-side flow. The
worker's :class:`Sampler` calls :meth:`FlowEnd.sample` on a fixed grid; a
sample appends one fixed-length record (stamps, counters, the raw
``tcp_info`` bytes, no decoding) and every ~0.2 s the buffered records are
written as they are, as one ``records`` block (the reader splits them into
columns, so that costs the sampling host nothing).
"""

from __future__ import annotations

import functools
import json
import os
import resource
import socket
import struct
import time
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from netesto.errors import TrafficError
from netesto.protocol.names import is_name
from netesto.engine import fastloop
from netesto.collectors import tcpinfo
from netesto.raw.columns import (
    APP_COLUMNS,
    CC_COLUMNS,
    FLOW_COLUMNS,
    LATENCY_COLUMNS,
    TCP_INFO_COLUMNS,
    TIME_COLUMNS,
)
from netesto.engine.histogram import Histogram
from netesto.raw.nflow import FlowWriter, RecordLayout
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import RR_TESTS

if TYPE_CHECKING:
    from netesto.engine.loop import Loop, Timer

SEND_CHUNK = 1 << 19  # 512 KiB: on a veth pair bbr keeps up ~15-20 % better than with 128-256 KiB writes (bench_stream)
_SEND_BUF = memoryview(bytes(SEND_CHUNK))
FLUSH_SECONDS = 0.2  # a block per ~0.2 s: a crash loses at most that much
SPIN_SLICE = 0.002  # a solo receiver's blocking reads give the loop a turn at least this often
_RCVTIMEO_1MS = struct.pack("ll", 0, 1000)
_SIZES = {"B": 1, "I": 4, "Q": 8, "d": 8}

_TCP_INFO = tcpinfo.TCP_INFO
_TCP_CC_INFO = tcpinfo.TCP_CC_INFO
_INFO_LEN = tcpinfo.TCP_INFO_LEN
_HEAD = struct.Struct("=dd6Q")  # t_wall, t_mono and the six APP_COLUMNS counters
_LAT = struct.Struct("=I4x7d")  # lat_count, then lat_min .. lat_p999 (8-byte aligned)
_ZERO_LAT = bytes(_LAT.size)
_GAPS = struct.Struct("=5d")  # first and last sample stamp, gaps between samples: count, min, max
_CC_SLOT = 24  # tcp_bbr_info (20 bytes) padded so every record stays 8-byte aligned


def _record_layout(tcp: bool, cc: bool, lat: bool) -> RecordLayout:
    """A sample record: head, [struct tcp_info], [tcp_bbr_info, padded], [latency].

    Only the parts a flow end can have are in its records (a UDP flow has no
    tcp_info, only bbr has cc info, only RR tests latency); the reader zero-fills
    the columns its layout leaves out. Every field is aligned to its size.
    """
    offsets = [(c.name, i * 8) for i, c in enumerate(TIME_COLUMNS + APP_COLUMNS)]
    base = _HEAD.size
    parts = [(tcpinfo.TCP_INFO_FIELDS, _INFO_LEN)] if tcp else []
    parts += [(tcpinfo.CC_INFO_FIELDS, _CC_SLOT)] if cc else []
    for fields, length in parts:
        offsets += [(name, base + off) for name, (off, _) in fields.items()]
        base += length
    if lat:
        offsets += [(c.name, base + (8 * i if i else 0)) for i, c in enumerate(LATENCY_COLUMNS)]
        base += _LAT.size
    layout = RecordLayout(base, tuple(offsets))
    assert layout.problem(FLOW_COLUMNS) is None, layout
    return layout


# (tcp, bbr, rr) -> layout; bbr implies tcp
_LAYOUTS = {(t, b, r): _record_layout(t, b, r) for t in (False, True) for b in {False, t} for r in (False, True)}
assert {n for n, _ in _LAYOUTS[True, True, True].offsets} == {c.name for c in FLOW_COLUMNS}
# The raw-record layouts must agree with the column contract (typecode sizes).
for _col in TCP_INFO_COLUMNS + CC_COLUMNS:
    _fields = tcpinfo.TCP_INFO_FIELDS if _col in TCP_INFO_COLUMNS else tcpinfo.CC_INFO_FIELDS
    assert _fields[_col.name][1] == _SIZES[_col.typecode], _col


def _row_size(parts: int) -> int:
    return _HEAD.size + (_INFO_LEN if parts else 0) + (_CC_SLOT if parts == 2 else 0)


def _sample_row_py(rec: bytearray, at: int, sock: socket.socket | None, parts: int, wall: float, mono: float,
                   tx: int, rx: int, trans: int, conns: int, lost: int, reordered: int, last: bytearray,
                   gaps: bytearray) -> int:
    """fastloop.sample_row in Python (see there): one row put at byte ``at`` of ``rec``; options read."""
    if not 0 <= at <= len(rec):
        raise ValueError(f"a row at {at} of a {len(rec)}-byte buffer")
    grow = at + _row_size(parts) - len(rec)
    if grow > 0:
        rec += bytes(grow)
    _HEAD.pack_into(rec, at, wall, mono, tx, rx, trans, conns, lost if lost > 0 else 0, reordered)
    first, prev, count, low, high = _GAPS.unpack(gaps)
    if count == 0 and first == 0 and prev == 0:
        _GAPS.pack_into(gaps, 0, mono, mono, 0, 0, 0)
    else:
        gap = mono - prev
        _GAPS.pack_into(gaps, 0, first, mono, count + 1, gap if count == 0 or gap < low else low,
                        gap if count == 0 or gap > high else high)
    if not parts:
        return 0
    read = 0
    if sock is not None:
        try:
            last[:_INFO_LEN] = sock.getsockopt(6, _TCP_INFO, _INFO_LEN).ljust(_INFO_LEN, b"\0")
            read = 1
            if parts == 2:
                last[_INFO_LEN:] = sock.getsockopt(6, _TCP_CC_INFO, tcpinfo.CC_INFO_LEN).ljust(_CC_SLOT, b"\0")
                read = 2
        except OSError:
            pass  # closed or gone: the row carries the last values
    at += _HEAD.size
    size = _INFO_LEN + (_CC_SLOT if parts == 2 else 0)
    rec[at:at + size] = memoryview(last)[:size]
    return read


# The C row builder and tick, unless an extension built from other sources lays rows out differently.
_C_ROWS = fastloop.ROW_LAYOUT == (_HEAD.size, _INFO_LEN, _CC_SLOT)
_sample_row: Callable[..., int] = fastloop.sample_row if fastloop.sample_row and _C_ROWS else _sample_row_py
_sample_tick = fastloop.sample_tick if _C_ROWS and fastloop.sample_setup else None  # set up after FlowEnd


def safe_flow_id(flow_id: str) -> bool:
    """A flow id usable as a file name (no path separators, no leading dot)."""
    return is_name(flow_id)


def flow_path(datadir: str | os.PathLike[str], exp: int, flow_id: str, side: str) -> Path:
    path = Path(datadir) / str(exp) / "flows" / f"{flow_id}.{side}.nflow"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


_End = TypeVar("_End", bound="FlowEnd")


def io_handler(method: Callable[[_End, int], None]) -> Callable[[_End, int], None]:
    """Wrap a flow's event handler: would-block means nothing to do, another OSError fails the flow."""

    @functools.wraps(method)
    def handler(self: _End, events: int) -> None:
        try:
            method(self, events)
        except BlockingIOError:
            pass
        except OSError as exc:
            self.fail_running(exc)

    return handler


class RealtimeHold:
    """SCHED_FIFO (priority 1) for this process while any flow is about to start.

    A flow takes the hold :data:`~netesto.engine.client.RT_LEAD` before its
    start instant, so the loop's timer wakes on time on a busy host (a normal
    task's wake-up can be tens of ms late there), and lets go once its start
    marker is out. Without the privilege nothing changes; a policy somebody
    chose for us (e.g. chrt) is left alone.
    """

    def __init__(self) -> None:
        self.holders: set[object] = set()
        self._saved = -1  # the policy to go back to; -1: we changed nothing

    def acquire(self, holder: object) -> None:
        if not self.holders:
            try:
                if os.sched_getscheduler(0) == os.SCHED_OTHER:
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
                    self._saved = os.SCHED_OTHER
            except (OSError, AttributeError):
                self._saved = -1
        self.holders.add(holder)

    def release(self, holder: object) -> None:
        if holder not in self.holders:
            return
        self.holders.discard(holder)
        if not self.holders and self._saved != -1:
            try:
                os.sched_setscheduler(0, self._saved, os.sched_param(0))
            except OSError:
                pass
            self._saved = -1


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror.lower()
        return f"{text} ({exc.filename})" if exc.filename else text
    return str(exc) or type(exc).__name__


def check_datadir(datadir: str | os.PathLike[str]) -> None:
    """Make ``datadir`` if need be; TrafficError, before any flow starts, when raw files cannot go there."""
    try:
        os.makedirs(datadir, exist_ok=True)
    except OSError as exc:
        raise TrafficError(f"cannot keep raw files in {os.fspath(datadir)}: {(exc.strerror or str(exc)).lower()}") from None
    if not os.access(datadir, os.W_OK | os.X_OK):
        raise TrafficError(f"cannot keep raw files in {os.fspath(datadir)}: not writable")


class FlowEnd:
    """Counters and samples of one flow end; subclasses move the bytes.

    What the C sampler tick reads is in slots (it reads them in place), so
    subclasses must not redefine these names as properties or class values.
    """

    __slots__ = ("sock", "rec_parts", "tx", "rx", "trans", "conns", "udp_lost", "udp_reord", "last_tcp", "gaps",
                 "b_rec", "nrows", "rec_len", "flush_at", "__dict__", "__weakref__")
    side = "client"

    def __init__(self, worker: "Worker", spec: FlowSpec) -> None:
        self.worker = worker
        self.loop: Loop = worker.loop
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
        self.hist = Histogram()  # overall latency, ns
        self.ihist = Histogram()  # this interval's latency, ns
        self.lat_raw = array("q")  # latencies (ns) not yet in ihist: appending is the cheapest hot path
        self.gaps = bytearray(_GAPS.size)  # the sampling jitter, see _GAPS
        self.ca = ""
        self.local: tuple[str, int] = ("", 0)
        self.remote: tuple[str, int] = ("", 0)
        self.start_wall = 0.0
        self.start_mono = 0.0
        self.end_mono = 0.0
        self.cpu0 = self.cpu_end = 0.0
        self.sampling_cpu0 = 0  # the worker's Sampler.cpu_ns when this flow end began
        self.sampling_cpu_end = 0
        self.finished = False
        self.status = ""
        self.error = ""
        self.extra: dict[str, Any] = {}
        self.writer: FlowWriter | None = None
        self.flush_rows = max(1, round(FLUSH_SECONDS / spec.interval))
        self.last_tcp = bytearray(_INFO_LEN + _CC_SLOT)  # the last tcp_info and padded tcp_bbr_info read
        self.rec_cc = False  # records carry cc info (bbr): fixed when the file is opened
        self.rec_parts = 1 if self.is_tcp else 0  # what sample_row puts after the head: 0, 1 (+tcp_info), 2 (+cc)
        self.rec_len = _LAYOUTS[self.is_tcp, False, self.is_rr].length
        self.timers: list[Timer] = []
        self.spin_ready = False  # SO_RCVTIMEO is set for recv_spin
        self.sampling_ok = True  # False once a row could not be built: no last row at the end
        # The rows of the next block, one record each (see _record_layout), row i at i * rec_len: allocated
        # once for a block and kept (rows written in place; a growing bytearray would be copied on append).
        self.b_rec = bytearray()
        self._reset_buffers()
        self.samples = 0  # rows written

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
        layout = _LAYOUTS[self.is_tcp, self.rec_cc, self.is_rr]
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
            _sample_row(bytearray(), 0, sock, 2 if self.is_bbr else 1, 0.0, 0.0, 0, 0, 0, 0, 0, 0, self.last_tcp,
                        bytearray(_GAPS.size))

    def sample(self, mono: float, wall: float | None = None) -> None:
        """Append one row stamped ``mono``/``wall`` (the Sampler's tick instant;
        ``wall`` defaults to now). Called by the Sampler, and once more at the end.

        Kept lean: the row (stamps, counters, one getsockopt, two for bbr) is
        built by one call (in C when the extension is built); the block of
        records is written as it is (see :meth:`flush`).
        """
        rec = self.b_rec
        at = self.nrows * self.rec_len
        _sample_row(rec, at, self.sock, self.rec_parts, time.time() if wall is None else wall, mono, self.tx,
                    self.rx, self.trans, self.conns, self.udp_lost, self.udp_reord, self.last_tcp, self.gaps)
        if self.is_rr:
            at += self.rec_len - _LAT.size
            rec[at:at + _LAT.size] = self._latency_record()
        self.nrows += 1
        if self.nrows >= self.flush_at:
            self.flush()

    def _latency_record(self) -> bytes:
        """The latency part of a row: this interval's histogram summary, then a new interval."""
        if self.lat_raw:
            self.fold_latency()
        ih = self.ihist
        if not ih.count:
            return _ZERO_LAT
        s = ih.summary(0.001)
        self.hist.merge(ih)
        ih.clear()
        return _LAT.pack(s.count, s.min, s.mean, s.max, s.p50, s.p90, s.p99, s.p999)

    # moving bytes (shared by both sides)

    def send_burst(self, sock: socket.socket) -> None:
        """A stream sender's turn: up to four chunks, fewer once the socket is full."""
        send = sock.send
        for _ in range(4):
            n = send(_SEND_BUF)
            self.tx += n
            if n < SEND_CHUNK:
                break

    def recv_burst(self, sock: socket.socket) -> bool:
        """A stream receiver's turn: up to four reads into the worker's buffer; False at EOF."""
        recv_into = sock.recv_into
        view = self.worker.rxview
        for _ in range(4):
            n = recv_into(view)
            if n == 0:
                return False
            self.rx += n
            if n < len(view):
                break
        return True

    def recv_spin(self, sock: socket.socket) -> bool:
        """A receiver alone in its worker: blocking reads for up to :data:`SPIN_SLICE`; False at EOF.

        Each read waits at most 1 ms (SO_RCVTIMEO) and the loop gets a turn
        when a timer is due or the slice is over, so sampling, new connections
        and other sockets wait at most ~2 ms. One syscall per read instead of
        epoll_wait + read: on a 2-vCPU veth pair a blocking reader keeps up
        with a bbr sender ~20 % better than a polled one (bench_stream).
        """
        if not self.spin_ready:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _RCVTIMEO_1MS)
            self.spin_ready = True
        monotonic = time.monotonic
        deadline = min(self.loop.next_deadline(), monotonic() + SPIN_SLICE)
        recv_into = sock.recv_into
        view = self.worker.rxview
        rx = self.rx
        sock.setblocking(True)
        try:
            while True:
                n = recv_into(view)
                if n == 0:
                    return False
                rx += n
                if monotonic() >= deadline:
                    return True
        except BlockingIOError:
            return True  # nothing for 1 ms: wait in the loop
        finally:
            self.rx = rx
            sock.setblocking(False)

    def read_ctl(self, sock: socket.socket, size: int = 4096) -> bytes | None:
        """One read of a control connection: None when there is nothing (or it failed the flow)."""
        try:
            return sock.recv(size)
        except BlockingIOError:
            return None
        except OSError as exc:
            self.fail_running(exc)
            return None

    def fail_running(self, exc: BaseException) -> None:
        """End the flow with an error from its sockets (sides say where)."""
        self.finish(describe_error(exc))

    def fold_latency(self) -> None:
        """Move the buffered latencies into this interval's histogram."""
        self.ihist.record_many(self.lat_raw)
        del self.lat_raw[:]

    def record_latency(self, ns: int) -> None:
        self.lat_raw.append(ns)
        if len(self.lat_raw) >= 65536:  # bounded memory even with long intervals
            self.fold_latency()

    def flush(self, written: int = 0) -> None:
        """Write the buffered rows as one ``records`` block (about every 0.2 s);
        ``written`` bytes of it are already out (the C tick's writev fell short)."""
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

    # lifecycle

    def begin(self, stamp: tuple[float, float] | None = None) -> None:
        """The data phase starts now (or at ``stamp``, (mono, wall)): stamp, open the file, sample."""
        self.start_mono, self.start_wall = stamp or (time.monotonic(), time.time())
        self.cpu0 = cpu_seconds()
        self.sampling_cpu0 = self.worker.sampler.cpu_ns
        if self.sock is not None and self.is_tcp:
            try:
                self.ca = tcpinfo.congestion_control(self.sock)
            except OSError:
                pass
        self.is_bbr = self.ca == "bbr"
        self.open_writer(self.worker.datadir, self.header_extra())
        self.worker.sampler.add(self)

    def header_extra(self) -> dict[str, Any]:
        return {}

    def elapsed(self) -> float:
        return time.monotonic() - self.start_mono if self.start_mono else 0.0

    def finish(self, error: str = "") -> None:
        """End this flow end: last sample, summary, close the file, report."""
        if self.finished:
            return
        self.finished = True
        for timer in self.timers:
            timer.cancel()
        self.worker.sampler.remove(self)
        now = time.monotonic()
        self.end_mono = now
        self.cpu_end = cpu_seconds()  # the CPU over the same span as the duration
        self.sampling_cpu_end = self.worker.sampler.cpu_ns
        if self.writer is not None:
            if self.sampling_ok:
                self.sample(now)
            self.flush()
        self.close_sockets()
        self.status = "error" if error else "ok"
        self.error = error
        summary = self.summary()
        if self.writer is not None:
            self.flush()
            self.writer.close(summary)
            self.writer = None
        self.worker.flow_done(self, summary)

    def close_sockets(self) -> None:
        if self.sock is not None:
            try:
                self.loop.unregister(self.sock.fileno())
            except (OSError, ValueError):
                pass
            self.sock.close()
            self.sock = None

    def summary(self) -> dict[str, Any]:
        dur = (self.end_mono - self.start_mono) if self.start_mono else 0.0
        ended = self.finished
        cpu = (self.cpu_end if ended else cpu_seconds()) - self.cpu0 if self.start_mono else 0.0
        sampling_ns = self.sampling_cpu_end if ended else self.worker.sampler.cpu_ns
        sampling = (sampling_ns - self.sampling_cpu0) / 1e9 if self.start_mono else 0.0
        lat = self.hist.summary(0.001)
        first, last, gaps, low, high = _GAPS.unpack(self.gaps)
        out: dict[str, Any] = {
            "status": self.status,
            "error": self.error,
            "side": self.side,
            "test": self.spec.test,
            "ca": self.ca,
            "start_wall": self.start_wall,
            "end_wall": self.start_wall + dur if self.start_mono else 0.0,
            "duration": dur,
            "bytes_tx": self.tx,
            "bytes_rx": self.rx,
            "rate_tx_bps": self.tx * 8 / dur if dur > 0 else 0.0,
            "rate_rx_bps": self.rx * 8 / dur if dur > 0 else 0.0,
            "transactions": self.trans,
            "tps": self.trans / dur if dur > 0 else 0.0,
            "connections": self.conns,
            "latency_us": lat.to_dict(),
            "latency_hist": self.hist.to_dict(),
            "cpu": {
                "scope": "worker process",
                "seconds": cpu,
                "percent": 100.0 * cpu / dur if dur > 0 else 0.0,
                # of which the worker's sampler ticks (all its flows'), the cost of sampling
                "sampling_seconds": sampling,
                "sampling_percent": 100.0 * sampling / cpu if cpu > 0 else 0.0,
            },
            "samples": self.samples,
            "interval": self.spec.interval,
            "sample_spacing_us": {
                "count": int(gaps),
                "min": low * 1e6,
                "mean": (last - first) / gaps * 1e6 if gaps else 0.0,
                "max": high * 1e6,
            },
        }
        if self.spec.test.startswith("UDP"):
            out.update(
                udp_sent=self.udp_sent,
                udp_received=self.udp_received,
                udp_lost=max(0, self.udp_lost),
                udp_reordered=self.udp_reord,
            )
        out.update(self.extra)
        return out


if _sample_tick is not None and fastloop.sample_setup is not None:
    fastloop.sample_setup(FlowEnd)


# For bench_sampling's within-run comparison only: with NETESTO_BENCH_SAMPLE_DUTY=W (seconds), ticks
# sample in one W-second window of each pair of the wall clock and not in the other (bench_window_sampled).
_BENCH_DUTY = float(os.environ.get("NETESTO_BENCH_SAMPLE_DUTY") or 0)


def bench_window_sampled(wall: float, window: float) -> bool:
    """Whether the ``window``-second window of the wall clock holding ``wall`` is sampled under
    NETESTO_BENCH_SAMPLE_DUTY: windows go in pairs (k // 2), and the Thue-Morse sequence (the
    parity of the pair number's one bits) says which of the two: as often the first as the second,
    with no period, so work the flows do at a fixed phase of each second (progress events, which
    all flows started together send together) lands as often in sampled windows as in the others."""
    k = int(wall / window)
    return k % 2 == bin(k // 2).count("1") % 2


class Sampler:
    """Samples every live flow end of a worker on a grid per interval (one timer per interval).

    A tick builds the rows of the flow ends without latency columns in one
    call of the C ``sample_tick`` when the extension is built, and calls
    :meth:`FlowEnd.sample` for the others (RR ends, or all of them without
    the extension). ``cpu_ns`` counts the thread CPU time spent in ticks (two
    clock reads per tick): flow summaries report it as what sampling cost
    their worker.
    """

    def __init__(self, loop: "Loop") -> None:
        self.loop = loop
        self.groups: dict[float, list[FlowEnd]] = {}
        # a group's flow ends in two lists: those sample_tick samples, and the others
        self.fast: dict[float, list[FlowEnd]] = {}
        self.slow: dict[float, list[FlowEnd]] = {}
        self.next: dict[float, float] = {}
        self.cpu_ns = 0

    def add(self, flow: FlowEnd) -> None:
        interval = flow.spec.interval
        group = self.groups.get(interval)
        if group is None:
            group = self.groups[interval] = []
            self.fast[interval], self.slow[interval] = [], []
            when = time.monotonic() + interval
            self.next[interval] = when
            self.loop.call_at(when, lambda: self._tick(interval))
        group.append(flow)
        (self.fast if _sample_tick is not None and not flow.is_rr else self.slow)[interval].append(flow)
        # Spread the flushes of a group over the ticks (flows that start
        # together would all write their block in the same tick): this flow's
        # first block is 1..flush_rows rows, the later ones flush_rows.
        if flow.nrows == 0:
            flow.flush_at = 1 + (len(group) - 1) % flow.flush_rows
        flow.sample(time.monotonic())  # a row at t=0: the baseline of every counter

    def remove(self, flow: FlowEnd) -> None:
        interval = flow.spec.interval
        for flows in (self.groups.get(interval), self.fast.get(interval), self.slow.get(interval)):
            if flows is not None and flow in flows:
                flows.remove(flow)

    def _tick(self, interval: float) -> None:
        group = self.groups.get(interval)
        if not group:
            for groups in (self.groups, self.fast, self.slow):
                groups.pop(interval, None)
            return
        cpu0 = time.thread_time_ns()
        # One instant per tick: every row of the tick carries the same stamps.
        now = time.monotonic()
        wall = time.time()
        if not _BENCH_DUTY or bench_window_sampled(wall, _BENCH_DUTY):
            self._sample(self.fast[interval], self.slow[interval], now, wall)
        self.cpu_ns += time.thread_time_ns() - cpu0
        when = self.next[interval] + interval
        if when <= now:  # we fell behind: skip the missed grid points
            when += ((now - when) // interval + 1) * interval
        self.next[interval] = when
        self.loop.call_at(when, lambda: self._tick(interval))

    def _sample(self, fast: list[FlowEnd], slow: list[FlowEnd], now: float, wall: float) -> None:
        if fast:
            assert _sample_tick is not None
            due, failed = _sample_tick(fast, wall, now)  # writes the due blocks too (TICK_WRITES)
            for flow, exc in failed:
                self._failed(flow, exc)
            for flow, written in due:
                self._guarded(flow, lambda: flow.flush(written))
        if slow:
            for flow in list(slow):  # finish() removes from it
                self._guarded(flow, lambda: flow.sample(now, wall))

    def _guarded(self, flow: FlowEnd, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # e.g. the disk is full: end this flow, sample the others
            self._failed(flow, exc)

    @staticmethod
    def _failed(flow: FlowEnd, exc: BaseException) -> None:
        if flow.finished:
            return
        if isinstance(exc, OSError) and flow.writer is not None:  # e.g. a full disk: write no more
            flow.writer.abandon()
            flow.writer = None
        flow.sampling_ok = False  # the same would fail again for the last row
        flow.finish(f"sampling failed: {type(exc).__name__}: {exc}")


class Worker:
    """What flow ends share in one process: the loop, sampler, data dir, event sink."""

    def __init__(self, loop: "Loop", datadir: str, emit: Callable[[dict[str, Any]], None]) -> None:
        self.loop = loop
        self.datadir = datadir
        self.emit = emit
        self.sampler = Sampler(loop)
        loop.on_error = self.handler_failed
        self.flows: list[FlowEnd] = []
        self.failed = 0
        self.rt = RealtimeHold()
        self.rxbuf = bytearray(1 << 18)
        self.rxview = memoryview(self.rxbuf)

    def handler_failed(self, callback: Callable[..., None], exc: Exception) -> None:
        """A handler or timer raised: fail the flow it belongs to, keep the others running."""
        owner = getattr(callback, "__self__", None)
        flow = owner if isinstance(owner, FlowEnd) else getattr(owner, "flow", None)
        if isinstance(flow, FlowEnd) and not flow.finished:
            flow.finish(f"internal error: {type(exc).__name__}: {exc}")
        elif not isinstance(flow, FlowEnd):
            self.emit({"event": "internal-error", "message": f"{type(exc).__name__}: {exc}"})

    def flow_done(self, flow: FlowEnd, summary: dict[str, Any]) -> None:
        if flow in self.flows:
            self.flows.remove(flow)
        if flow.error:
            self.failed += 1
        self.on_flow_done(flow, summary)

    def on_flow_done(self, flow: FlowEnd, summary: dict[str, Any]) -> None:
        pass


def json_line(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, separators=(",", ":"), default=str) + "\n").encode()


__all__ = ["SEND_CHUNK", "io_handler", "RealtimeHold", "FlowEnd", "Sampler", "Worker", "cpu_seconds", "flow_path", "safe_flow_id"]
