"""The server's accept and handshake path: pending connections, hellos and CRR joins, hand-offs.

A new connection must send a valid hello or CRR join within
:data:`HANDSHAKE_TIMEOUT`; bad magic, oversized or undecodable hellos, bad
fields and unknown tokens close just that connection. A good hello becomes
a flow of :data:`SERVER_TYPES` (in this process or, handed over SCM_RIGHTS,
the least-loaded one).
"""

from __future__ import annotations

import errno
import socket
from typing import Any, Callable

from netesto.collectors import tcpinfo
from netesto.engine.native import crrfast
from netesto.engine.core import handshake as hs
from netesto.engine.core.balance import LoadBoard
from netesto.engine.kinds.flowend import FlowEnd, describe_error, safe_flow_id
from netesto.engine.core.loop import IN, Loop, Timer
from netesto.engine.kinds.server_rr import RRServer
from netesto.engine.kinds.server_udp import UDPServer
from netesto.engine.kinds.server_wrr import DrawnCRRServer, DrawnRRServer
from netesto.engine.kinds.serverflow import CRRServer, ServerFlow, ServerHost, StreamServer
from netesto.engine.serve.tokens import TokenSet
from netesto.errors import TrafficError
from netesto.policy import MAX_FLOW_SECONDS
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import SERVER_SENDS, TEST_TYPES

HANDSHAKE_TIMEOUT = 5.0
MAX_SIZE = 1 << 30
# What one worker hands another over their inbox (SCM_RIGHTS): the first byte says what.
_HANDED_HELLO = b"H"  # + the raw hello: a new flow for the less-loaded worker
_HANDED_JOIN = b"J"  # + session (8 bytes) + bytes read after the join: a CRR connection for its owner


SERVER_TYPES: dict[str, type[ServerFlow]] = {
    "TCP_STREAM": StreamServer,
    "TCP_MAERTS": StreamServer,
    "TCP_BIDIR": StreamServer,
    "TCP_RR": RRServer,
    "TCP_CRR": CRRServer,
    "UDP_STREAM": UDPServer,
    "UDP_RR": UDPServer,
}
DRAWN_SERVER_TYPES: dict[str, type[ServerFlow]] = {"TCP_RR": DrawnRRServer, "TCP_CRR": DrawnCRRServer}
# the flow spec's fields of a drawn workload (docs/workloads.md), taken from the hello's spec
WORKLOAD_FIELDS = ("req_dist", "reply_dist", "gap", "open_loop", "seed", "stream", "link_bps", "load")


class Pending:
    """An accepted connection that has not completed its handshake yet."""

    def __init__(self, worker: "ServerWorker", conn: socket.socket, data: bytes = b"") -> None:
        self.worker = worker
        self.conn = conn
        self.fd = conn.fileno()
        self.buf = bytearray()
        self.timer: Timer | None = None
        self.waiting = True
        worker.pending[self.fd] = self
        # A client sends its hello or join as soon as it is connected: often it is here
        # already (``data``: read by the C accept), and a CRR transaction is served
        # without polling or a timer.
        if data:
            self._take(data)
        else:
            self._on_event(IN)
        if self.waiting:
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
        self._take(data)

    def _take(self, data: bytes) -> None:
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
        self.waiting = False
        if self.timer is not None:
            self.timer.cancel()
            self.worker.loop.unregister(self.fd)
        self.worker.pending.pop(self.fd, None)

    def drop(self, why: str) -> None:
        self.detach()
        self.worker.dropped += 1
        self.worker.emit({"event": "dropped", "reason": why})
        self.conn.close()


