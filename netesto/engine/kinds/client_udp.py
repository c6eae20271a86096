"""The client of UDP_STREAM (paced datagrams with sequence numbers) and UDP_RR (echo with timeout)."""

from __future__ import annotations

import errno
import socket
import struct
import time

from netesto.collectors import tcpinfo
from netesto.engine.core import handshake as hs
from netesto.engine.kinds.client import ClientFlow
from netesto.engine.kinds.flowend import io_handler
from netesto.engine.core.loop import ERR, IN, OUT
from netesto.errors import TrafficError

UDP_DEFAULT_SIZE = 1472  # one 1500-byte IPv4 packet
UDP_RR_TIMEOUT = 0.2
_SEQ = struct.Struct("<Q")
_IN_ERR = IN | ERR


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


__all__ = ["UDPClient"]
