"""The client of a drawn TCP_RR flow: closed loop on one connection, a drawn gap, request and reply each time.

Transaction ``i`` waits its gap (after reply ``i - 1``, or after the start), sends
:data:`~netesto.engine.kinds.workload.HEAD` and a payload of its drawn size, and
waits for the reply it asked for; then the next. It runs on the worker's epoll loop
in Python: the C loops take one request and reply size per flow, and the draws are
per transaction (docs/workloads.md measures what that costs).
"""

from __future__ import annotations

import socket
import time

from netesto.engine.core.loop import ERR, IN, OUT, Timer
from netesto.engine.kinds.workload import CHUNK, HEAD, OK, PATTERN, UNFINISHED, DrawnClient, want_out

_IN_ERR = IN | ERR
_perf_ns = time.perf_counter_ns


class DrawnRRClient(DrawnClient):
    """TCP_RR with drawn sizes and gaps (see the module doc)."""

    def run(self) -> None:
        self.sock, self.ctl = self.ctl, None
        assert self.sock is not None
        self.fd = self.sock.fileno()
        self.start_log()
        self.view = self.worker.rxview
        self.ending = False
        self.busy = False  # a request is out (or going out) and its reply not all in
        self.out_wait = False  # EPOLLOUT asked for: the request did not fit
        self.gap_timer: Timer | None = None
        self.head = b""
        self.left = self.got = self.want = 0
        self.cur = (0, 0, 0, 0.0, 0.0)  # seq, req, reply, t_due, t_start (wall)
        self.t0 = 0
        self.loop.register(self.fd, IN, self._on_event)
        self._draw()

    def _draw(self) -> None:
        """The next transaction: its draws, then its gap (none: it starts now)."""
        req, reply, gap = self.draws.next()
        self.cur = (self.draws.count - 1, req, reply, time.time() + gap, 0.0)
        if gap > 0:
            self.gap_timer = self.loop.call_later(gap, self._begin)
        else:
            self._begin()

    def _begin(self) -> None:
        self.gap_timer = None
        if self.finished:
            return
        if self.ending:
            self._half_close()
            return
        seq, req, reply, due, _ = self.cur
        self.cur = (seq, req, reply, due, time.time())
        first = min(req, CHUNK)  # the header and the payload's start in one send: one segment for a small one
        self.head = HEAD.pack(req, reply) + PATTERN[:first]
        self.left, self.got, self.want = req - first, 0, reply
        self.busy = True
        self.t0 = _perf_ns()
        self._pump()

    def _pump(self) -> None:
        """Send what fits of the request; the rest waits for EPOLLOUT."""
        sock = self.sock
        assert sock is not None
        try:
            while self.head or self.left:
                if self.head:
                    n = sock.send(self.head)
                    self.head = self.head[n:]
                else:
                    n = sock.send(PATTERN[:min(self.left, CHUNK)])
                    self.left -= n
                self.tx += n
        except BlockingIOError:
            self.out_wait = want_out(self, self.fd, True, self.out_wait)
            return
        self.out_wait = want_out(self, self.fd, False, self.out_wait)

    def _on_event(self, events: int) -> None:
        sock = self.sock
        if sock is None:
            return
        try:
            if events & OUT and (self.head or self.left):
                self._pump()
            if not events & _IN_ERR:
                return
            want = self.want - self.got
            n = sock.recv_into(self.view, want if 0 < want < len(self.view) else len(self.view))
            if n == 0:
                self.peer_closed()
                return
            self.rx += n
            if not self.busy:
                self.fail(f"{self.where} sent {n} bytes nobody asked for")
                return
            self.got += n
            if self.got >= self.want:
                self._done()
        except BlockingIOError:
            pass
        except OSError as exc:
            self.fail_running(exc)

    def _done(self) -> None:
        ns = _perf_ns() - self.t0
        self.busy = False
        self.record_latency(ns)
        self.trans += 1
        seq, req, reply, due, start = self.cur
        assert self.log is not None
        self.log.record(seq, due, start, 0.0, ns / 1e9, req, reply, OK)
        if self.ending:
            self._half_close()
        else:
            self._draw()

    def _half_close(self) -> None:
        if not self.closing and self.sock is not None:
            self.sock.shutdown(socket.SHUT_WR)
            self.closing = True

    def end(self) -> None:
        self.ending = True  # the reply in flight comes first
        if not self.busy:
            if self.gap_timer is not None:
                self.gap_timer.cancel()
                self.gap_timer = None
            self._half_close()

    def abandon(self) -> None:
        if getattr(self, "busy", False) and self.log is not None:
            seq, req, reply, due, start = self.cur
            self.log.record(seq, due, start, 0.0, 0.0, req, reply, UNFINISHED, error="in flight when the flow ended")
            self.busy = False
        if getattr(self, "gap_timer", None) is not None:
            self.gap_timer.cancel()  # type: ignore[union-attr]


__all__ = ["DrawnRRClient"]
