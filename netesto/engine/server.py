"""The server side (the netserver of netesto): accept, check the handshake, serve every test type.

One listening socket per worker process (``--workers N`` > 1 uses
SO_REUSEPORT so the kernel spreads connections). A new connection must send a
valid hello or CRR join within :data:`HANDSHAKE_TIMEOUT`; bad magic, oversized
or undecodable hellos, bad fields and unknown tokens close just that
connection. Each accepted flow writes ``<datadir>/<exp>/flows/<flow_id>.server.nflow``.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from array import array
from pathlib import Path
from typing import Any, Callable, Iterable

from netesto.errors import TrafficError
from netesto.policy import MAX_FLOW_SECONDS
from netesto.engine import fastloop
from netesto.engine import handshake as hs
from netesto.collectors import tcpinfo
from netesto.engine.balance import LoadBoard
from netesto.engine.flowend import (
    FlowEnd, Worker, check_datadir, describe_error, io_handler, json_line, safe_flow_id,
)
from netesto.procs import die_with_parent
from netesto.engine.loop import ERR, IN, OUT, Loop, stop_on_signals
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import TEST_TYPES

HANDSHAKE_TIMEOUT = 5.0
GO_TIMEOUT = 10.0  # a held flow whose start marker is this late after the client's instant ends
GRACE = 30.0  # a flow whose client vanished silently ends dur + GRACE after it began
MAX_SIZE = 1 << 30
_SEQ = struct.Struct("<Q")
_IN_ERR = IN | ERR
# What one worker hands another over their inbox (SCM_RIGHTS): the first byte says what.
_HANDED_HELLO = b"H"  # + the raw hello: a new flow for the less-loaded worker
_HANDED_JOIN = b"J"  # + session (8 bytes) + bytes read after the join: a CRR connection for its owner


class TokenSet:
    """Accepted per-experiment tokens: given ones plus a file re-read when it changes.

    With no tokens at all every token (including none) is accepted.
    """

    def __init__(self, tokens: Iterable[str] = (), path: str | None = None) -> None:
        self.fixed = {t for t in tokens if t}
        self.path = path
        self.from_file: set[str] = set()
        self._mtime = 0.0
        self._reload()

    def _reload(self) -> None:
        if not self.path:
            return
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._mtime:
                self._mtime = mtime
                self.from_file = set(Path(self.path).read_text().split())
        except OSError:
            self.from_file = set()

    def accepts(self, token: str) -> bool:
        if not self.fixed and not self.path:
            return True
        if token in self.fixed or token in self.from_file:
            return True
        self._reload()
        return token in self.from_file


class ServerFlow(FlowEnd):
    """The server end of a flow; subclasses per test type."""

    side = "server"

    def __init__(self, worker: "ServerWorker", spec: FlowSpec, conn: socket.socket) -> None:
        super().__init__(worker, spec)
        self.conn = conn
        self.sock = conn if self.is_tcp else None
        self.fd = conn.fileno()
        self.local = conn.getsockname()[:2]
        self.remote = conn.getpeername()[:2]
        self.where = f"{self.remote[0]}:{self.remote[1]}"
        self.sw: ServerWorker = worker

    def start(self) -> dict[str, Any]:
        """Set up after a good hello; returns the extra reply fields."""
        return {}

    def begin_server(self) -> None:
        """The data phase starts now: at the hello, or at the client's start marker."""
        if self.start_mono:
            return
        self.begin()
        self.timers.append(
            self.loop.call_at(self.start_mono + self.spec.dur + GRACE, self._watchdog)
        )
        self.worker.emit({"event": "started", "flow": self.spec.flow_id, "side": "server",
                          "remote": list(self.remote)})

    def hold(self, wait: float) -> None:
        """Wait for the client's start marker (it handshook ahead of its start instant)."""
        self.timers.append(self.loop.call_later(wait + GO_TIMEOUT, self._no_go))
        self.loop.register(self.fd, IN, self._on_go)

    def _no_go(self) -> None:
        if self.start_mono:
            return  # the marker came and the flow runs: this timer is only for one that never starts
        self.finish(f"no start marker from client {self.where} within {GO_TIMEOUT:.0f} s of its start instant")

    def _on_go(self, events: int) -> None:
        try:
            data = self.conn.recv(len(hs.GO))  # exactly the marker: flow data may follow at once
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
        try:
            self.begin_server()
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
        when the client's first byte arrives, so a complete flow is short by
        at most a one-way delay: well inside the 1 % + 10 ms allowed).
        """
        elapsed = self.elapsed()
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
        self.sending = self.spec.test in ("TCP_MAERTS", "TCP_BIDIR")
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


class RRServer(ServerFlow):
    """TCP_RR: answer every ``req`` bytes with ``reply`` bytes."""

    def go(self) -> None:
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.req = max(1, self.spec.req)
        self.reply_buf = memoryview(bytes(max(1, self.spec.reply)))
        self.got = 0
        self.pending: bytes | memoryview = b""
        self.view = self.worker.rxview
        self.spinning = False
        self.loop.register(self.fd, IN, self._on_event)

    @io_handler
    def _on_event(self, events: int) -> None:
        conn = self.conn
        if events & OUT and self.pending:
            n = conn.send(self.pending)
            self.tx += n
            self.pending = self.pending[n:]
            if not self.pending:
                self.loop.modify(self.fd, IN)
        if events & _IN_ERR:
            n = conn.recv_into(self.view)
            if n == 0:
                self.client_ended()
                return
            self.rx += n
            got = self.got + n
            req = self.req
            if got < req:
                self.got = got
                return
            count, self.got = divmod(got, req)
            self.trans += count
            reply = self.reply_buf if count == 1 else memoryview(bytes(self.reply_buf) * count)
            if self.pending:
                self.pending = memoryview(bytes(self.pending) + bytes(reply))
                return
            try:
                n = conn.send(reply)
            except BlockingIOError:
                n = 0
            self.tx += n
            if n < len(reply):
                self.pending = reply[n:]
                self.loop.modify(self.fd, IN | OUT)
            elif len(self.sw.flows) == 1 and not self.sw.pending and self.req <= 65536 \
                    and len(self.reply_buf) <= 65536:
                self._spin()

    def _spin(self) -> None:
        """Alone in this server process: serve with blocking recv/send until a timer is due.

        One syscall less per transaction than epoll + recv; each recv waits at
        most 1 ms (SO_RCVTIMEO), so new connections and timers wait at most
        until the next timer (the sampling interval).
        """
        conn = self.conn
        if not self.spinning:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 1000))
            # a client that stops reading must not hang the whole server in a blocking send
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 100_000))
            self.spinning = True
        deadline = self.loop.next_deadline()
        if fastloop.ext is not None:
            self._spin_c(deadline)
            return
        self.extra["rr_loop"] = "python"
        view, req, reply = self.view, self.req, self.reply_buf
        replylen = len(reply)
        recv_into, send = conn.recv_into, conn.send
        monotonic = time.monotonic
        got, rx, tx, trans = self.got, self.rx, self.tx, self.trans
        eof = False
        out: memoryview | None = None
        conn.setblocking(True)
        try:
            while True:
                n = recv_into(view)
                if n == 0:
                    eof = True
                    break
                rx += n
                got += n
                if got >= req:
                    if got == req:
                        got = 0
                        trans += 1
                        n = send(reply)  # SO_SNDTIMEO: partial count or EAGAIN, never a hang
                        tx += n
                        if n != replylen:
                            out = reply[n:]
                    else:
                        count, got = divmod(got, req)
                        trans += count
                        out = memoryview(bytes(reply) * count)
                    if out is not None:  # the rare case: several requests or a partial send
                        while out:
                            n = send(out)
                            tx += n
                            out = out[n:]
                        out = None
                    if trans & 3 == 0 and monotonic() >= deadline:  # every 4, as the client
                        break
        except BlockingIOError:
            pass  # nothing within 1 ms (or the client stopped reading): back to the loop
        finally:
            self.got, self.rx, self.tx, self.trans = got, rx, tx, trans
        self._spin_ended(eof, out)

    def _spin_ended(self, eof: bool, out: memoryview | None) -> None:
        """After a spin (either loop): the client's EOF ends the flow; an unsent reply waits for EPOLLOUT."""
        if eof:
            self.client_ended()
            return
        self.conn.setblocking(False)
        if out:
            self.pending = bytes(out)
            self.loop.modify(self.fd, IN | OUT)

    def _spin_c(self, deadline: float) -> None:
        """:meth:`_spin`'s loop in C (``fastloop``); a partial reply is finished here as there.

        The C loop writes its counters back into ``st`` on every exit, raising
        ones included, so they stay exact.
        """
        fast = fastloop.ext
        assert fast is not None
        self.extra["rr_loop"] = "C"
        conn = self.conn
        st = array("q", (self.got, self.rx, self.tx, self.trans, 0))
        rr_server, fd, req, replylen = fast.rr_server, self.fd, self.req, len(self.reply_buf)
        monotonic = time.monotonic
        status = fast.AGAIN
        out: memoryview | None = None
        conn.setblocking(True)
        try:
            while True:
                status = rr_server(fd, req, replylen, deadline, st)
                if status != fast.PARTIAL:
                    break
                out = memoryview(bytes(st[4]))  # replies are zeros
                while out:
                    n = conn.send(out)  # SO_SNDTIMEO: partial count or EAGAIN, never a hang
                    st[2] += n
                    out = out[n:]
                out = None
                if monotonic() >= deadline:
                    break
        except BlockingIOError:
            pass  # the client stopped reading: back to the loop
        finally:
            self.got, self.rx, self.tx, self.trans = st[0], st[1], st[2], st[3]
        self._spin_ended(status == fast.EOF, out)


