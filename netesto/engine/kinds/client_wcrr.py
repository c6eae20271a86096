"""The client of a drawn TCP_CRR flow: a connection per request, closed loop or open loop (arrivals on time).

Each transaction connects, sends its join (the flow's session, as TCP_CRR's), a
:data:`~netesto.engine.kinds.workload.HEAD` and its drawn payload, reads the reply it
asked for and closes as ``crr_close`` says. Closed loop, the next waits for this one
and its gap; open loop (``spec.open_loop``), transaction ``i`` arrives ``gap[i]`` after
transaction ``i - 1`` arrived, whether or not earlier ones are done: every arrival has
a connection of its own, so none waits behind another's bytes (on one multiplexed
stream a reply would wait for those before it, and a fixed pool would queue arrivals
when all its connections are busy: neither is open loop). At most :func:`max_open`
connections are open at once; an arrival beyond them is logged ``refused``.

At the flow's end arrivals stop; transactions in flight get :data:`DRAIN` seconds
to finish, then those still open are logged ``unfinished`` and closed. A transaction
that fails is logged ``failed`` and the flow goes on; :data:`MAX_FAILING` in a row
(the server is gone) fail the flow.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import struct
import time

from netesto.engine.core import handshake as hs
from netesto.engine.core.loop import ERR, IN, OUT, Timer
from netesto.engine.kinds.flowend import describe_error
from netesto.engine.kinds.workload import (
    CHUNK,
    FAILED,
    HEAD,
    OK,
    PATTERN,
    REFUSED,
    UNFINISHED,
    DrawnClient,
    min_rtt_us,
)
from netesto.errors import TrafficError

DRAIN = 5.0  # s after the flow's end that transactions in flight may take (the watchdog allows 10)
MAX_OPEN = 2000
MAX_FAILING = 100  # transactions failing in a row that fail the flow
_LINGER_0 = struct.pack("ii", 1, 0)
_IN_ERR = IN | ERR
_perf_ns = time.perf_counter_ns


def max_open() -> int:
    """Connections one flow keeps open at most: :data:`MAX_OPEN`, fewer when the process may open fewer files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(MAX_OPEN, (soft if soft != resource.RLIM_INFINITY else MAX_OPEN * 2) - 128))


class Txn:
    """One transaction's connection: what it sends, what it got, when each step happened."""

    __slots__ = ("flow", "seq", "req", "reply", "due", "start", "t0", "t_conn", "t_send", "sock", "fd", "out", "left",
                 "got", "connected", "sent")

    def __init__(self, flow: "DrawnCRRClient", seq: int, req: int, reply: int, due: float, sock: socket.socket) -> None:
        self.flow = flow
        self.seq, self.req, self.reply, self.due = seq, req, reply, due
        self.start = time.time()
        self.t0 = _perf_ns()
        self.t_conn = self.t_send = 0
        self.sock = sock
        self.fd = sock.fileno()
        first = min(req, CHUNK)  # join, header and the payload's start in one send: one segment for a small one
        self.out = flow.join + HEAD.pack(req, reply) + PATTERN[:first]
        self.left = req - first
        self.got = 0
        self.sent = 0  # bytes of out sent
        self.connected = False

    def on_event(self, events: int) -> None:
        self.flow.on_txn(self, events)


