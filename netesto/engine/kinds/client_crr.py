"""The client of TCP_CRR: a new connection per transaction, joined to the flow's session on the server."""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import time
from array import array
from typing import Any

from netesto.collectors import tcpinfo
from netesto.engine.native import crrfast, fastloop
from netesto.engine.core import handshake as hs
from netesto.engine.kinds.client import ClientFlow
from netesto.engine.sampling.flowrecord import LAT_FOLD
from netesto.engine.sampling.records import INFO_LEN
from netesto.engine.core.loop import IN, OUT
from netesto.errors import TrafficError

_LINGER_0 = struct.pack("ii", 1, 0)  # close() sends a reset: no TIME_WAIT
# Polled edge-triggered from the connect on: one epoll_ctl to add, none to switch.
_BOTH_EDGES = IN | OUT | select.EPOLLET
_IN_EDGE = IN | select.EPOLLET  # the request is out already: only the reply is awaited
# A first write this small leaves at once on an idle connection, Nagle or not (TCP_NODELAY only
# matters when a request spans segments); the server has the same for its reply.
NAGLE_FREE = 512
# the C loop's state (see _crrloop.c): counters, then the connection it left open
_RX, _TX, _TRANS, _CONNS, _FD, _GOT, _SENT, _T0, _CONNECTED, _NLAT, _ERRNO = range(11)
# How long the C loop lets a transaction under way run past the loop's next timer (the sampler's tick)
# before it leaves the connection to the loop: an RR flow's reply waits as long (its SO_RCVTIMEO).
GRACE = 0.001