class CRRServer(ServerFlow):
    """TCP_CRR: the hello connection stays open as control; joins carry the transactions."""

    def start(self) -> dict[str, Any]:
        super().start()
        # The first byte names the worker process that owns the flow (see ServerWorker.join).
        self.session = bytes([self.sw.index]) + os.urandom(7)
        self.sw.sessions[self.session] = self
        self.joins: set[JoinConn] = set()
        return {"session": self.session}

    def go(self) -> None:
        self.loop.register(self.fd, IN, self._on_ctl)

    def _on_ctl(self, events: int) -> None:
        if self.read_ctl(self.conn) == b"":  # the client's EOF: the flow is over
            self.client_ended()

    def close_sockets(self) -> None:
        for join in list(self.joins):
            join.close()
        self.sw.sessions.pop(self.session, None)
        super().close_sockets()


class JoinConn:
    """One TCP_CRR transaction connection on the server."""

    def __init__(self, flow: CRRServer, conn: socket.socket, leftover: bytes) -> None:
        self.flow = flow
        self.conn = conn
        self.fd = conn.fileno()
        self.got = 0
        self.done = False
        self.out = memoryview(b"")
        flow.begin_server()  # a join may overtake the start marker on the control connection
        flow.joins.add(self)
        flow.conns += 1
        flow.sock = conn
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        flow.loop.register(self.fd, IN, self._on_event)
        if leftover:
            self._got(len(leftover))

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
        self.flow.tx += n
        self.out = self.out[n:]
        # a large reply goes out as the client reads it, never blocking the server
        self.flow.loop.modify(self.fd, IN | OUT if self.out else IN)

    def _on_event(self, events: int) -> None:
        try:
            if events & OUT and self.out:
                self._send()
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
        flow = self.flow
        flow.joins.discard(self)
        if flow.sock is self.conn:
            flow.read_info()
            flow.sock = None
        flow.loop.unregister(self.fd)
        self.conn.close()


