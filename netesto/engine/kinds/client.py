"""The client side of built-in flows: connect, handshake, start on time; TCP_STREAM/MAERTS/BIDIR.

Each test type is a :class:`ClientFlow` subclass driven by the worker's
event loop (non-blocking sockets, level-triggered epoll): :class:`StreamClient`
here, :class:`~netesto.engine.kinds.client_rr.RRClient`,
:class:`~netesto.engine.kinds.client_crr.CRRClient` and
:class:`~netesto.engine.kinds.client_udp.UDPClient` beside it. The data phase and
its end are :class:`~netesto.engine.kinds.clientrun.ClientRun`'s.

Scheduled start (``start_at``): the flow connects, sets ca/buffers/pacing
and handshakes up to :data:`PRESTART_LEAD` ahead; the server holds it. At
start_at (a loop timer, then a short precise sleep) the client sends the one-byte
start marker and the data phase begins: ``start_wall`` in the raw file and
the ``started`` event is the instant the marker went out. The server starts
its clock and sampling when the marker arrives. TCP_CRR handshakes its
control connection ahead, but every transaction connects by design, so its
first transaction's connect happens at start_at. UDP flows handshake their
TCP control connection ahead and open their UDP socket at start_at.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from typing import Any

from netesto.collectors import tcpinfo
from netesto.engine.core import handshake as hs
from netesto.engine.kinds.clientrun import ClientRun
from netesto.engine.kinds.flowend import Worker, describe_error, io_handler
from netesto.engine.kinds.lowat import ReadMark
from netesto.engine.core.loop import ERR, IN, OUT, Timer
from netesto.errors import TrafficError
from netesto.protocol.flowspec import FlowSpec

CONNECT_TIMEOUT = 3.0
HANDSHAKE_TIMEOUT = 5.0
PRESTART_LEAD = 5.0  # connect and handshake this long (at most) before a flow's start_at
AHEAD = 0.002  # the loop timer fires this early (epoll waits in whole ms); a precise sleep does the rest
RT_LEAD = 0.05  # real-time priority from this long before start_at (a busy host wakes us late otherwise)
_IN_ERR = IN | ERR


class ClientFlow(ClientRun):
    """Connect + handshake + the start instant; subclasses implement :meth:`run` and :meth:`end`."""

    nodelay = False

    def __init__(self, worker: Worker, spec: FlowSpec) -> None:
        super().__init__(worker, spec)
        self._timer: Timer | None = None
        self._resolved: dict[int, tuple[int, tuple[Any, ...]]] = {}

    # start, connect, handshake

    def schedule(self) -> None:
        """Connect now, or ``PRESTART_LEAD`` before start_at: the data phase waits for start_at.

        Connect, socket options and handshake all happen ahead of the start
        instant (the server holds the flow until our start marker), so the
        start skew is only the timer's and the marker's latency.
        """
        spec = self.spec
        delay = 0.0 if spec.start_at is None else spec.start_at - PRESTART_LEAD - time.time()
        self.timers.append(self.loop.call_later(max(0.0, delay), self.connect))

    def addrinfo(self, kind: int) -> tuple[int, tuple[Any, ...]]:
        """(family, address) of the server, resolved once per socket type (CRR connects often)."""
        cached = self._resolved.get(kind)
        if cached is not None:
            return cached
        try:
            infos = socket.getaddrinfo(self.spec.server, self.spec.port, type=kind)
        except socket.gaierror as exc:
            raise TrafficError(f"cannot resolve {self.where}: {exc.strerror}") from exc
        family, _, _, _, addr = infos[0]
        self._resolved[kind] = (family, addr)
        return family, addr

    def new_tcp_socket(self) -> tuple[socket.socket, tuple[Any, ...]]:
        family, addr = self.addrinfo(socket.SOCK_STREAM)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if self.is_tcp:
                tcpinfo.set_congestion_control(sock, self.spec.ca)
                tcpinfo.set_buffers(sock, self.spec.local_buffer)
                tcpinfo.set_pacing(sock, self.spec.pacing)
            if self.nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        return sock, addr

    def connect(self) -> None:
        self.phase = "connecting"
        self.requested_start = time.time()
        try:
            sock, addr = self.new_tcp_socket()
        except TrafficError as exc:
            self.fail(exc.message)
            return
        self.ctl = sock
        err = sock.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS):
            self.fail(f"cannot connect to {self.where}: {os.strerror(err).lower()}")
            return
        self.loop.register(sock.fileno(), OUT, self._on_connected)
        self._timer = timer = self.loop.call_later(CONNECT_TIMEOUT, self._connect_timeout)
        self.timers.append(timer)

    def _connect_timeout(self) -> None:
        self.fail(f"cannot connect to {self.where}: timed out after {CONNECT_TIMEOUT:.1f} s")

    def _on_connected(self, events: int) -> None:
        sock = self.ctl
        assert sock is not None
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.fail(f"cannot connect to {self.where}: {os.strerror(err).lower()}")
            return
        if self._timer is not None:
            self._timer.cancel()
        self.local = sock.getsockname()[:2]
        self.remote = sock.getpeername()[:2]
        spec = self.spec
        hello = hs.encode_hello(
            {
                "flow": spec.flow_id,
                "exp": spec.exp,
                "test": spec.test,
                "req": spec.req,
                "reply": spec.reply,
                "dur": spec.dur,
                "interval": spec.interval,
                "ca": spec.ca if self.is_tcp else "",
                "buffer": spec.remote_buffer,
                "pacing": spec.pacing,
                "rate": spec.rate,
                "token": spec.token,
                "go": 0.0 if spec.start_at is None else max(0.0, spec.start_at - time.time()),
                "spec": {k: v for k, v in spec.to_dict().items() if k != "token"},
            }
        )
        try:
            sock.sendall(hello)  # small; fits an empty send buffer
        except OSError as exc:
            self.fail(f"handshake with {self.where} failed: {describe_error(exc)}")
            return
        self.phase = "handshake"
        self.loop.unregister(sock.fileno())
        self.loop.register(sock.fileno(), IN, self._on_reply)
        self._timer = timer = self.loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)
        self.timers.append(timer)

    def _handshake_timeout(self) -> None:
        self.fail(f"no handshake answer from {self.where} within {HANDSHAKE_TIMEOUT:.0f} s")

    def _on_reply(self, events: int) -> None:
        sock = self.ctl
        assert sock is not None
        # Read exactly the reply: data of the flow may follow it at once (MAERTS).
        try:
            total = hs.reply_length(self._inbuf)
        except hs.HandshakeError as exc:
            self.fail(f"bad handshake answer from {self.where}: {exc}")
            return
        want = hs.REPLY_HEAD.size - len(self._inbuf) if total is None else total - len(self._inbuf)
        try:
            data = sock.recv(want)
        except BlockingIOError:
            return
        except OSError as exc:
            self.fail(f"handshake with {self.where} failed: {describe_error(exc)}")
            return
        if not data:
            self.fail(f"{self.where} closed the connection during the handshake")
            return
        self._inbuf += data
        try:
            reply = hs.take_reply(self._inbuf)
        except hs.HandshakeError as exc:
            self.fail(f"bad handshake answer from {self.where}: {exc}")
            return
        if reply is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        if not reply.get("ok"):
            self.fail(f"{self.where} refused flow {self.spec.flow_id}: {reply.get('error', '?')}")
            return
        self.reply = reply
        self.loop.unregister(sock.fileno())
        self.sock = sock
        self.phase = "ready"
        self.ready_wall = time.time()
        start_at = self.spec.start_at
        wait = 0.0 if start_at is None else start_at - self.ready_wall
        if wait > RT_LEAD:
            self.timers.append(self.loop.call_later(wait - RT_LEAD, self._hold_rt))
        else:
            self._hold_rt()
        if wait > AHEAD:
            self.timers.append(self.loop.call_later(wait - AHEAD, self._go))
        else:
            self._go()

    def _hold_rt(self) -> None:
        if self.phase == "ready":
            self.worker.rt.acquire(self)

    def _go(self) -> None:
        """Start the data phase at start_at: sleep out the last moments, send the marker.

        From :data:`RT_LEAD` before start_at until its marker is out the worker
        runs at real-time priority when allowed (``worker.rt``), so a busy host's
        scheduler adds neither a late wake-up nor its time slice to the skew (a
        busy-wait would: several processes spinning at one instant on few cores
        preempt each other for milliseconds). Every flow of this worker due by
        then sends its marker in the same stretch.
        """
        if self.phase != "ready":
            return  # another flow's stretch started this one
        start_at = self.spec.start_at
        if start_at is not None:
            left = start_at - time.time()
            if left > 0:
                time.sleep(left)
        self._mark()
        now = time.time()
        for flow in list(self.worker.flows):  # a failed start leaves the list
            if isinstance(flow, ClientFlow) and flow.phase == "ready" \
                    and (flow.spec.start_at or 0.0) <= now:
                flow._mark()

    def _mark(self) -> None:
        """The data phase starts now: stamp, send the start marker; the rest follows (``_run``)."""
        sock = self.ctl
        assert sock is not None
        stamp = (time.monotonic(), time.time())
        self.phase = "starting"
        if self.reply.get("go"):
            try:
                sock.send(hs.GO)  # one byte into an idle connection's empty send buffer
            except OSError as exc:
                self.fail(f"cannot start flow {self.spec.flow_id} with {self.where}: {describe_error(exc)}")
                return
        self.start_mono, self.start_wall = stamp
        self.worker.rt.release(self)
        # The rest waits behind the start of any other flow of this worker due now
        # (their timers are earlier): opening files must not delay their markers.
        self.timers.append(self.loop.call_at(time.monotonic(), self._run))


class StreamClient(ClientFlow):
    """TCP_STREAM (we send), TCP_MAERTS (server sends), TCP_BIDIR (both)."""

    def run(self) -> None:
        self.sock, self.ctl = self.ctl, None
        assert self.sock is not None
        self.sending = self.spec.test in ("TCP_STREAM", "TCP_BIDIR")
        self.send_only = self.spec.test == "TCP_STREAM"  # alone in its worker it sends in blocking spins
        self.fd = self.sock.fileno()
        if not self.send_only:
            ReadMark(self, self.sock).start()
        self.loop.register(self.fd, IN | (OUT if self.sending else 0), self._on_event)

    @io_handler
    def _on_event(self, events: int) -> None:
        sock = self.sock
        if sock is None:
            return
        if events & OUT and self.sending:
            if self.send_only and len(self.worker.flows) == 1:
                self.send_spin(sock)
            else:
                self.send_burst(sock)
        if events & _IN_ERR:
            solo = not self.sending and len(self.worker.flows) == 1
            if not (self.recv_spin(sock) if solo else self.recv_burst(sock)):
                self.peer_closed()

    def end(self) -> None:
        assert self.sock is not None
        self.sending = False
        self.sock.shutdown(socket.SHUT_WR)
        self.closing = True
        self.loop.modify(self.fd, IN)


__all__ = ["AHEAD", "CONNECT_TIMEOUT", "ClientFlow", "HANDSHAKE_TIMEOUT", "PRESTART_LEAD", "RT_LEAD", "StreamClient"]
