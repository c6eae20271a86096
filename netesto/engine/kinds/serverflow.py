"""The server end of a flow: the base, TCP_STREAM/MAERTS/BIDIR and TCP_CRR; what the flows see of their process.

:class:`ServerHost` is what every server flow asks of its server process
(:class:`~netesto.engine.serve.accept.ServerWorker`, which accepts and
handshakes). TCP_RR is served in :mod:`~netesto.engine.kinds.server_rr`, the UDP
tests in :mod:`~netesto.engine.kinds.server_udp`.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from array import array
from typing import Any, Callable

from netesto.engine.native import crrfast
from netesto.engine.core import handshake as hs
from netesto.engine.core.balance import LoadBoard
from netesto.engine.kinds.flowend import FlowEnd, Worker, describe_error, io_handler
from netesto.engine.kinds.lowat import ReadMark
from netesto.engine.core.loop import ERR, IN, OUT, Loop
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import SERVER_SENDS

GO_TIMEOUT = 10.0  # a held flow whose start marker is this late after the client's instant ends
GRACE = 30.0  # a flow whose client vanished silently ends dur + GRACE after it began
_IN_ERR = IN | ERR
NAGLE_FREE = 512  # a reply this small leaves at once, Nagle or not: no TCP_NODELAY (as the CRR client)


class ServerHost(Worker):
    """A server process as its flows see it: its index among the server processes, the handshakes
    in progress (a flow alone in its process serves in a blocking loop) and the CRR sessions."""

    def __init__(self, loop: Loop, datadir: str, emit: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(loop, datadir, emit)
        self.pending: dict[int, Any] = {}  # fd -> handshake in progress (an accept.Pending)
        self.sessions: dict[bytes, CRRServer] = {}
        # session -> (counters, req, reply, close first) of the CRR flows whose joins the C accept serves
        self.fast_joins: dict[bytes, tuple[array[int], int, int, bool]] = {}
        self.index = 0
        self.board: LoadBoard | None = None  # the workers' shared counts (several server processes)
        self.listen_timeo = False  # SO_RCVTIMEO set on the listener (a lone CRR flow's blocking accepts)

    def accept_joins(self, listener: socket.socket) -> list[tuple[int, bytes]]:
        """Accept in C (``crr_accept``), which serves every CRR join it can whole, ours and (in the
        board's table) the other workers'; the other connections with what was read from them."""
        fast = crrfast.ext
        assert fast is not None
        table = self.board.table if self.board is not None else None
        if len(self.flows) == len(self.fast_joins) <= 1 and not self.pending:
            # a CRR flow alone (or no flow: other workers' joins): blocking accepts until a timer
            # is due or none came for 1 ms
            if not self.listen_timeo:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 1000))
                self.listen_timeo = True
            listener.setblocking(True)
            try:
                rest = fast.crr_accept(listener.fileno(), hs.JOIN_PREFIX, self.fast_joins, self.loop.next_deadline(),
                                       table)
            finally:
                listener.setblocking(False)
        else:
            rest = fast.crr_accept(listener.fileno(), hs.JOIN_PREFIX, self.fast_joins, -1.0, table)
        for session in self.fast_joins:
            flow = self.sessions.get(session)
            if flow is not None:
                flow.fold_fast()
        return rest  # type: ignore[no-any-return]


class ServerFlow(FlowEnd):
    """The server end of a flow; subclasses per test type."""

    side = "server"

    def __init__(self, worker: ServerHost, spec: FlowSpec, conn: socket.socket) -> None:
        super().__init__(worker, spec)
        self.conn = conn
        self.sock = conn if self.is_tcp else None
        self.fd = conn.fileno()
        self.local = conn.getsockname()[:2]
        self.remote = conn.getpeername()[:2]
        self.where = f"{self.remote[0]}:{self.remote[1]}"
        self.sw = worker
        self.go_due = 0.0  # the client's start instant (monotonic, here), from its hello's go; 0: none given

    def start(self) -> dict[str, Any]:
        """Set up after a good hello; returns the extra reply fields."""
        return {}

    def begin_server(self, stamp: tuple[float, float] | None = None) -> None:
        """The data phase starts now (or at ``stamp``): at the hello, or at the client's start marker."""
        if self.start_mono:
            return
        self.begin(stamp)
        self.timers.append(
            self.loop.call_at(self.start_mono + self.spec.dur + GRACE, self._watchdog)
        )
        self.worker.emit({"event": "started", "flow": self.spec.flow_id, "side": "server",
                          "remote": list(self.remote)})

    def hold(self, wait: float) -> None:
        """Wait for the client's start marker (it handshook ahead of its start instant)."""
        self.go_due = time.monotonic() + wait
        self.timers.append(self.loop.call_later(wait + GO_TIMEOUT, self._no_go))
        hs.stamp_arrivals(self.conn, True)
        self.loop.register(self.fd, IN, self._on_go)

    def _no_go(self) -> None:
        if self.start_mono:
            return  # the marker came and the flow runs: this timer is only for one that never starts
        self.finish(f"no start marker from client {self.where} within {GO_TIMEOUT:.0f} s of its start instant")

    def _on_go(self, events: int) -> None:
        try:  # exactly the marker (flow data may follow at once), dated by the kernel
            data, ancillary, _flags, _addr = self.conn.recvmsg(len(hs.GO), hs.STAMP_SPACE)
        except BlockingIOError:
            return
        except OSError as exc:
            self.finish(f"{describe_error(exc)} before the start (client {self.where})")
            return
        if data != hs.GO:
            self.finish(f"client {self.where} closed the connection before the start" if not data
                        else f"bad start marker {data!r} from client {self.where}")
            return
        self.loop.unregister(self.fd)
        hs.stamp_arrivals(self.conn, False)
        try:
            self.begin_server(hs.arrival(ancillary))
        except OSError as exc:
            self.finish(f"cannot record flow {self.spec.flow_id}: {describe_error(exc)}")
            return
        self.go()

    def go(self) -> None:
        """Start serving (after the reply went out and the data phase began)."""

    def client_ended(self) -> None:
        """EOF from the client: the normal end - unless it came well before ``dur``.

        A client that crashed or was stopped closes its socket just like one
        that finished, so the time tells them apart (the server side starts
        when the client's start marker arrived, by the kernel's stamp, however
        late this end read it, so a complete flow is short by at most a one-way
        delay: well inside the 1 % + 10 ms allowed). Nor is one whose marker came
        late: a client held off its CPU inside the marker's ``send`` (a loaded
        host, a tracer) dated its start before it and ends that much before
        ``dur`` from the marker, so the time from its start instant counts too
        (from the hello's ``go``, on this host's clock: never before the
        client's own instant, by the hello's one-way delay).
        """
        elapsed = max(self.elapsed(), time.monotonic() - self.go_due if self.go_due and self.start_mono else 0.0)
        if elapsed < self.spec.dur * 0.99 - 0.01:
            self.finish(f"client {self.where} ended the flow after {elapsed:.1f} s of {self.spec.dur:g} s")
        else:
            self.finish()

    def _watchdog(self) -> None:
        self.finish(f"flow did not end within {self.spec.dur + GRACE:.0f} s (client gone?)")

    def fail_running(self, exc: BaseException) -> None:
        self.finish(f"{describe_error(exc)} after {self.elapsed():.1f} s (client {self.where})")

    def close_sockets(self) -> None:
        super().close_sockets()
        if self.conn is not None:
            self.loop.unregister(self.conn.fileno())
            self.conn.close()


class StreamServer(ServerFlow):
    """Receives (TCP_STREAM), sends (TCP_MAERTS) or both (TCP_BIDIR) until the client half-closes."""

    def go(self) -> None:
        self.sending = self.spec.test in SERVER_SENDS
        if self.spec.test != "TCP_MAERTS":
            ReadMark(self, self.conn).start()
        self.loop.register(self.fd, IN | (OUT if self.sending else 0), self._on_event)

    @io_handler
    def _on_event(self, events: int) -> None:
        if events & _IN_ERR:
            solo = not self.sending and len(self.sw.flows) == 1 and not self.sw.pending
            if not (self.recv_spin(self.conn) if solo else self.recv_burst(self.conn)):
                self._eof()
                return
        if events & OUT and self.sending:
            self.send_burst(self.conn)

    def _eof(self) -> None:
        self.sending = False
        try:
            self.conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.client_ended()


class CRRServer(ServerFlow):
    """TCP_CRR: the hello connection stays open as control; joins carry the transactions."""

    def start(self) -> dict[str, Any]:
        super().start()
        # The first byte names the worker process that owns the flow (see ServerWorker.join).
        self.session = bytes([self.sw.index]) + os.urandom(7)
        self.sw.sessions[self.session] = self
        self.joins: set[JoinConn] = set()
        self.fast = array("q", bytes(8 * 4))  # rx, tx, trans, conns of the joins served in C (crr_accept)
        self.slot = -1  # our entry in the workers' shared CRR table: joins other workers serve in C
        self.extra["joins_c"] = 0
        return {"session": self.session}

    def begin_server(self, stamp: tuple[float, float] | None = None) -> None:
        super().begin_server(stamp)
        if self.finished or self.session in self.sw.fast_joins:
            return
        # from now on its joins may be served in C (see ServerWorker._accept_c), by any worker
        spec = self.spec
        entry = (self.fast, max(1, spec.req), max(1, spec.reply), spec.crr_close != "client")
        self.sw.fast_joins[self.session] = entry
        board = self.sw.board
        if board is not None and crrfast.ext is not None:
            self.slot = board.publish(self.sw.index, self.session, *entry[1:])
            if self.slot >= 0:  # their counts reach ours at every sampling interval
                self.timers.append(self.loop.call_later(spec.interval, self._fold_tick))

    def _fold_tick(self) -> None:
        self.fold_fast()
        self.timers.append(self.loop.call_later(self.spec.interval, self._fold_tick))

    def fold_fast(self) -> None:
        """Add what the C accepts counted for this flow (ours, and other workers' in the table) to its counters."""
        fast = self.fast
        counts = [fast[0], fast[1], fast[2], fast[3]]
        fast[0] = fast[1] = fast[2] = fast[3] = 0
        board = self.sw.board
        if self.slot >= 0 and board is not None and crrfast.ext is not None:
            counts = [a + b for a, b in zip(counts, crrfast.ext.crr_take(board.table, self.slot))]
        self.rx += counts[0]
        self.tx += counts[1]
        self.trans += counts[2]
        self.conns += counts[3]
        self.extra["joins_c"] += counts[3]

    def finish(self, error: str = "") -> None:
        if not self.finished and hasattr(self, "fast"):  # (a refused flow never started)
            board = self.sw.board
            if self.slot >= 0 and board is not None:
                board.unpublish(self.slot)
            self.fold_fast()
            self.slot = -1
        super().finish(error)

    def go(self) -> None:
        self.loop.register(self.fd, IN, self._on_ctl)

    def joined(self, conn: socket.socket, leftover: bytes) -> None:
        """A transaction connection of this flow (``leftover``: what came after its join)."""
        JoinConn(self, conn, leftover)

    def _on_ctl(self, events: int) -> None:
        if self.read_ctl(self.conn) == b"":  # the client's EOF: the flow is over
            self.client_ended()

    def close_sockets(self) -> None:
        for join in list(self.joins):
            join.close()
        self.sw.sessions.pop(self.session, None)
        self.sw.fast_joins.pop(self.session, None)
        super().close_sockets()


class JoinConn:
    """One TCP_CRR transaction connection on the server: the request in, the reply out.

    The server closes it once the whole reply is with the kernel (its FIN
    follows the reply; with the default ``crr_close`` "rst" the client's reset
    then frees both ends, with "server" the TIME_WAIT stays here, as with
    netperf), or, with "client", at the client's close. A join whose request
    came with it is served without being polled at all.
    """

    def __init__(self, flow: CRRServer, conn: socket.socket, leftover: bytes) -> None:
        self.flow = flow
        self.conn = conn
        self.fd = conn.fileno()
        self.got = 0
        self.done = False
        self.closed = False
        self.polled = 0  # the events this connection is polled for; 0: not registered
        self.out = memoryview(b"")
        self.close_first = flow.spec.crr_close != "client"
        flow.begin_server()  # a join may overtake the start marker on the control connection
        flow.joins.add(self)
        flow.conns += 1
        flow.sock = conn
        if flow.spec.reply > NAGLE_FREE:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if leftover:
            self._got(len(leftover))
        if not self.closed:
            self._poll()

    def _poll(self) -> None:
        want = IN | OUT if self.out else IN  # a large reply goes out as the client reads it
        if want != self.polled:
            if self.polled:
                self.flow.loop.modify(self.fd, want)
            else:
                self.flow.loop.register(self.fd, want, self._on_event)
            self.polled = want

    def _got(self, n: int) -> None:
        flow = self.flow
        flow.rx += n
        self.got += n
        if self.got >= max(1, flow.spec.req) and not self.done:
            self.done = True
            flow.trans += 1
            self.out = memoryview(bytes(max(1, flow.spec.reply)))
            self._send()

    def _send(self) -> None:
        try:
            n = self.conn.send(self.out)
        except BlockingIOError:
            n = 0
        except OSError:  # the client reset it (also while __init__ runs, from a leftover: nobody else would close it)
            self.close()
            return
        self.flow.tx += n
        self._advance(n)
        if not self.out and self.close_first:
            self.close()
        else:
            self._poll()

    def _advance(self, n: int) -> None:
        """``n`` bytes of the reply went out: what is left of it in ``out``."""
        self.out = self.out[n:]

    def _on_event(self, events: int) -> None:
        if self.closed:
            return
        try:
            if events & OUT and self.out:
                self._send()
                if self.closed:
                    return
            if not events & (IN | ERR):
                return
            n = self.conn.recv_into(self.flow.worker.rxview)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        if n == 0:
            self.close()
            return
        try:
            self._got(n)
        except OSError:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        flow = self.flow
        flow.joins.discard(self)
        if flow.sock is self.conn:
            flow.read_info()
            flow.sock = None
        if self.polled:
            flow.loop.unregister(self.fd)
        self.conn.close()


__all__ = ["CRRServer", "GO_TIMEOUT", "GRACE", "JoinConn", "NAGLE_FREE", "ServerFlow", "ServerHost", "StreamServer"]