class UDPServer(ServerFlow):
    """UDP_STREAM (count, loss and reordering by sequence number) and UDP_RR (echo)."""

    def start(self) -> dict[str, Any]:
        family = self.conn.family
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.setblocking(False)
        tcpinfo.set_buffers(udp, self.spec.remote_buffer)
        udp.bind((self.local[0], 0))
        self.udp = udp
        self.stream = self.spec.test == "UDP_STREAM"
        self.expect = 0
        self.reply_buf = bytearray(max(8, self.spec.reply))
        self._inbuf = bytearray()
        extra = super().start()
        return dict(extra, udp_port=udp.getsockname()[1])

    def go(self) -> None:
        self.loop.register(self.udp.fileno(), IN, self._on_udp)
        self.loop.register(self.fd, IN, self._on_ctl)

    def _on_udp(self, events: int) -> None:
        udp = self.udp
        view = self.worker.rxview
        try:
            for _ in range(64):
                n, addr = udp.recvfrom_into(view)
                if n < 8:
                    continue  # not ours
                (seq,) = _SEQ.unpack_from(view)
                self.rx += n
                self.udp_received += 1
                if self.stream:
                    if seq == self.expect:
                        self.expect += 1
                    elif seq > self.expect:
                        self.udp_lost += seq - self.expect
                        self.expect = seq + 1
                    else:
                        self.udp_reord += 1
                        self.udp_lost -= 1
                else:
                    _SEQ.pack_into(self.reply_buf, 0, seq)
                    udp.sendto(self.reply_buf, addr)
                    self.tx += len(self.reply_buf)
                    self.trans += 1
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.ECONNREFUSED, errno.ENOBUFS):
                self.fail_running(exc)

    def _on_ctl(self, events: int) -> None:
        data = self.read_ctl(self.conn)
        if data is None:
            return
        if not data:
            self.finish("client closed the control connection before the end message")
            return
        self._inbuf += data
        try:
            msg = hs.take_reply(self._inbuf)
        except hs.HandshakeError as exc:
            self.finish(f"bad end message: {exc}")
            return
        if msg is None:
            return
        self._on_udp(IN)  # what is already queued still counts
        sent = int(msg.get("sent", 0))
        self.udp_sent = sent
        if self.stream:
            self.udp_lost = max(0, sent - self.udp_received)
        final = {
            "received": self.udp_received,
            "lost": max(0, self.udp_lost),
            "reordered": self.udp_reord,
            "bytes": self.rx,
        }
        try:
            self.conn.setblocking(True)
            self.conn.sendall(hs.encode_reply(final))
        except OSError:
            pass
        self.finish()

    def close_sockets(self) -> None:
        self.loop.unregister(self.udp.fileno())
        self.udp.close()
        super().close_sockets()


