"""One end of a flow as the engine runs it: moving bytes, begin and end, the summary; the worker it runs in.

:class:`FlowEnd` is the base of every client- and server-side flow; what it
counts and writes is its base :class:`~netesto.engine.sampling.flowrecord.FlowRecord`.
:class:`Worker` is what the flow ends of one process share: the loop, the
:class:`~netesto.engine.sampling.sampler.Sampler`, the data dir, the event sink.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import resource
import socket
import struct
import time
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from netesto.collectors import tcpinfo
from netesto.engine.native import fastloop
from netesto.engine.sampling.flowrecord import LAT_BATCH, FlowRecord
from netesto.engine.sampling.grid import backlog
from netesto.engine.core.realtime import RealtimeHold
from netesto.engine.sampling.records import GAPS, sample_tick
from netesto.engine.sampling.sampler import Sampler
from netesto.errors import TrafficError
from netesto.protocol.flowspec import FlowSpec
from netesto.protocol.names import is_name

if TYPE_CHECKING:
    from netesto.engine.core.loop import Loop, Timer

SEND_CHUNK = 1 << 19  # 512 KiB: on a veth pair bbr keeps up ~15-20 % better than with 128-256 KiB writes (bench_stream)
RECV_SIZE = 1 << 18  # a stream receiver's reads (Worker.rxbuf)
RECV_TURN = 16  # reads of a receiver's turn at most (recv_burst): 4 MiB, ~1 ms at 30 Gbit/s, then the others' turn
# Both buffers page-aligned (anonymous mmaps), not wherever malloc puts a bytearray (16 bytes into an mmap, or
# on the heap): on this AMD EPYC the kernel's TCP copy into a buffer 16 bytes off a cache line took 2-3x the
# CPU per byte, and the old heap receive buffer cost the stream server 25 % more CPU per GB (see
# docs/raw-format.md). What is sent is a byte pattern in pages of its own, as the peers send (not the zero page)
_SEND_MAP = mmap.mmap(-1, SEND_CHUNK)
_SEND_MAP.write(bytes(range(256)) * (SEND_CHUNK // 256))
_SEND_BUF = memoryview(_SEND_MAP)
SPIN_SLICE = 0.002  # a solo stream end's blocking reads/sends give the loop a turn at least this often
_TIMEO_1MS = struct.pack("ll", 0, 1000)  # SO_RCVTIMEO/SO_SNDTIMEO of a spinning stream end


def safe_flow_id(flow_id: str) -> bool:
    """A flow id usable as a file name (no path separators, no leading dot)."""
    return is_name(flow_id)


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


class FlowEnd(FlowRecord):
    """One end of a flow: moves the bytes, begins and ends; subclasses per side and test type.

    What it counts and records is :class:`~netesto.engine.sampling.flowrecord.FlowRecord`'s.
    """

    def __init__(self, worker: "Worker", spec: FlowSpec) -> None:
        self.worker = worker
        self.loop: Loop = worker.loop
        super().__init__(spec)
        self.end_mono = 0.0
        self.cpu0 = self.cpu_end = 0.0
        self.sampling_cpu0 = 0  # the worker's Sampler.cpu_ns when this flow end began
        self.sampling_cpu_end = 0
        self.finished = False
        self.status = ""
        self.error = ""
        self.extra: dict[str, Any] = {}
        self.timers: list[Timer] = []
        self.spin_ready = False  # SO_RCVTIMEO and SO_SNDTIMEO are set for recv_spin/send_spin
        self.sampling_ok = True  # False once a row could not be built: no last row at the end

    # moving bytes (shared by both sides)

    def send_burst(self, sock: socket.socket) -> None:
        """A stream sender's turn: one chunk (less when the socket is nearly full).

        Not as many chunks as fit: a socket filled to the brim each turn waits
        for room released, so on a veth pair the receiver's ACKs, handled on
        its CPU, send the data, and a bbr socket's pacing timer moves there
        for good. With 4 bbr flows on a worker, 14-30 % of their segments left
        from the receiver's CPU, out of order with the rest, and they
        retransmitted ~15x more than iperf3's; one chunk a turn: 1.5-4 % and
        iperf3's retransmissions (docs/performance.md). cubic's goodput is the
        same either way.
        """
        try:
            self.tx += sock.send(_SEND_BUF)
        except BlockingIOError:
            pass

    def recv_burst(self, sock: socket.socket) -> bool:
        """A stream receiver's turn: reads into the worker's buffer until the socket is empty, at most
        :data:`RECV_TURN`; False at EOF.

        Past a short read too: what came during the read is taken in this turn,
        not after another trip through the loop (with 4 bbr flows on a worker,
        18 % more goodput; docs/performance.md).
        """
        recv_into = sock.recv_into
        view = self.worker.rxview
        try:
            for _ in range(RECV_TURN):
                n = recv_into(view)
                if n == 0:
                    return False
                self.rx += n
        except BlockingIOError:
            pass
        return True

    def recv_spin(self, sock: socket.socket) -> bool:
        """A receiver alone in its worker: blocking reads for up to :data:`SPIN_SLICE`; False at EOF.

        Each read waits at most 1 ms (SO_RCVTIMEO) and the loop gets a turn
        when a timer is due or the slice is over, so sampling, new connections
        and other sockets wait at most ~2 ms. One syscall per read instead of
        epoll_wait + read: ~20 % more bbr goodput than polled on one host, level
        on a later one with the low-water mark (:mod:`~netesto.engine.kinds.lowat`).
        """
        deadline = self._spin_deadline(sock)
        monotonic = time.monotonic
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

    def send_spin(self, sock: socket.socket) -> None:
        """A sender alone in its worker: blocking sends for up to :data:`SPIN_SLICE`.

        The twin of :meth:`recv_spin`: a full socket blocks the send for at
        most 1 ms (SO_SNDTIMEO: a partial count, or EAGAIN when nothing moved)
        and the loop gets a turn when a timer is due or the slice is over. One
        syscall per chunk instead of epoll_wait + send, and no partial send
        and EAGAIN round trip each time the socket fills.
        """
        deadline = self._spin_deadline(sock)
        monotonic = time.monotonic
        send = sock.send
        tx = self.tx
        sock.setblocking(True)
        try:
            while True:
                tx += send(_SEND_BUF)
                if monotonic() >= deadline:
                    return
        except BlockingIOError:
            return  # full for 1 ms: wait in the loop
        finally:
            self.tx = tx
            sock.setblocking(False)

    def _spin_deadline(self, sock: socket.socket) -> float:
        """When a spinning end gives the loop back its turn (its socket's 1 ms timeouts set once)."""
        if not self.spin_ready:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _TIMEO_1MS)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _TIMEO_1MS)
            self.spin_ready = True
        return min(self.loop.next_deadline(), time.monotonic() + SPIN_SLICE)

    def hot_point(self) -> None:
        """An idle point of an RR flow end in Python (a client's reply in, a server's reply out: nothing of
        its own in flight): its row now if one is due (:meth:`~netesto.engine.sampling.sampler.Sampler.hot`)."""
        if self.due_at <= time.monotonic():
            self.worker.sampler.hot(self)

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
        # the sampler's grid, so that results can tell each row's scheduled instant (docs/raw-format.md)
        interval = self.spec.interval
        extra = {"tick_epoch": self.worker.sampler.grid_point(interval), "tick_backlog": backlog(interval),
                 **self.header_extra()}
        self.open_writer(self.worker.datadir, extra)
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
        sampler = self.worker.sampler
        sampling_ns = self.sampling_cpu_end if ended else sampler.cpu_ns
        sampling = (sampling_ns - self.sampling_cpu0) / 1e9 if self.start_mono else 0.0
        lat = self.hist.summary(0.001)
        first, last, gaps, low, high = GAPS.unpack(self.gaps)
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
                # the worker's rows so far: taken at their flow ends' idle points (and what they cost), by sweeps
                "sampling_hot_rows": sampler.hot_rows,
                "sampling_hot_seconds": sampler.hot_ns / 1e9,
                "sampling_swept_rows": sampler.swept,
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


if sample_tick is not None and fastloop.sample_setup is not None:
    fastloop.sample_setup(FlowEnd, LAT_BATCH)


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
        self.rxbuf = mmap.mmap(-1, RECV_SIZE)  # page-aligned, as _SEND_BUF

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


__all__ = ["FlowEnd", "SEND_CHUNK", "SPIN_SLICE", "Worker", "check_datadir", "cpu_seconds",
           "describe_error", "io_handler", "json_line", "safe_flow_id"]