class DrawnCRRClient(DrawnClient):
    """TCP_CRR with drawn sizes and gaps, closed or open loop (see the module doc)."""

    def run(self) -> None:
        self.session = bytes(self.reply.get("session", b""))
        self.join = hs.encode_join(self.session)
        self.reset = self.spec.crr_close == "rst"
        self.wait_eof = self.spec.crr_close == "server"
        self.start_log()
        self.open: dict[int, Txn] = {}
        self.limit = max_open()
        self.failing = 0  # transactions failed since the last that succeeded
        self.ending = False
        self.arrival: Timer | None = None
        self.drain: Timer | None = None
        self.view = self.worker.rxview
        assert self.ctl is not None
        self.loop.register(self.ctl.fileno(), IN, self._on_ctl)  # the control connection only says the end
        self._next(self.start_mono)  # arrivals count from the flow's start instant, as its end does

    def _next(self, after: float) -> None:
        """Draw the next transaction; it arrives its gap after ``after`` (monotonic)."""
        req, reply, gap = self.draws.next()
        due = after + gap
        self.pending = (self.draws.count - 1, req, reply, due)
        self.arrival = self.loop.call_at(due, self._arrive)

    def _arrive(self) -> None:
        self.arrival = None
        if self.finished or self.ending:
            return
        seq, req, reply, due = self.pending
        if self.spec.open_loop:
            self._next(due)  # on time whatever becomes of this one (late timers catch up)
        # on the flow's own clock pair: reading both clocks now put a preemption between them into the due time
        due_wall = self.start_wall + (due - self.start_mono)
        if len(self.open) >= self.limit:
            assert self.log is not None
            self.log.record(seq, due_wall, time.time(), 0.0, 0.0, req, reply, REFUSED,
                            error=f"{self.limit} connections open already")
            return
        self._connect(seq, req, reply, due_wall)

    def _socket(self) -> tuple[socket.socket, tuple[object, ...]]:
        """A non-blocking socket with the flow's options (TCP_NODELAY: a drawn request may span segments)."""
        sock, addr = self.new_tcp_socket()
        if self.reset:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
            except BaseException:
                sock.close()
                raise
        return sock, addr

    def _connect(self, seq: int, req: int, reply: int, due: float) -> None:
        assert self.log is not None
        start = time.time()
        try:
            sock, addr = self._socket()
        except (OSError, TrafficError) as exc:
            self._failed(seq, due, start, req, reply, exc.message if isinstance(exc, TrafficError)
                         else describe_error(exc))
            return
        txn = Txn(self, seq, req, reply, due, sock)
        err = sock.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            self._failed(seq, due, start, req, reply, f"cannot connect: {os.strerror(err).lower()}")
            return
        self.open[txn.fd] = txn
        self.sock = sock  # the connection the sampler reads (the newest)
        self.loop.register(txn.fd, OUT, txn.on_event)

    def on_txn(self, txn: Txn, events: int) -> None:
        sock = txn.sock
        try:
            if not txn.connected:
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                if not events & OUT:
                    return
                txn.connected = True
                txn.t_conn = txn.t_send = _perf_ns()
                self.conns += 1
            if txn.out or txn.left:
                while txn.out or txn.left:
                    if txn.out:
                        n = sock.send(txn.out)
                        txn.out = txn.out[n:]
                        self.tx += max(0, n - max(0, len(self.join) - txn.sent))  # the join is not flow data
                        txn.sent += n
                    else:
                        n = sock.send(PATTERN[:min(txn.left, CHUNK)])
                        txn.left -= n
                        self.tx += n
                self.loop.modify(txn.fd, IN)  # all of it is out: the reply is next
                return
            if not events & _IN_ERR:
                return
            while True:
                want = txn.reply - txn.got
                n = sock.recv_into(self.view, want if 0 < want < len(self.view) else len(self.view))
                if n == 0:
                    if want > 0:
                        raise OSError(errno.ECONNRESET, "connection closed by peer")
                    break
                self.rx += n
                txn.got += n
                if txn.got >= txn.reply and not self.wait_eof:
                    break
            self._complete(txn)
        except BlockingIOError:
            pass  # the socket is full (still polled for OUT) or the reply is not all in (polled for IN)
        except OSError as exc:
            self._drop(txn)
            self._failed(txn.seq, txn.due, txn.start, txn.req, txn.reply, describe_error(exc))

    def _failed(self, seq: int, due: float, start: float, req: int, reply: int, why: str) -> None:
        """A transaction failed: logged; the flow goes on, unless none has succeeded for :data:`MAX_FAILING`
        in a row (the server is gone: the flow fails saying why)."""
        assert self.log is not None
        self.log.record(seq, due, start, 0.0, 0.0, req, reply, FAILED, error=why)
        self.failing += 1
        if self.failing >= MAX_FAILING:
            self.fail(f"{self.failing} transactions in a row failed, the last: {why} ({self.where})")
        else:
            self._after()

    def _complete(self, txn: Txn) -> None:
        now = _perf_ns()
        min_rtt = min_rtt_us(txn.sock)
        self._drop(txn)
        self.trans += 1
        self.record_latency(now - txn.t0)  # connect + request + reply, as a TCP_CRR transaction's
        assert self.log is not None
        self.log.record(txn.seq, txn.due, txn.start, (txn.t_conn - txn.t0) / 1e9, (now - txn.t_send) / 1e9,
                        txn.req, txn.reply, OK, min_rtt)
        self.failing = 0
        self._after()

    def _after(self) -> None:
        """A transaction is over: closed loop, the next; at the end, the last one closes the flow."""
        if self.ending:
            if not self.open:
                self._wrap_up()
        elif not self.spec.open_loop:
            self._next(time.monotonic())

    def _drop(self, txn: Txn) -> None:
        """Close ``txn``'s connection (its tcp_info kept for the sampler's rows, if it is the one sampled)."""
        self.open.pop(txn.fd, None)
        if self.sock is txn.sock:
            self.read_info()
            self.sock = None
        self.loop.unregister(txn.fd)
        txn.sock.close()

    def _on_ctl(self, events: int) -> None:
        assert self.ctl is not None
        if self.read_ctl(self.ctl) == b"":  # the server's EOF: it saw our end
            self.peer_closed()

    def end(self) -> None:
        self.ending = True
        if self.arrival is not None:
            self.arrival.cancel()
            self.arrival = None
        if not self.open:
            self._wrap_up()
        else:
            self.drain = self.loop.call_later(DRAIN, self._drain_over)

    def _drain_over(self) -> None:
        self.abandon(f"still open {DRAIN:g} s after the flow's end")
        self._wrap_up()

    def _wrap_up(self) -> None:
        if self.drain is not None:
            self.drain.cancel()
            self.drain = None
        if not self.closing and self.ctl is not None:
            self.ctl.shutdown(socket.SHUT_WR)
            self.closing = True

    def abandon(self, why: str = "open when the flow ended") -> None:
        for txn in list(getattr(self, "open", {}).values()):
            self._drop(txn)
            if self.log is not None:
                self.log.record(txn.seq, txn.due, txn.start, 0.0, 0.0, txn.req, txn.reply, UNFINISHED, error=why)
        for timer in (getattr(self, "arrival", None), getattr(self, "drain", None)):
            if timer is not None:
                timer.cancel()

    def close_sockets(self) -> None:
        for txn in list(getattr(self, "open", {}).values()):
            self._drop(txn)
        super().close_sockets()


__all__ = ["DRAIN", "DrawnCRRClient", "MAX_FAILING", "MAX_OPEN", "Txn", "max_open"]