SERVER_TYPES: dict[str, type[ServerFlow]] = {
    "TCP_STREAM": StreamServer,
    "TCP_MAERTS": StreamServer,
    "TCP_BIDIR": StreamServer,
    "TCP_RR": RRServer,
    "TCP_CRR": CRRServer,
    "UDP_STREAM": UDPServer,
    "UDP_RR": UDPServer,
}


class Pending:
    """An accepted connection that has not completed its handshake yet."""

    def __init__(self, worker: "ServerWorker", conn: socket.socket) -> None:
        self.worker = worker
        self.conn = conn
        self.fd = conn.fileno()
        self.buf = bytearray()
        worker.pending[self.fd] = self
        worker.loop.register(self.fd, IN, self._on_event)
        self.timer = worker.loop.call_later(worker.handshake_timeout, lambda: self.drop("handshake timeout"))

    def _on_event(self, events: int) -> None:
        try:
            data = self.conn.recv(4096)
        except BlockingIOError:
            return
        except OSError as exc:
            self.drop(describe_error(exc))
            return
        if not data:
            self.drop("closed during handshake")
            return
        self.buf += data
        try:
            head = hs.parse_prefix(self.buf)
            if head is None:
                return
            kind, length = head
            if len(self.buf) < length:
                return
            self.detach()
            if kind == "join":
                self.worker.join(self.conn, hs.decode_join(self.buf), bytes(self.buf[length:]))
            else:
                hello = hs.decode_hello(self.buf[:length])
                self.worker.route_hello(self.conn, hello, bytes(self.buf[:length]))
        except hs.HandshakeError as exc:
            self.drop(str(exc))

    def detach(self) -> None:
        self.timer.cancel()
        self.worker.loop.unregister(self.fd)
        self.worker.pending.pop(self.fd, None)

    def drop(self, why: str) -> None:
        self.detach()
        self.worker.dropped += 1
        self.worker.emit({"event": "dropped", "reason": why})
        self.conn.close()


