"""The client side of built-in flows: connect, handshake, move bytes, sample, report.

Each test type is a :class:`ClientFlow` subclass driven by the worker's
event loop (non-blocking sockets, level-triggered epoll). The client decides
when a flow ends: after ``dur`` seconds it half-closes its connection (TCP)
or sends an end message on the control connection (UDP, CRR) and waits for
the server to finish its side, so both ends' byte counts are final.

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
import struct
import time
from array import array
from typing import Any

from netesto.errors import TrafficError
from netesto.engine import fastloop
from netesto.engine import handshake as hs
from netesto.collectors import tcpinfo
from netesto.engine.flowend import FlowEnd, Worker, cpu_seconds, describe_error, io_handler
from netesto.engine.loop import ERR, IN, OUT, Timer
from netesto.protocol.flowspec import FlowSpec

CONNECT_TIMEOUT = 3.0
HANDSHAKE_TIMEOUT = 5.0
DRAIN_TIMEOUT = 10.0
UDP_DEFAULT_SIZE = 1472  # one 1500-byte IPv4 packet
UDP_RR_TIMEOUT = 0.2
PROGRESS_EVERY = 1.0
PRESTART_LEAD = 5.0  # connect and handshake this long (at most) before a flow's start_at
AHEAD = 0.002  # the loop timer fires this early (epoll waits in whole ms); a precise sleep does the rest
RT_LEAD = 0.05  # real-time priority from this long before start_at (a busy host wakes us late otherwise)
_SEQ = struct.Struct("<Q")
_IN_ERR = IN | ERR
_perf_ns = time.perf_counter_ns


class ClientFlow(FlowEnd):
    """Connect + handshake; subclasses implement :meth:`run` and :meth:`end`."""

    side = "client"
    nodelay = False

    def __init__(self, worker: Worker, spec: FlowSpec) -> None:
        super().__init__(worker, spec)
        self.where = f"{spec.server}:{spec.port}"
        self.phase = "waiting"
        self.ctl: socket.socket | None = None  # the handshake connection
        self.reply: dict[str, Any] = {}
        self._inbuf = bytearray()
        self._timer: Timer | None = None
        self.last_progress = (0.0, 0, 0)
        self.closing = False  # we told the server the flow is over
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
        start_at = self.spec.start_at
        wait = 0.0 if start_at is None else start_at - time.time()
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

    def _run(self) -> None:
        try:
            self.begin_client((self.start_mono, self.start_wall))
        except OSError as exc:
            self.fail(f"cannot record flow {self.spec.flow_id}: {describe_error(exc)}")
            return
        try:
            self.run()
        except (OSError, TrafficError) as exc:
            self.fail(describe_error(exc) if isinstance(exc, OSError) else exc.message)

    def begin_client(self, stamp: tuple[float, float]) -> None:
        self.phase = "running"
        self.begin(stamp)
        start_at = self.spec.start_at
        self.worker.emit(
            {
                "event": "started",
                "flow": self.spec.flow_id,
                "t_wall": self.start_wall,
                "start_at": start_at,
                "skew": (self.start_wall - start_at) if start_at else 0.0,
                "ca": self.ca,
                "local": list(self.local),
                "remote": list(self.remote),
            }
        )
        self.timers.append(self.loop.call_at(self.start_mono + self.spec.dur, self._end))
        self.timers.append(
            self.loop.call_at(self.start_mono + self.spec.dur + DRAIN_TIMEOUT, self._watchdog)
        )
        self.timers.append(self.loop.call_at(self.start_mono + PROGRESS_EVERY, self._progress))

    def _end(self) -> None:
        if not self.finished:
            self.phase = "ending"
            try:
                self.end()
            except OSError as exc:
                self.fail_running(exc)

    def _watchdog(self) -> None:
        self.fail(f"{self.where} did not end the flow within {DRAIN_TIMEOUT:.0f} s after its duration")

    def _progress(self) -> None:
        if self.finished:
            return
        now = time.monotonic()
        t0, tx0, rx0 = self.last_progress
        t0 = t0 or self.start_mono
        span = max(1e-9, now - t0)
        self.worker.emit(
            {
                "event": "progress",
                "flow": self.spec.flow_id,
                "t": round(now - self.start_mono, 3),
                "bytes_tx": self.tx,
                "bytes_rx": self.rx,
                "tx_bps": (self.tx - tx0) * 8 / span,
                "rx_bps": (self.rx - rx0) * 8 / span,
                "rate_bps": (self.tx - tx0 + self.rx - rx0) * 8 / span,
                "transactions": self.trans,
            }
        )
        self.last_progress = (now, self.tx, self.rx)
        self.timers.append(self.loop.call_at(now + PROGRESS_EVERY, self._progress))

    # ending

    def fail(self, message: str) -> None:
        if not self.finished:
            self.finish(message)

    def fail_running(self, exc: BaseException) -> None:
        self.fail(f"{describe_error(exc)} after {self.elapsed():.1f} s ({self.where})")

    def peer_closed(self) -> None:
        """EOF from the server: the normal end after we half-closed, an error before."""
        if self.closing:
            self.finish()
        else:
            self.fail(f"connection closed by peer after {self.elapsed():.1f} s ({self.where})")

    def close_sockets(self) -> None:
        super().close_sockets()
        if self.ctl is not None:
            self.loop.unregister(self.ctl.fileno())
            self.ctl.close()
            self.ctl = None

    def finish(self, error: str = "") -> None:
        self.worker.rt.release(self)
        if self.writer is None and not self.finished:
            # Failed before the data phase: still leave a file saying so.
            if not self.start_mono:
                self.start_wall = getattr(self, "requested_start", time.time())
                self.start_mono = time.monotonic()
                # and no CPU yet: what the process spent before is not this flow's
                self.cpu0 = cpu_seconds()
                self.sampling_cpu0 = self.worker.sampler.cpu_ns
            try:
                self.open_writer(self.worker.datadir)
            except OSError:
                pass
        super().finish(error)

    # test specific

    def run(self) -> None:
        raise NotImplementedError

    def end(self) -> None:
        raise NotImplementedError


class StreamClient(ClientFlow):
    """TCP_STREAM (we send), TCP_MAERTS (server sends), TCP_BIDIR (both)."""

    def run(self) -> None:
        self.sock, self.ctl = self.ctl, None
        assert self.sock is not None
        self.sending = self.spec.test in ("TCP_STREAM", "TCP_BIDIR")
        self.fd = self.sock.fileno()
        self.loop.register(self.fd, IN | (OUT if self.sending else 0), self._on_event)

    @io_handler
    def _on_event(self, events: int) -> None:
        sock = self.sock
        if sock is None:
            return
        if events & OUT and self.sending:
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


class RRClient(ClientFlow):
    """TCP_RR: one request of ``req`` bytes, one reply of ``reply`` bytes, repeat."""

    nodelay = True

    def run(self) -> None:
        self.sock, self.ctl = self.ctl, None
        assert self.sock is not None
        self.fd = self.sock.fileno()
        self.request = memoryview(bytes(max(1, self.spec.req)))
        self.reply_size = max(1, self.spec.reply)
        self.pending = self.request[:0]
        self.got = 0
        self.ending = False
        self.view = self.worker.rxview
        self.viewlen = len(self.view)
        # Alone in its worker with small messages: run transactions with blocking
        # send/recv (one syscall less per transaction than epoll + recv), going
        # back to the loop whenever a timer is due or no reply came within 1 ms.
        self.solo = len(self.worker.flows) == 1 and self.spec.req <= 65536
        if self.solo:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 1000))
            if fastloop.ext is not None:  # where the C loop leaves latencies for lat_raw
                self.latbuf = array("q", [0]) * fastloop.LAT_CAPACITY
                self.latview = memoryview(self.latbuf).cast("B")  # frombytes takes bytes, not 'q' items
        self.loop.register(self.fd, IN, self._on_event)
        self.t0 = time.perf_counter_ns()
        self._send(self.request)

    def _send(self, data: memoryview) -> bool:
        """Send what fits; the rest waits for EPOLLOUT. True when all of it went out."""
        assert self.sock is not None
        try:
            n = self.sock.send(data)
        except BlockingIOError:
            n = 0
        self.tx += n
        if n < len(data):
            self.pending = data[n:]
            self.loop.modify(self.fd, IN | OUT)
            return False
        return True

    @io_handler
    def _on_event(self, events: int) -> None:
        sock = self.sock
        if sock is None:
            return
        if events & OUT and self.pending:
            data, self.pending = self.pending, self.request[:0]
            self.loop.modify(self.fd, IN)
            self._send(data)
        if events & _IN_ERR:
            want = self.reply_size - self.got
            n = sock.recv_into(self.view, want if 0 < want < self.viewlen else self.viewlen)
            if n == 0:
                self.peer_closed()
                return
            self.rx += n
            self.got += n
            if self.got >= self.reply_size and not self.closing:
                now = _perf_ns()
                lat = self.lat_raw
                lat.append(now - self.t0)
                if len(lat) >= 65536:
                    self.fold_latency()
                self.trans += 1
                self.got -= self.reply_size
                if self.ending:
                    sock.shutdown(socket.SHUT_WR)
                    self.closing = True
                    return
                self.t0 = now
                if self._send(self.request) and self.solo:
                    self._spin()

    def _spin(self) -> None:
        """Blocking transactions until a timer is due (see ``solo``); a request is out."""
        if fastloop.ext is not None and not self.ending:
            self._spin_c()
            return
        self.extra["rr_loop"] = "python"
        sock = self.sock
        assert sock is not None
        deadline = self.loop.next_deadline()
        view, viewlen = self.view, self.viewlen
        request, reply_size = self.request, self.reply_size
        reqlen = len(request)
        lat = self.lat_raw
        append = lat.append
        recv_into, send = sock.recv_into, sock.send
        monotonic = time.monotonic
        got, rx, tx, trans, t0 = self.got, self.rx, self.tx, self.trans, self.t0
        last = eof = False
        sock.setblocking(True)  # no Python-level poll; SO_RCVTIMEO bounds each recv
        try:
            while True:
                while got < reply_size:
                    want = reply_size - got
                    n = recv_into(view, want if want < viewlen else viewlen)
                    if n == 0:
                        eof = True
                        break
                    rx += n
                    got += n
                if eof:
                    break
                now = _perf_ns()
                append(now - t0)
                trans += 1
                got -= reply_size
                if self.ending:
                    last = True
                    break
                t0 = now
                n = send(request)
                if n != reqlen:  # a small send buffer: the rest blocks until it fits
                    sock.sendall(request[n:])
                tx += reqlen
                if trans & 3 == 0:  # every 4: at ~15k/s across CPUs 16 let a 1 ms tick slip ~1 ms
                    if len(lat) >= 65536:
                        self.fold_latency()
                    if monotonic() >= deadline:
                        break
        except BlockingIOError:
            pass  # no reply within SO_RCVTIMEO: the loop waits for it
        finally:
            self.got, self.rx, self.tx, self.trans, self.t0 = got, rx, tx, trans, t0
        sock.setblocking(False)
        if eof:
            self.peer_closed()
        elif last:
            sock.shutdown(socket.SHUT_WR)  # the last reply is in
            self.closing = True

    def _spin_c(self) -> None:
        """:meth:`_spin` with the transactions in C (``fastloop``): same syscalls, same counters.

        The C loop returns at the same points as the Python one (timer due, no
        reply within 1 ms, EOF) and also when its latency buffer is full or a
        request went out partly (sent here, as the Python loop does). Its
        state array is written back even when it raises (an error, or the
        SIGTERM handler's exception), so the counters stay exact.
        """
        sock, fast = self.sock, fastloop.ext
        assert sock is not None and fast is not None
        self.extra["rr_loop"] = "C"
        deadline = self.loop.next_deadline()
        latbuf, latview, lat = self.latbuf, self.latview, self.lat_raw
        st = array("q", (self.got, self.rx, self.tx, self.trans, self.t0, 0, 0))
        fd, request, reply_size = self.fd, self.request, self.reply_size
        reqlen = len(request)
        rr_client, monotonic = fast.rr_client, time.monotonic
        status = fast.AGAIN
        sock.setblocking(True)  # SO_RCVTIMEO bounds each recv
        try:
            while True:
                try:
                    status = rr_client(fd, reqlen, reply_size, deadline, st, latbuf)
                finally:
                    if st[5]:
                        lat.frombytes(latview[:st[5] * 8])
                        st[5] = 0
                if len(lat) >= 65536:
                    self.fold_latency()
                if status == fast.PARTIAL:
                    sock.sendall(request[st[6]:])
                    st[2] += reqlen
                elif status != fast.LATFULL:
                    break
                if monotonic() >= deadline:
                    break
        finally:
            self.got, self.rx, self.tx, self.trans, self.t0 = st[0], st[1], st[2], st[3], st[4]
        sock.setblocking(False)
        if status == fast.EOF:
            self.peer_closed()

    def end(self) -> None:
        self.ending = True  # half-close once the outstanding reply is in


class CRRClient(ClientFlow):
    """TCP_CRR: connect, request, reply, close - one connection per transaction."""

    nodelay = True

    def run(self) -> None:
        self.session = bytes(self.reply.get("session", b""))
        self.join = hs.encode_join(self.session)
        self.request = bytes(max(1, self.spec.req))
        self.first = self.join + self.request
        self.reply_size = max(1, self.spec.reply)
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
            n = conn.recv_into(view, min(self.reply_size - self.got, len(view)))
            if n == 0:
                raise OSError(errno.ECONNRESET, "connection closed by peer")
            self.rx += n
            self.got += n
            if self.got >= self.reply_size:
                now = time.perf_counter_ns()
                self.record_latency(now - self.t0)
                self.trans += 1
                self.read_info()  # keep this connection's last tcp_info for the sampler
                self._close_conn()
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


class UDPClient(ClientFlow):
    """UDP_STREAM (paced datagrams with sequence numbers) and UDP_RR (echo with timeout)."""

    def run(self) -> None:
        family, addr = self.addrinfo(socket.SOCK_DGRAM)
        port = int(self.reply.get("udp_port", 0))
        if not port:
            raise TrafficError(f"{self.where} gave no UDP port")
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.setblocking(False)
        tcpinfo.set_buffers(udp, self.spec.local_buffer)
        udp.connect((addr[0], port) + tuple(addr[2:]))
        self.sock = udp
        self.fd = udp.fileno()
        self.stream = self.spec.test == "UDP_STREAM"
        self.local = udp.getsockname()[:2]
        self.remote = udp.getpeername()[:2]
        self.seq = 0
        assert self.ctl is not None
        self.loop.register(self.ctl.fileno(), IN, self._on_ctl)
        if self.stream:
            self.size = self.spec.req if self.spec.req >= 16 else UDP_DEFAULT_SIZE
            self.buf = bytearray(self.size)
            self.rate = self.spec.rate
            self.sending = True
            if self.rate > 0:
                self.loop.register(self.fd, IN, self._on_udp)
                self.t_first = time.monotonic()
                self._pace()
            else:
                self.loop.register(self.fd, IN | OUT, self._on_udp)
        else:
            self.size = max(8, self.spec.req)
            self.buf = bytearray(self.size)
            self.reply_size = max(8, self.spec.reply)
            self.loop.register(self.fd, IN, self._on_udp)
            self._rr_send()
            self._rr_check()

    def _send_one(self) -> bool:
        _SEQ.pack_into(self.buf, 0, self.seq)
        try:
            self.sock.send(self.buf)  # type: ignore[union-attr]
        except (BlockingIOError, OSError) as exc:
            if isinstance(exc, BlockingIOError) or exc.errno == errno.ENOBUFS:
                return False
            raise
        self.seq += 1
        self.udp_sent += 1
        self.tx += self.size
        return True

    def _pace(self) -> None:
        if self.finished or not self.sending:
            return
        now = time.monotonic()
        due = int((now - self.t_first) * self.rate / 8 / self.size) + 1 - self.udp_sent
        try:
            for _ in range(min(due, 256)):
                if not self._send_one():
                    break
        except OSError as exc:
            self.fail_running(exc)
            return
        self.timers.append(self.loop.call_at(now + 0.001, self._pace))

    def _rr_send(self) -> None:
        self.t0 = time.perf_counter_ns()
        self.t0_mono = time.monotonic()
        self._send_one()

    def _rr_check(self) -> None:
        if self.finished or not self.sending_rr():
            return
        if time.monotonic() - self.t0_mono > UDP_RR_TIMEOUT:
            self.udp_lost += 1
            try:
                self._rr_send()
            except OSError as exc:
                self.fail_running(exc)
                return
        self.timers.append(self.loop.call_later(UDP_RR_TIMEOUT / 4, self._rr_check))

    def sending_rr(self) -> bool:
        return not self.closing

    @io_handler
    def _on_udp(self, events: int) -> None:
        sock = self.sock
        if sock is None:
            return
        if events & OUT and self.stream and self.sending:
            for _ in range(32):
                if not self._send_one():
                    break
        if events & _IN_ERR:
            view = self.worker.rxview
            for _ in range(64):
                n = sock.recv_into(view)
                self.rx += n
                self.udp_received += 1
                if self.stream or n < 8:
                    continue
                (seq,) = _SEQ.unpack_from(view)
                if seq == self.seq - 1 and not self.closing:
                    self.record_latency(time.perf_counter_ns() - self.t0)
                    self.trans += 1
                    self._rr_send()
                else:
                    self.udp_reord += 1  # a reply we had already given up on

    def end(self) -> None:
        self.sending = False
        self.closing = True
        if self.stream:
            self.loop.modify(self.fd, IN)
        assert self.ctl is not None
        self.ctl.setblocking(True)
        try:
            self.ctl.sendall(hs.encode_reply({"end": True, "sent": self.udp_sent}))
        finally:
            self.ctl.setblocking(False)
        self._inbuf.clear()

    def _on_ctl(self, events: int) -> None:
        assert self.ctl is not None
        data = self.read_ctl(self.ctl, hs.MAX_REPLY + 8)
        if data is None:
            return
        if not data:
            self.peer_closed()
            return
        self._inbuf += data
        try:
            final = hs.take_reply(self._inbuf)
        except hs.HandshakeError as exc:
            self.fail(f"bad end message from {self.where}: {exc}")
            return
        if final is None:
            return
        self.extra["server"] = {
            k: final.get(k, 0) for k in ("received", "lost", "reordered", "bytes")
        }
        if self.stream:
            # Loss is only known at the receiver: take the server's final count.
            self.udp_lost = int(final.get("lost", 0))
            self.udp_reord = int(final.get("reordered", 0))
        self.finish()


CLIENT_TYPES: dict[str, type[ClientFlow]] = {
    "TCP_STREAM": StreamClient,
    "TCP_MAERTS": StreamClient,
    "TCP_BIDIR": StreamClient,
    "TCP_RR": RRClient,
    "TCP_CRR": CRRClient,
    "UDP_STREAM": UDPClient,
    "UDP_RR": UDPClient,
}


def check_congestion_control(spec: FlowSpec) -> None:
    """Fail early (before any connection) on a congestion control this host lacks."""
    if not spec.test.startswith("TCP") or not spec.ca:
        return
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        tcpinfo.set_congestion_control(probe, spec.ca)
    finally:
        probe.close()


__all__ = ["CLIENT_TYPES", "ClientFlow", "check_congestion_control"]