class ServerWorker(ServerHost):
    """One server process: a listening socket, the handshakes it checks and all flows it accepted."""

    def __init__(self, loop: Loop, datadir: str, emit: Callable[[dict[str, Any]], None],
                 listener: socket.socket, tokens: TokenSet,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT) -> None:
        super().__init__(loop, datadir, emit)
        self.handshake_timeout = handshake_timeout
        self.listener = listener
        self.tokens = tokens
        self.peers: dict[int, socket.socket] = {}
        self.dropped = 0
        listener.setblocking(False)
        self.deferred = False  # TCP_DEFER_ACCEPT set (see defer_accept)
        loop.register(listener.fileno(), IN, self._on_accept)

    def _on_accept(self, events: int) -> None:
        if crrfast.ext is not None:
            self._accept_c()
            return
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

    def _accept_c(self) -> None:
        """Accept in C, which serves the joins it can whole (:meth:`ServerHost.accept_joins`); the rest as above."""
        family = self.listener.family
        for fd, data in self.accept_joins(self.listener):
            Pending(self, socket.socket(family, socket.SOCK_STREAM, 0, fileno=fd), data)

    def defer_accept(self) -> None:
        """Once this worker sees a CRR flow, a connection is accepted when its first bytes are in
        (every client speaks first): a join comes with its request and is served at once."""
        if not self.deferred:
            self.listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, 1)
            self.deferred = True

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
                try:
                    hello = hs.decode_hello(body)
                except hs.HandshakeError:
                    self._taken()
                    conn.close()
                    continue
                self.serve_counted(conn, hello)
            elif kind == _HANDED_JOIN and len(body) >= 8:
                self.join(conn, body[:8], body[8:], forwarded=True)
            else:
                conn.close()

    def route_hello(self, conn: socket.socket, hello: hs.Hello, raw: bytes) -> None:
        """A new flow's hello: serve it here, or hand it to a less-loaded worker."""
        board = self.board
        if hello.test == "TCP_CRR":
            self.defer_accept()
        if board is not None:
            target = board.choose(self.index, hello.test == "TCP_CRR")
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
            board.hand(self.index, self.index)  # kept: on its way here, as a hand-off to ourselves
            self.serve_counted(conn, hello)
            return
        self.hello(conn, hello)

    def serve_counted(self, conn: socket.socket, hello: hs.Hello) -> None:
        """Serve a hello handed to this worker (by another, or by itself: :meth:`route_hello`).

        The board counts it on its way here until :meth:`hello` has made its
        flow live (or refused it), so a worker placing a flow meanwhile sees
        it: taken as received first, it was counted nowhere while its flow
        was set up (files opened, a few ms), and a hello arriving then could
        join it in this worker while another stayed idle (1 of 30 bursts of
        4 flows to 4 workers, before).
        """
        try:
            self.hello(conn, hello)
        finally:
            self._taken()

    def _taken(self) -> None:
        """A hello handed here is served or refused: no longer on its way (the board's ``received``)."""
        if self.board is not None:
            self.board.receive(self.index)

    def _publish_load(self) -> None:
        if self.board is not None:
            self.board.set_live(self.index, len(self.flows), len(self.sessions))

    def join(self, conn: socket.socket, session: bytes, leftover: bytes, forwarded: bool = False) -> None:
        self.defer_accept()  # the next joins come with their requests, for crr_accept
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
            flow.joined(conn, leftover)
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
        cls = (DRAWN_SERVER_TYPES if spec.workload else SERVER_TYPES)[spec.test]
        if issubclass(cls, CRRServer):
            self.defer_accept()
        flow: ServerFlow | None = None
        try:
            if spec.test.startswith("TCP"):
                tcpinfo.set_congestion_control(conn, spec.ca)
                tcpinfo.set_buffers(conn, spec.remote_buffer)
                if spec.test in SERVER_SENDS:
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
                crr_close=str(spec_in.get("crr_close", "rst")) if isinstance(spec_in, dict) else "rst",
                **({k: spec_in[k] for k in WORKLOAD_FIELDS if k in spec_in} if isinstance(spec_in, dict) else {}),
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


__all__ = ["HANDSHAKE_TIMEOUT", "Pending", "SERVER_TYPES", "ServerWorker"]