class ServerWorker(Worker):
    """One server process: a listening socket and all flows it accepted."""

    def __init__(self, loop: Loop, datadir: str, emit: Callable[[dict[str, Any]], None],
                 listener: socket.socket, tokens: TokenSet,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT) -> None:
        super().__init__(loop, datadir, emit)
        self.handshake_timeout = handshake_timeout
        self.listener = listener
        self.tokens = tokens
        self.pending: dict[int, Pending] = {}
        self.sessions: dict[bytes, CRRServer] = {}
        self.index = 0
        self.peers: dict[int, socket.socket] = {}
        self.board: LoadBoard | None = None
        self.dropped = 0
        listener.setblocking(False)
        loop.register(listener.fileno(), IN, self._on_accept)

    def _on_accept(self, events: int) -> None:
        for _ in range(64):
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    return
                raise
            conn.setblocking(False)
            Pending(self, conn)

    def set_peers(self, index: int, inbox: socket.socket | None,
                  peers: dict[int, socket.socket], board: LoadBoard | None = None) -> None:
        """Multi-process server: our index, our fd inbox, the other workers' inboxes, the load board.

        With SO_REUSEPORT a connection can land in any worker. A new flow's
        connection is handed (SCM_RIGHTS) to the least-loaded worker, so flows
        spread evenly over the cores; a CRR transaction connection to the
        worker that owns the session.
        """
        self.index = index
        self.peers = peers
        self.board = board
        if inbox is not None:
            self.inbox = inbox
            inbox.setblocking(False)
            self.loop.register(inbox.fileno(), IN, self._on_inbox)

    def _on_inbox(self, events: int) -> None:
        for _ in range(64):
            try:
                msg, fds, _, _ = socket.recv_fds(self.inbox, 1 << 16, 4)
            except BlockingIOError:
                return
            if not fds:
                return
            conns = [socket.socket(fileno=fd) for fd in fds]
            for extra in conns[1:]:
                extra.close()
            conn = conns[0]
            conn.setblocking(False)
            kind, body = msg[:1], msg[1:]
            if kind == _HANDED_HELLO:
                if self.board is not None:
                    self.board.receive(self.index)
                try:
                    hello = hs.decode_hello(body)
                except hs.HandshakeError:
                    conn.close()
                    continue
                self.hello(conn, hello)
            elif kind == _HANDED_JOIN and len(body) >= 8:
                self.join(conn, body[:8], body[8:], forwarded=True)
            else:
                conn.close()

    def route_hello(self, conn: socket.socket, hello: hs.Hello, raw: bytes) -> None:
        """A new flow's hello: serve it here, or hand it to a less-loaded worker."""
        board = self.board
        if board is not None:
            target = board.choose(self.index)
            peer = self.peers.get(target)
            if target != self.index and peer is not None:
                board.hand(self.index, target)
                try:
                    socket.send_fds(peer, [_HANDED_HELLO + raw], [conn.fileno()])
                except OSError:
                    board.hand(self.index, target, -1)  # that worker is gone or full: serve it here
                else:
                    conn.close()
                    return
        self.hello(conn, hello)

    def _publish_load(self) -> None:
        if self.board is not None:
            self.board.set_live(self.index, len(self.flows))

    def join(self, conn: socket.socket, session: bytes, leftover: bytes, forwarded: bool = False) -> None:
        owner = session[0]
        if not forwarded and owner != self.index and owner in self.peers:
            try:
                socket.send_fds(self.peers[owner], [_HANDED_JOIN + session + leftover], [conn.fileno()])
            except OSError:
                self.dropped += 1
            conn.close()
            return
        flow = self.sessions.get(session)
        if flow is None or flow.finished:
            self.dropped += 1
            conn.close()
            return
        try:
            JoinConn(flow, conn, leftover)
        except OSError:
            conn.close()

    def hello(self, conn: socket.socket, hello: hs.Hello) -> None:
        try:
            spec = self._spec(hello)
        except _Refuse as exc:
            self._refuse(conn, str(exc))
            return
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # odd field types
            self._refuse(conn, f"bad hello: {exc}")
            return
        hold = hello.fields.get("go")
        if hold is not None and (isinstance(hold, bool) or not isinstance(hold, (int, float))
                                 or not 0 <= hold <= hs.MAX_GO_WAIT):
            self._refuse(conn, f"bad go {hold!r}")
            return
        cls = SERVER_TYPES[spec.test]
        flow: ServerFlow | None = None
        try:
            if spec.test.startswith("TCP"):
                tcpinfo.set_congestion_control(conn, spec.ca)
                tcpinfo.set_buffers(conn, spec.remote_buffer)
                if spec.test in ("TCP_MAERTS", "TCP_BIDIR"):
                    tcpinfo.set_pacing(conn, spec.pacing)
            flow = cls(self, spec, conn)
            extra = flow.start()
            self.flows.append(flow)
            self._publish_load()
            if hold is None:
                flow.begin_server()
        except (TrafficError, OSError) as exc:
            text = exc.message if isinstance(exc, TrafficError) else describe_error(exc)
            self._refuse(conn, text, close=flow is None)
            if flow is not None:
                flow.finish(text)
            return
        try:
            conn.setblocking(True)
            ca = flow.ca or (tcpinfo.congestion_control(conn) if flow.is_tcp else "")
            conn.sendall(hs.encode_reply(dict(extra, ok=True, ca=ca, go=hold is not None)))
            conn.setblocking(False)
        except OSError as exc:
            flow.finish(f"handshake reply failed: {describe_error(exc)}")
            return
        if hold is None:
            flow.go()
        else:
            flow.hold(hold)

    def _spec(self, hello: hs.Hello) -> FlowSpec:
        f = hello.fields
        if not self.tokens.accepts(hello.token):
            raise _Refuse("unknown token")
        flow_id = f.get("flow")
        if not isinstance(flow_id, str) or not safe_flow_id(flow_id):
            raise _Refuse(f"bad flow id {flow_id!r}")
        if f.get("test") not in TEST_TYPES:
            raise _Refuse(f"unknown test {f.get('test')!r}")
        ints = {}
        for name in ("exp", "req", "reply", "buffer", "pacing", "rate"):
            value = f.get(name, 0)
            if not isinstance(value, int) or not 0 <= value <= (1 << 62):
                raise _Refuse(f"bad {name} {value!r}")
            ints[name] = value
        if ints["req"] > MAX_SIZE or ints["reply"] > MAX_SIZE:
            raise _Refuse("request/reply size over 1 GiB")
        dur, interval = f.get("dur"), f.get("interval")
        if not isinstance(dur, (int, float)) or not 0 < dur <= MAX_FLOW_SECONDS:
            raise _Refuse(f"bad dur {dur!r}")
        if not isinstance(interval, (int, float)) or not 0.001 <= interval <= 60:
            raise _Refuse(f"bad interval {interval!r}")
        ca = f.get("ca", "")
        if not isinstance(ca, str) or len(ca) > 15:
            raise _Refuse(f"bad ca {ca!r}")
        meta: tuple[tuple[str, str], ...] = ()
        spec_in = f.get("spec")
        if isinstance(spec_in, dict) and isinstance(spec_in.get("meta"), list):
            meta = tuple((str(k), str(v)) for k, v in (p for p in spec_in["meta"] if len(p) == 2))
        try:
            return FlowSpec(
                flow_id=flow_id,
                test=f["test"],
                server=str(spec_in.get("server", "")) if isinstance(spec_in, dict) else "",
                port=int(spec_in.get("port", 1)) if isinstance(spec_in, dict) else 1,
                ca=ca,
                dur=float(dur),
                start_at=None,
                req=ints["req"],
                reply=ints["reply"],
                local_buffer=ints["buffer"],
                remote_buffer=ints["buffer"],
                pacing=ints["pacing"],
                rate=ints["rate"],
                interval=float(interval),
                exp=ints["exp"],
                meta=meta,
            )
        except (TrafficError, ValueError, TypeError) as exc:
            raise _Refuse(f"bad flow spec: {exc}") from exc

    def _refuse(self, conn: socket.socket, why: str, close: bool = True) -> None:
        self.dropped += 1
        self.emit({"event": "refused", "reason": why})
        try:
            conn.setblocking(True)
            conn.settimeout(1.0)
            conn.sendall(hs.encode_reply({"ok": False, "error": why}))
        except OSError:
            pass
        if close:
            conn.close()

    def on_flow_done(self, flow: FlowEnd, summary: dict[str, Any]) -> None:
        self._publish_load()
        self.emit({"event": "done" if not flow.error else "error", "flow": flow.spec.flow_id,
                   "side": "server", "message": flow.error,
                   "bytes_rx": flow.rx, "bytes_tx": flow.tx, "transactions": flow.trans})

    def stop(self, why: str) -> None:
        for flow in list(self.flows):
            flow.finish(why)
        for pending in list(self.pending.values()):
            pending.drop(why)


