"""The server ends of drawn TCP_RR and TCP_CRR flows: each request's header says the reply to send.

:class:`DrawnRRServer` answers every request on its connection; :class:`DrawnCRRServer`
is TCP_CRR's server (the hello connection as control) whose joins are
:class:`DrawnJoin`: served here, in Python, never by the C accept, whose tables
hold one reply size per flow.
"""

from __future__ import annotations

import socket

from netesto.engine.core.loop import ERR, IN, OUT
from netesto.engine.kinds.serverflow import CRRServer, ServerFlow
from netesto.engine.kinds.workload import CHUNK, PATTERN, Requests

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
            if not self.out_wait:
                self.loop.modify(self.fd, IN | OUT)
                self.out_wait = True
            return
        if self.out_wait:
            self.loop.modify(self.fd, IN)
            self.out_wait = False


class DrawnCRRServer(CRRServer):
    """TCP_CRR with drawn sizes: the control connection, and joins that are :class:`DrawnJoin`."""

    def begin_server(self) -> None:
        ServerFlow.begin_server(self)  # not CRRServer's: the C accept's tables have one reply size per flow

    def joined(self, conn: socket.socket, leftover: bytes) -> None:
        DrawnJoin(self, conn, leftover)


class DrawnJoin:
    """One drawn TCP_CRR transaction on the server: its request in, the reply its header asks for out, closed
    as the flow's ``crr_close`` says (as :class:`~netesto.engine.kinds.serverflow.JoinConn`)."""

    def __init__(self, flow: DrawnCRRServer, conn: socket.socket, leftover: bytes) -> None:
        self.flow = flow
        self.conn = conn
        self.fd = conn.fileno()
        self.reqs = Requests()
        self.owed = 0
        self.done = False
        self.closed = False
        self.polled = 0
        self.close_first = flow.spec.crr_close != "client"
        flow.begin_server()  # a join may overtake the start marker on the control connection
        flow.joins.add(self)  # type: ignore[arg-type]
        flow.conns += 1
        flow.sock = conn
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if leftover:
            self._got(memoryview(leftover))
        if not self.closed:
            self._poll()

    def _poll(self) -> None:
        want = IN | OUT if self.owed else IN
        if want != self.polled:
            if self.polled:
                self.flow.loop.modify(self.fd, want)
            else:
                self.flow.loop.register(self.fd, want, self._on_event)
            self.polled = want

    def _got(self, data: memoryview) -> None:
        flow = self.flow
        flow.rx += len(data)
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
            self._send()

    def _send(self) -> None:
        try:
            while self.owed:
                n = self.conn.send(PATTERN[:min(self.owed, CHUNK)])
                self.flow.tx += n
                self.owed -= n
        except BlockingIOError:
            pass
        except OSError:  # the client reset it
            self.close()
            return
        if not self.owed and self.close_first:
            self.close()
        else:
            self._poll()

    def _on_event(self, events: int) -> None:
        if self.closed:
            return
        try:
            if events & OUT and self.owed:
                self._send()
                if self.closed:
                    return
            if not events & _IN_ERR:
                return
            view = self.flow.worker.rxview
            n = self.conn.recv_into(view)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        if n == 0:
            self.close()
            return
        self._got(view[:n])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        flow = self.flow
        flow.joins.discard(self)  # type: ignore[arg-type]
        if flow.sock is self.conn:
            flow.read_info()
            flow.sock = None
        if self.polled:
            flow.loop.unregister(self.fd)
        self.conn.close()


__all__ = ["DrawnCRRServer", "DrawnJoin", "DrawnRRServer"]
