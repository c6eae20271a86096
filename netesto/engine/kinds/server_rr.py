"""The server end of TCP_RR: answer every request; alone in its process, in a blocking (C or Python) loop;
with others, in the process's C loop of RR flow ends (:mod:`~netesto.engine.kinds.rrgroup`) or the epoll loop."""

from __future__ import annotations

import socket
import struct
import time
from array import array
from typing import Any

from netesto.engine.native import fastloop
from netesto.engine.kinds.client_rr import lone_deadline
from netesto.engine.core.loop import ERR, IN, OUT
from netesto.engine.kinds.rrgroup import group_of, take_back
from netesto.engine.kinds.serverflow import ServerFlow

_IN_ERR = IN | ERR
WAKE_EVERY = 0.005  # s: how often a lone C loop holding the sampler's sweep back looks for other work (poll)


class RRServer(ServerFlow):
    """TCP_RR: answer every ``req`` bytes with ``reply`` bytes."""
    hot_sampled = True  # its rows at its idle points (Sampler.hot, the C loops): see the sampler

    def go(self) -> None:
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.req = max(1, self.spec.req)
        self.reply_buf = memoryview(bytes(max(1, self.spec.reply)))
        self.got = 0
        self.pending: bytes | memoryview = b""
        self.view = self.worker.rxview
        self.spinning = False
        self.t0 = 0  # (the client's latency clock; a server has none)
        self.rr_slot = -1  # in the C loop of RR flow ends: when not alone in the process
        self.multi = fastloop.rrloop is not None and self.req <= 65536 and len(self.reply_buf) <= 65536
        self.loop.register(self.fd, IN, self._on_event, turns=True)

    def _on_event(self, events: int) -> None:
        """Requests' bytes (answered once whole), or room for the rest of a reply. Would-block is
        nothing to do, another OSError fails the flow: :func:`~netesto.engine.kinds.flowend.io_handler`
        inlined (one call less a transaction)."""
        conn = self.conn
        try:
            if events & OUT and self.pending:
                n = conn.send(self.pending)
                self.tx += n
                self.pending = self.pending[n:]
                if not self.pending:
                    self.loop.modify(self.fd, IN)
            if not events & _IN_ERR:
                return
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
                return
            self.hot_point()  # its row, if due: its reply is out
            if self.finished:
                return
            if len(self.sw.flows) == 1 and not self.sw.pending and self.req <= 65536 \
                    and len(self.reply_buf) <= 65536:
                self._spin()
            elif self.multi:
                self.extra["rr_loop"] = "C-group"
                group_of(self.loop, fastloop.rrloop).join(self, True, self.req, len(self.reply_buf))
        except BlockingIOError:
            pass
        except OSError as exc:
            self.fail_running(exc)

    def rr_left(self, status: int, errno: int, left: int) -> None:
        """The C loop of RR flow ends handed this flow back (see ``rrgroup.RRGroup.wait``): after a partial
        send the rest of the replies (zeros) waits for EPOLLOUT, as in _on_event."""
        take_back(self, fastloop.rrloop, status, errno, self.client_ended, lambda: self._rest(memoryview(bytes(left))))

    def _rest(self, data: memoryview) -> None:
        self.pending = data
        self.loop.register(self.fd, IN | OUT, self._on_event, turns=True)

    def close_sockets(self) -> None:
        if getattr(self, "rr_slot", -1) >= 0:
            group_of(self.loop, fastloop.rrloop).leave(self)
        super().close_sockets()

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
        if fastloop.ext is not None:
            self._spin_c(self.loop.next_deadline())
            return
        deadline = self.loop.next_deadline()
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
        sampler = self.worker.sampler
        hot: tuple[Any, ...] = ()
        if sampler.hot_on:  # its rows taken in C, no return for them; the sweep held back while it has nothing
            # to do (lone_deadline), with the loop's epoll fd (this socket out of it meanwhile) polled every
            # WAKE_EVERY: a new connection or a message waits no longer than that
            hot = (self, sampler.acc, self.loop.fileno(), WAKE_EVERY)
            deadline = lone_deadline(self)
            self.loop.unregister(fd)
        status = fast.AGAIN
        out: memoryview | None = None
        what: Any = None
        conn.setblocking(True)
        try:
            while True:
                self.extra["rr_returns"] = self.extra.get("rr_returns", 0) + 1
                try:
                    status = rr_server(fd, req, replylen, deadline, st, self.due_at, *hot)
                except Exception as exc:
                    if st[4] != -1:
                        raise
                    st[4] = 0
                    status, code, what = fast.ROW, -1, exc  # its row raised: as Sampler.hot
                else:
                    code, what = int(st[4]), sampler.acc[2]
                if status in (fast.DUE, fast.ROW):  # its reply is out: its row, hot (or what C left), then on
                    self.got, self.rx, self.tx, self.trans = st[0], st[1], st[2], st[3]
                    if status == fast.ROW:
                        st[4] = 0
                        sampler.hot_rest(self, code, what)
                    else:
                        sampler.hot(self)
                    if self.finished or monotonic() >= deadline:
                        break
                    continue
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
            if hot and not self.finished:
                self.loop.register(fd, IN, self._on_event, turns=True)
        self._spin_ended(status == fast.EOF, out)


__all__ = ["RRServer", "WAKE_EVERY"]