class _Refuse(Exception):
    pass


class _Stop(BaseException):
    pass


def make_listener(bind: str, port: int, reuseport: bool) -> socket.socket:
    try:
        infos = socket.getaddrinfo(bind or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuseport:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
        sock.listen(1024)
    except OSError as exc:
        raise TrafficError(f"cannot listen on {bind or '*'}:{port}: {describe_error(exc)}") from exc
    return sock


def _stdout_emit(event: dict[str, Any]) -> None:
    """Best effort: an event is dropped rather than block the server on a full stdout pipe.

    (Nobody may be reading a long-lived server's output; a blocked write would
    stall every flow. A pipe that selects writable takes PIPE_BUF bytes atomically.)
    """
    data = json_line(event)
    try:
        _, writable, _ = select.select([], [1], [], 0)
        if writable:
            os.write(1, data)
    except OSError:
        pass


def _serve_one(listener: socket.socket, datadir: str, tokens: TokenSet,
               emit: Callable[[dict[str, Any]], None], handshake_timeout: float,
               index: int = 0, inbox: socket.socket | None = None,
               peers: dict[int, socket.socket] | None = None, board: LoadBoard | None = None) -> None:
    loop = Loop()
    worker = ServerWorker(loop, datadir, emit, listener, tokens, handshake_timeout)
    worker.set_peers(index, inbox, peers or {}, board)

    try:  # a signal may arrive while the handlers are being installed
        stop_on_signals(lambda signum: _Stop())
        loop.run(lambda: False)
    except _Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        worker.stop("server stopped")


def default_workers() -> int:
    """Server processes when none are asked for: one per usable CPU (at most 8)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


def serve(bind: str, port: int, datadir: str, *, tokens: Iterable[str] = (),
          token_file: str | None = None, workers: int = 1,
          handshake_timeout: float = HANDSHAKE_TIMEOUT,
          emit: Callable[[dict[str, Any]], None] = _stdout_emit) -> int:
    """Run the server until SIGTERM/SIGINT (flows in progress end with status error).

    ``workers`` processes share the port (SO_REUSEPORT); new flows go to the
    least-loaded one (:class:`~netesto.engine.balance.LoadBoard`); 0 means
    :func:`default_workers`.
    """
    if workers < 0:
        raise TrafficError(f"workers must be >= 0 (0: one per usable CPU), got {workers}")
    if not 0 <= port <= 65535:  # getaddrinfo would take 99999 as 34463
        raise TrafficError(f"port must be 0..65535 (0: any), got {port}")
    check_datadir(datadir)
    token_set = TokenSet(tokens, token_file)
    workers = default_workers() if workers == 0 else workers
    first = make_listener(bind, port, workers > 1)
    port = first.getsockname()[1]
    emit({"event": "listening", "bind": bind, "port": port, "workers": workers, "pid": os.getpid()})
    if workers == 1:
        _serve_one(first, datadir, token_set, emit, handshake_timeout)
        return 0
    children = []
    inboxes = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(workers)]
    board = LoadBoard(workers)
    parent = os.getpid()
    for index in range(workers):
        listener = first if index == 0 else make_listener(bind, port, True)
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)
            code = 0
            peers = {j: pair[0] for j, pair in enumerate(inboxes) if j != index}
            try:
                _serve_one(listener, datadir, token_set, emit, handshake_timeout,
                           index, inboxes[index][1], peers, board)
            except BaseException:  # say what ended this worker: its exit status alone cannot
                traceback.print_exc()
                code = 1
            os._exit(code)
        children.append(pid)
        if index:
            listener.close()
    first.close()
    for pair in inboxes:
        pair[0].close()
        pair[1].close()

    def forward(signum: int, frame: object) -> None:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    for pid in children:
        while True:
            try:
                _, st = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        code = os.waitstatus_to_exitcode(st)
        if code:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
            print(f"netesto.engine server: worker {pid} ended with {how}", file=sys.stderr, flush=True)
            status = 1
    return int(status)


__all__ = ["SERVER_TYPES", "ServerWorker", "TokenSet", "default_workers", "make_listener", "serve"]
