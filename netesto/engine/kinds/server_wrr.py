"""The server ends of drawn TCP_RR and TCP_CRR flows: each request's header says the reply to send.

:class:`DrawnRRServer` answers every request on its connection; :class:`DrawnCRRServer`
is TCP_CRR's server (the hello connection as control) whose joins are
:class:`DrawnJoin`: served here, in Python, never by the C accept, whose tables
hold one reply size per flow.
"""

from __future__ import annotations

import socket

from netesto.engine.core.loop import ERR, IN, OUT
from netesto.engine.kinds.serverflow import CRRServer, JoinConn, ServerFlow
from netesto.engine.kinds.workload import CHUNK, PATTERN, Requests, want_out

_IN_ERR = IN | ERR


class DrawnRRServer(ServerFlow):
    """TCP_RR with drawn sizes: read each request, send the reply its header asks for."""

    def go(self) -> None:
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reqs = Requests()
        self.owed = 0
        self.out_wait = False
        self.view = self.worker.rxview
        self.loop.register(self.fd, IN, self._on_event)

    def _on_event(self, events: int) -> None:
        try:
            if events & OUT and self.owed:
                self._pump()
            if not events & _IN_ERR:
                return
            n = self.conn.recv_into(self.view)
            if n == 0:
                self.client_ended()
                return
            self.rx += n
            done, owed = self.reqs.feed(self.view[:n])
            if done:
                self.trans += done
                self.owed += owed
                self._pump()
        except BlockingIOError:
            pass
        except ValueError as exc:
            self.finish(f"bad request from client {self.where}: {exc}")
        except OSError as exc:
            self.fail_running(exc)

    def _pump(self) -> None:
        """Send what fits of the replies owed; the rest waits for EPOLLOUT."""
        conn = self.conn
        try:
            while self.owed:
                n = conn.send(PATTERN[:min(self.owed, CHUNK)])
                self.tx += n
                self.owed -= n
        except BlockingIOError:
            self.out_wait = want_out(self, self.fd, True, self.out_wait)
            return
        self.out_wait = want_out(self, self.fd, False, self.out_wait)


class DrawnCRRServer(CRRServer):
    """TCP_CRR with drawn sizes: the control connection, and joins that are :class:`DrawnJoin`."""

    def begin_server(self, stamp: tuple[float, float] | None = None) -> None:
        ServerFlow.begin_server(self, stamp)  # not CRRServer's: the C accept's tables have one reply size per flow

    def joined(self, conn: socket.socket, leftover: bytes) -> None:
        DrawnJoin(self, conn, leftover)


class DrawnJoin(JoinConn):
    """One drawn TCP_CRR transaction on the server: its request in, the reply its header asks for out, closed as
    the flow's ``crr_close`` says (as :class:`~netesto.engine.kinds.serverflow.JoinConn`, whose polling it keeps:
    ``out`` is the part of the reply going out now, a slice of the pattern)."""

    def __init__(self, flow: DrawnCRRServer, conn: socket.socket, leftover: bytes) -> None:
        self.reqs = Requests()
        self.owed = 0
        self.first: bytes | None = leftover  # what came with the join: JoinConn hands _got its length only
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a reply of many segments goes at once
        super().__init__(flow, conn, leftover)

    def _got(self, n: int) -> None:
        flow = self.flow
        data = memoryview(self.first) if self.first is not None else flow.worker.rxview[:n]
        self.first = None
        flow.rx += n
        if self.done:
            return
        try:
            done, owed = self.reqs.feed(data)
        except ValueError:
            self.close()
            return
        if done:
            self.done = True
            flow.trans += 1
            self.owed = owed
            self.out = PATTERN[:min(owed, CHUNK)]
            self._send()

    def _advance(self, n: int) -> None:
        self.owed -= n
        self.out = PATTERN[:min(self.owed, CHUNK)]


__all__ = ["DrawnCRRServer", "DrawnJoin", "DrawnRRServer"]
