"""A client flow's data phase: begin, progress events, the end, the file that says how it went.

:class:`ClientRun` is the base of :class:`~netesto.engine.kinds.client.ClientFlow`
(which connects, handshakes and starts it). The client decides when a flow
ends: after ``dur`` seconds :meth:`ClientRun.end` half-closes its connection
(TCP) or sends an end message on the control connection (UDP, CRR), and the
flow finishes when the server has finished its side, so both ends' byte
counts are final.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Any

from netesto.collectors.tcpinfo import TCP_INFO, TCP_INFO_FIELDS
from netesto.engine.kinds.flowend import FlowEnd, Worker, cpu_seconds, describe_error
from netesto.errors import TrafficError
from netesto.protocol.flowspec import FlowSpec

DRAIN_TIMEOUT = 10.0
PROGRESS_EVERY = 1.0
# the tests whose flow is one TCP connection for its whole time: its tcpi_bytes_acked is what the
# server's TCP received of ours (a CRR flow's connections come and go; UDP has no acks)
ACKED_TESTS = frozenset({"TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR", "TCP_RR"})
_ACKED_AT, _ACKED_SIZE = TCP_INFO_FIELDS["bytes_acked"]


class ClientRun(FlowEnd):
    """The data phase of a client flow; subclasses implement :meth:`run` and :meth:`end`."""

    side = "client"

    def __init__(self, worker: Worker, spec: FlowSpec) -> None:
        super().__init__(worker, spec)
        self.where = f"{spec.server}:{spec.port}"
        self.phase = "waiting"
        self.ctl: socket.socket | None = None  # the handshake connection
        self.reply: dict[str, Any] = {}
        self._inbuf = bytearray()
        self.last_progress: tuple[float, int, int, int | None] = (0.0, 0, 0, None)
        self.closing = False  # we told the server the flow is over
        self.ready_wall = 0.0  # when it had connected and handshaken (0: not yet)

    def _run(self) -> None:
        try:
            self.begin_client((self.start_mono, self.start_wall))
        except OSError as exc:
            self.fail(f"cannot record flow {self.spec.flow_id}: {describe_error(exc)}")
            return
        try:
            self.run()
        except (OSError, TrafficError) as exc:
            self.fail(describe_error(exc) if isinstance(exc, OSError) else exc.message)

    def begin_client(self, stamp: tuple[float, float]) -> None:
        self.phase = "running"
        self.begin(stamp)
        self.last_progress = (0.0, 0, 0, self.bytes_acked())
        start_at = self.spec.start_at
        self.worker.emit(
            {
                "event": "started",
                "flow": self.spec.flow_id,
                "t_wall": self.start_wall,
                "start_at": start_at,
                "skew": (self.start_wall - start_at) if start_at else 0.0,
                # when it had connected and handshaken: a flow not ready by its instant starts late
                "ready": self.ready_wall or self.start_wall,
                "ca": self.ca,
                "local": list(self.local),
                "remote": list(self.remote),
            }
        )
        self.timers.append(self.loop.call_at(self.start_mono + self.spec.dur, self._end))
        self.timers.append(
            self.loop.call_at(self.start_mono + self.spec.dur + DRAIN_TIMEOUT, self._watchdog)
        )
        self.timers.append(self.loop.call_at(self.start_mono + PROGRESS_EVERY, self._progress))

    def _end(self) -> None:
        if not self.finished:
            self.phase = "ending"
            try:
                self.end()
            except OSError as exc:
                self.fail_running(exc)

    def bytes_acked(self) -> int | None:
        """tcpi_bytes_acked of the flow's connection (None where it has no single TCP connection
        or cannot be read): what the server received of ours, unlike tx, which counts what the
        socket took in (its buffer fills first)."""
        if self.spec.test not in ACKED_TESTS or self.sock is None:
            return None
        try:
            raw = self.sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, _ACKED_AT + _ACKED_SIZE)
        except OSError:
            return None
        if len(raw) < _ACKED_AT + _ACKED_SIZE:
            return None
        return int.from_bytes(raw[_ACKED_AT:_ACKED_AT + _ACKED_SIZE], sys.byteorder)

    def _watchdog(self) -> None:
        self.fail(f"{self.where} did not end the flow within {DRAIN_TIMEOUT:.0f} s after its duration")

    def _progress(self) -> None:
        if self.finished:
            return
        now = time.monotonic()
        t0, tx0, rx0, acked0 = self.last_progress
        t0 = t0 or self.start_mono
        span = max(1e-9, now - t0)
        acked = self.bytes_acked()
        delivered = acked - acked0 if acked is not None and acked0 is not None else self.tx - tx0
        self.worker.emit(
            {
                "event": "progress",
                "flow": self.spec.flow_id,
                "t": round(now - self.start_mono, 3),
                "bytes_tx": self.tx,
                "bytes_rx": self.rx,
                "tx_bps": (self.tx - tx0) * 8 / span,
                "rx_bps": (self.rx - rx0) * 8 / span,
                "rate_bps": (self.tx - tx0 + self.rx - rx0) * 8 / span,
                "goodput_bps": (delivered + self.rx - rx0) * 8 / span,
                "transactions": self.trans,
            }
        )
        self.last_progress = (now, self.tx, self.rx, acked)
        self.timers.append(self.loop.call_at(now + PROGRESS_EVERY, self._progress))

    # ending

    def fail(self, message: str) -> None:
        if not self.finished:
            self.finish(message)

    def fail_running(self, exc: BaseException) -> None:
        self.fail(f"{describe_error(exc)} after {self.elapsed():.1f} s ({self.where})")

    def peer_closed(self) -> None:
        """EOF from the server: the normal end after we half-closed, an error before."""
        if self.closing:
            self.finish()
        else:
            self.fail(f"connection closed by peer after {self.elapsed():.1f} s ({self.where})")

    def close_sockets(self) -> None:
        super().close_sockets()
        if self.ctl is not None:
            self.loop.unregister(self.ctl.fileno())
            self.ctl.close()
            self.ctl = None

    def finish(self, error: str = "") -> None:
        self.worker.rt.release(self)
        if self.writer is None and not self.finished:
            # Failed before the data phase: still leave a file saying so.
            if not self.start_mono:
                self.start_wall = getattr(self, "requested_start", time.time())
                self.start_mono = time.monotonic()
                # and no CPU yet: what the process spent before is not this flow's
                self.cpu0 = cpu_seconds()
                self.sampling_cpu0 = self.worker.sampler.cpu_ns
            try:  # (no data phase: results name the flow as one that never started)
                self.open_writer(self.worker.datadir, {"started": False})
            except OSError:
                pass
        super().finish(error)

    # test specific

    def run(self) -> None:
        raise NotImplementedError

    def end(self) -> None:
        raise NotImplementedError


__all__ = ["ClientRun", "DRAIN_TIMEOUT", "PROGRESS_EVERY"]
