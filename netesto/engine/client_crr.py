"""The client of TCP_CRR: a new connection per transaction, joined to the flow's session on the server."""

from __future__ import annotations

import errno
import os
import socket
import struct
import time

from netesto.engine import handshake as hs
from netesto.engine.client import ClientFlow
from netesto.engine.loop import IN, OUT
from netesto.errors import TrafficError

_LINGER_0 = struct.pack("ii", 1, 0)  # close() sends a reset: no TIME_WAIT


class CRRClient(ClientFlow):
    """TCP_CRR: connect, request, reply, close - one connection per transaction.

    The connection ends as ``spec.crr_close`` says (:data:`~netesto.protocol.flowspec.CRR_CLOSES`):
    by default the client resets it (SO_LINGER 0), so no connection waits in
    TIME_WAIT and a run right after another keeps its rate; "server" waits for
    the server's close after the reply, as netperf does.
    """

    nodelay = True

    def run(self) -> None:
        self.session = bytes(self.reply.get("session", b""))
        self.join = hs.encode_join(self.session)
        self.request = bytes(max(1, self.spec.req))
        self.first = self.join + self.request
        self.reply_size = max(1, self.spec.reply)
        self.reset = self.spec.crr_close == "rst"
        self.wait_eof = self.spec.crr_close == "server"
        self.ending = False
        self.conn: socket.socket | None = None
        assert self.ctl is not None
        # The control connection only tells the server when the flow ends.
        self.loop.register(self.ctl.fileno(), IN, self._on_ctl)
        self._next()

    def _next(self) -> None:
        if self.ending:
            assert self.ctl is not None
            self.ctl.shutdown(socket.SHUT_WR)
            self.closing = True
            return
        self.t0 = time.perf_counter_ns()
        try:
            conn, addr = self.new_tcp_socket()
        except TrafficError as exc:
            self.fail(exc.message)
            return
        self.conn = self.sock = conn
        self.got = 0
        self.cfd = conn.fileno()
        if self.reset:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
        err = conn.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS):
            self._close_conn()
            self.fail(f"cannot connect to {self.where}: {os.strerror(err).lower()} after {self.elapsed():.1f} s")
            return
        self.loop.register(self.cfd, OUT, self._on_conn)
        self.connected = False
        self.out = memoryview(b"")

    def _on_conn(self, events: int) -> None:
        conn = self.conn
        if conn is None:
            return
        try:
            if not self.connected:
                err = conn.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                self.connected = True
                self.conns += 1
                self.out = memoryview(self.first)
            if self.out:
                # the join header and request; a large request goes out as the server reads it
                try:
                    n = conn.send(self.out)
                except BlockingIOError:
                    n = 0
                self.out = self.out[n:]
                if self.out:
                    return
                self.tx += len(self.request)
                self.loop.modify(self.cfd, IN)
                return
            view = self.worker.rxview
            while True:
                want = self.reply_size - self.got
                n = conn.recv_into(view, min(want, len(view)) if want > 0 else len(view))
                if n == 0:
                    if want > 0:
                        raise OSError(errno.ECONNRESET, "connection closed by peer")
                    break  # the server's close after the whole reply
                self.rx += n
                self.got += n
                if not self.wait_eof:
                    if self.got < self.reply_size:
                        return
                    break
            self.read_info()  # keep this connection's last tcp_info for the sampler
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


__all__ = ["CRRClient"]