class CRRClient(ClientFlow):
    """TCP_CRR: connect, request, reply, close - one connection per transaction.

    The connection ends as ``spec.crr_close`` says (:data:`~netesto.protocol.flowspec.CRR_CLOSES`):
    by default the client resets it (SO_LINGER 0), so no connection waits in
    TIME_WAIT and a run right after another keeps its rate; "server" waits for
    the server's close after the reply, as netperf does. A transaction's
    latency is connect + request + reply + close.

    Per connection: socket, (SO_LINGER), connect, one epoll add, send, recv,
    close with its epoll removal; TCP_CONGESTION only when a new socket would
    not get the flow's ca anyway, TCP_NODELAY only for a request that spans
    segments, tcp_info only for the last connection (the sampler reads the open one).

    Alone in its worker, the flow runs its transactions in C (``crrfast``)
    until the loop's next timer is due, with the same system calls less the
    epoll ones (a poll instead). A transaction under way then goes on in C for
    up to :data:`GRACE`, its tcp_info read for the sample before its close, and
    the next ones go on in C after the due timers; one still open after that is
    finished here, on the loop. (A tick that comes while a connection is being
    closed finds none open: its row keeps the tcp_info last read.)
    ``NETESTO_PURE_PYTHON=1`` keeps every transaction here.
    """

    nodelay = True  # the control connection's

    def run(self) -> None:
        self.session = bytes(self.reply.get("session", b""))
        self.join = hs.encode_join(self.session)
        self.request = bytes(max(1, self.spec.req))
        self.first = self.join + self.request
        self.reply_size = max(1, self.spec.reply)
        self.reset = self.spec.crr_close == "rst"
        self.wait_eof = self.spec.crr_close == "server"
        self.each_nodelay = len(self.first) > NAGLE_FREE
        self.each_ca: str | None = None  # decided on the first connection
        self.ending = False
        self.conn: socket.socket | None = None
        self.fast = crrfast.ext if len(self.worker.flows) == 1 else None
        self.extra["rr_loop"] = "python" if self.fast is None else "C"
        assert self.ctl is not None
        # The control connection only tells the server when the flow ends.
        self.loop.register(self.ctl.fileno(), IN, self._on_ctl)
        self._next()

    def _socket(self) -> tuple[socket.socket, tuple[Any, ...]]:
        """A non-blocking socket with the flow's options, in as few system calls as they take."""
        spec = self.spec
        family, addr = self.addrinfo(socket.SOCK_STREAM)
        sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            if self.each_ca is None:  # does a new socket get the flow's ca without asking?
                self.each_ca = spec.ca if spec.ca and tcpinfo.congestion_control(sock) != spec.ca else ""
            tcpinfo.set_congestion_control(sock, self.each_ca)
            tcpinfo.set_buffers(sock, spec.local_buffer)
            tcpinfo.set_pacing(sock, spec.pacing)
            if self.each_nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.reset:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
        except BaseException:
            sock.close()
            raise
        return sock, addr

    def _next(self) -> None:
        if self.ending:
            assert self.ctl is not None
            self.ctl.shutdown(socket.SHUT_WR)
            self.closing = True
            return
        if self.fast is None:
            self._start()
        elif self.loop.next_deadline() > time.monotonic():
            self._run_c()
        else:  # a timer is due (the sampler's tick): it runs first, then the C loop goes on
            self.loop.call_at(time.monotonic(), self._resume_c)

    def _resume_c(self) -> None:
        """The next transactions in C, after the loop's due timers (:meth:`_next`): the sampler's tick
        falls between two transactions, in neither's latency (as a blocking client's own bookkeeping
        between transactions is not: netperf's), and no transaction goes through the loop for it."""
        if self.finished or self.ending or self.conn is not None:
            return  # ended meanwhile (end() made the half-close), or a transaction is open
        self._run_c()

    def _start(self) -> None:
        """Open one transaction's connection, on the loop."""
        self.t0 = time.perf_counter_ns()
        try:
            conn, addr = self._socket()
        except TrafficError as exc:
            self.fail(exc.message)
            return
        self.conn = self.sock = conn
        self.got = 0
        self.cfd = conn.fileno()
        self.connected = False
        self.out = memoryview(self.first)
        self.counted = False
        err = conn.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS):
            conn.close()
            self.conn = self.sock = None
            self.fail(f"cannot connect to {self.where}: {os.strerror(err).lower()} after {self.elapsed():.1f} s")
            return
        # On a short path the handshake is often over when connect returns: send at once
        # (a connection still in SYN_SENT would block: its OUT edge says when it is up).
        self._on_conn(0)
        if self.conn is conn:
            self.loop.register(self.cfd, _BOTH_EDGES if self.out else _IN_EDGE, self._on_conn)

    def _on_conn(self, events: int) -> None:
        # Edge-triggered: each step goes on until it is done or the socket would block.
        conn = self.conn
        if conn is None:
            return
        try:
            while self.out:
                # connected (or failed: the send says why): the join and the request;
                # a large request goes out as the server reads it
                if not self.counted:
                    # counted before it goes: a stop (the SIGTERM handler's exception) that lands between a
                    # send and its count would lose a request the server gets; this way a stopped flow's
                    # client is ahead by the request in flight at most, never behind
                    self.tx += len(self.request)
                    self.counted = True
                n = conn.send(self.out)
                if not self.connected:
                    self.connected = True
                    self.conns += 1
                self.out = self.out[n:]
                if not self.out and not events & IN:
                    return  # the reply cannot be here yet: its edge will say when
            view = self.worker.rxview
            while True:
                want = self.reply_size - self.got
                if want <= 0 and not self.wait_eof:
                    break
                n = conn.recv_into(view, min(want, len(view)) if want > 0 else len(view))
                if n == 0:
                    if want > 0:
                        raise OSError(errno.ECONNRESET, "connection closed by peer")
                    break  # the server's close after the whole reply
                self.rx += n
                self.got += n
            if self.ending:
                self.read_info()  # the last connection's tcp_info, for the last sample
            self._close_conn()
            # a transaction is connect + request + reply + close
            self.record_latency(time.perf_counter_ns() - self.t0)
            self.trans += 1
            self._next()
        except BlockingIOError:
            pass
        except OSError as exc:
            self._close_conn()
            self.fail_running(exc)

    def _run_c(self) -> None:
        """Transactions in C until a timer is due; then a connection still open goes on here."""
        fast = self.fast
        assert fast is not None
        spec = self.spec
        family, addr = self.addrinfo(socket.SOCK_STREAM)
        if self.each_ca is None:  # as _socket decides it, once
            probe, _ = self._socket()
            probe.close()
        flags = ((fast.RESET if self.reset else 0) | (fast.WAIT_EOF if self.wait_eof else 0)
                 | (fast.NODELAY if self.each_nodelay else 0))
        st = array("q", [0]) * fast.CLIENT_STATE
        if not hasattr(self, "latbuf"):
            self.latbuf = array("q", [0]) * fastloop.LAT_CAPACITY
            self.latview = memoryview(self.latbuf).cast("B")  # frombytes takes bytes, not 'q' items
        lat = self.lat_raw
        status = fast.IDLE
        trans0 = self.trans
        while True:
            st[_RX], st[_TX], st[_TRANS], st[_CONNS], st[_FD] = self.rx, self.tx, self.trans, self.conns, -1
            try:
                status = fast.crr_client(addr[0], addr[1], family, addr[3] if len(addr) > 3 else 0, self.first,
                                         len(self.request), self.reply_size, flags, (self.each_ca or "").encode(),
                                         max(0, spec.local_buffer), max(0, spec.pacing), self.loop.next_deadline(),
                                         st, self.latbuf, self.last_tcp, 2 if self.is_bbr else 1, INFO_LEN, GRACE)
            except OSError as exc:
                self.fail_running(exc)
                return
            finally:
                self.rx, self.tx, self.trans, self.conns = st[_RX], st[_TX], st[_TRANS], st[_CONNS]
                if st[_NLAT]:
                    lat.frombytes(self.latview[:st[_NLAT] * 8])
                    if len(lat) >= LAT_FOLD:
                        self.fold_latency()
                if st[_FD] >= 0:  # (also when a signal's exception leaves it open: close_sockets closes it)
                    self._adopt(family, st)
            if status != fast.LATFULL:
                break
        if status == fast.CONNFAIL:
            self.fail(f"cannot connect to {self.where}: {os.strerror(st[_ERRNO]).lower()} after {self.elapsed():.1f} s")
        elif status == fast.OPEN:  # the loop's timers are due: this connection ends on the loop
            self.read_info()
            self.loop.register(self.cfd, _BOTH_EDGES if self.out else _IN_EDGE, self._on_conn)
            self._on_conn(IN | OUT)
        elif self.trans > trans0:  # between two transactions: the due timers, then on in C
            self.loop.call_at(time.monotonic(), self._resume_c)
        else:  # a timer was due from the start: one transaction on the loop, beside the timers
            self._start()

    def _adopt(self, family: int, st: array[int]) -> None:
        """The connection the C loop left open, as :meth:`_start` would have it at that point."""
        conn = socket.socket(family, socket.SOCK_STREAM, 0, fileno=st[_FD])
        self.conn = self.sock = conn
        self.cfd = st[_FD]
        self.got = st[_GOT]
        self.connected = bool(st[_CONNECTED])
        self.out = memoryview(self.first)[st[_SENT]:]
        self.counted = not self.out  # (the C loop counts a request once all of it is out)
        self.t0 = st[_T0]

    def _close_conn(self) -> None:
        if self.conn is not None:
            self.loop.unregister(self.cfd)
            self.conn.close()
            self.conn = self.sock = None

    def _on_ctl(self, events: int) -> None:
        assert self.ctl is not None
        if self.read_ctl(self.ctl) == b"":  # the server's EOF: it saw our end
            self.peer_closed()

    def close_sockets(self) -> None:
        self._close_conn()
        super().close_sockets()

    def end(self) -> None:
        self.ending = True
        if self.conn is None and not self.finished:
            self._next()


__all__ = ["CRRClient", "GRACE", "NAGLE_FREE"]
