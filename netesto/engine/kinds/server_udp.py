"""The server end of UDP_STREAM (count, loss and reordering by sequence number) and UDP_RR (echo)."""

from __future__ import annotations

import errno
import socket
import struct
from typing import Any

from netesto.collectors import tcpinfo
from netesto.engine.core import handshake as hs
from netesto.engine.core.loop import IN
from netesto.engine.kinds.serverflow import ServerFlow

_SEQ = struct.Struct("<Q")


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


__all__ = ["UDPServer"]
