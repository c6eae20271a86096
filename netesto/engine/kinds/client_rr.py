"""The client of TCP_RR: request, reply, repeat; alone in its worker, in a blocking (C or Python) loop;
with others, in the worker's C loop of RR flow ends (:mod:`~netesto.engine.kinds.rrgroup`) or the epoll loop."""

from __future__ import annotations

import socket
import struct
import time
from array import array
from typing import Any

from netesto.engine.native import fastloop
from netesto.engine.kinds.client import ClientFlow
from netesto.engine.sampling.flowrecord import LAT_FOLD
from netesto.engine.core.loop import ERR, IN, OUT
from netesto.engine.kinds.rrgroup import group_of, take_back

_IN_ERR = IN | ERR
_perf_ns = time.perf_counter_ns
# How long a lone RR loop may hold the sampler's sweep back when the sweep has nothing to do for its one flow
# end but re-arm (its rows are taken in the C loop): a return to Python per interval less, and for a server
# no transaction held at it; the loop still comes back at least this often (a server's new connections).
SWEEP_HOLD = 0.1


def lone_deadline(flow: Any) -> float:
    """The deadline of a lone RR C loop (``flow`` its flow end, alone in its worker): the loop's next timer,
    past the sampler's sweep (up to SWEEP_HOLD) when that sweep is next and would only re-arm
    (Sampler.idle_sweep: ``flow``'s rows are taken in the C loop)."""
    loop = flow.loop
    deadline = loop.next_deadline()
    sweep = flow.worker.sampler.idle_sweep(flow)
    if sweep is None or deadline != sweep:
        return deadline
    return min(loop.second_deadline(), sweep + SWEEP_HOLD)


class RRClient(ClientFlow):
    """TCP_RR: one request of ``req`` bytes, one reply of ``reply`` bytes, repeat."""

    nodelay = True
    hot_sampled = True  # its rows at its idle points (Sampler.hot, the C loops): see the sampler

    def run(self) -> None:
        self.sock, self.ctl = self.ctl, None
        assert self.sock is not None
        self.fd = self.sock.fileno()
        self.request = memoryview(bytes(max(1, self.spec.req)))
        self.reqlen = len(self.request)
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
        # With other flows: in the worker's C loop of RR flow ends when there is one, else on the epoll loop.
        self.rr_slot = -1
        self.multi = not self.solo and fastloop.rrloop is not None and self.spec.req <= 65536
        self.extra["rr_loop"] = "C-group" if self.multi else "epoll" if not self.solo else "python"
        self.loop.register(self.fd, IN, self._on_event, turns=True)
        self.t0 = time.perf_counter_ns()
        if self._send(self.request) and self.multi:
            self._join()

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

    def _on_event(self, events: int) -> None:
        """A reply's bytes, or room for the rest of a request; the next request goes out as soon as
        a reply is in. Would-block is nothing to do, another OSError fails the flow: what
        :func:`~netesto.engine.kinds.flowend.io_handler` does, inlined (one call less a transaction,
        and the send too: with many flows on one loop the Python per transaction is the cost)."""
        sock = self.sock
        if sock is None:
            return
        try:
            if events & OUT and self.pending:
                data, self.pending = self.pending, self.request[:0]
                self.loop.modify(self.fd, IN)
                self._send(data)
            if not events & _IN_ERR:
                return
            got = self.got
            want = self.reply_size - got
            n = sock.recv_into(self.view, want if 0 < want < self.viewlen else self.viewlen)
            if n == 0:
                self.peer_closed()
                return
            self.rx += n
            got += n
            if got < self.reply_size or self.closing:
                self.got = got
                return
            now = _perf_ns()
            lat = self.lat_raw
            # the count, then the latency, with no call between them: CPython runs a signal's handler (the
            # stop's exception) after a call, never between these two, so the two counts stay equal
            self.trans += 1
            lat.append(now - self.t0)
            if len(lat) >= LAT_FOLD:
                self.fold_latency()
            self.got = got - self.reply_size
            if self.ending:
                sock.shutdown(socket.SHUT_WR)
                self.closing = True
                return
            self.t0 = now
            request = self.request
            try:
                n = sock.send(request)
            except BlockingIOError:
                n = 0
            self.tx += n
            if n < self.reqlen:  # the rest waits for EPOLLOUT
                self.pending = request[n:]
                self.loop.modify(self.fd, IN | OUT)
            elif self.solo:
                self._spin()
            elif self.multi:
                self._join()
        except BlockingIOError:
            pass
        except OSError as exc:
            self.fail_running(exc)

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
        # Its transactions are counted by their latencies' appends (one C call: the stop's exception, raised
        # between two bytecodes, cannot split it), so a flow stopped mid-loop has as many latencies as
        # transactions; the buffer is folded outside the loop, never in it.
        trans0, lat0 = trans, len(lat)
        last = eof = idle = False
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
                # every 4: at ~15k/s across CPUs 16 let a 1 ms tick slip ~1 ms; a full buffer is folded at
                # the same return as a due timer's (_idle: the next request after it)
                if trans & 3 == 0 and (monotonic() >= deadline or len(lat) >= LAT_FOLD):
                    idle = True
                    break
                t0 = now
                n = send(request)
                if n != reqlen:  # a small send buffer: the rest blocks until it fits
                    sock.sendall(request[n:])
                tx += reqlen
        except BlockingIOError:
            pass  # no reply within SO_RCVTIMEO: the loop waits for it
        finally:
            self.got, self.rx, self.tx, self.t0 = got, rx, tx, t0
            self.trans = trans0 + len(lat) - lat0
        sock.setblocking(False)
        if len(lat) >= LAT_FOLD:
            self.fold_latency()
        if eof:
            self.peer_closed()
        elif last:
            sock.shutdown(socket.SHUT_WR)  # the last reply is in
            self.closing = True
        elif idle:
            self._idle()

    def _idle(self) -> None:
        """A timer is due and a reply is in: the next request goes out after the loop's due timers
        (:meth:`_resume`), so no transaction in flight waits for them (the sampler's tick is not in
        the latencies, as a blocking client's own bookkeeping between transactions is not)."""
        self.loop.call_at(time.monotonic(), self._resume)  # after the due timers: theirs are earlier

    def _resume(self) -> None:
        """The request :meth:`_idle` held back, then the blocking loop again (or the half-close, once ending)."""
        sock = self.sock
        if sock is None or self.finished:
            return
        try:
            if self.ending:
                sock.shutdown(socket.SHUT_WR)  # the last reply is in
                self.closing = True
                return
            self.hot_point()  # its row, if due: the reply is in, nothing in flight
            self.t0 = _perf_ns()
            if self._send(self.request):
                self._spin()
        except OSError as exc:
            self.fail_running(exc)

    def _spin_c(self) -> None:
        """:meth:`_spin` with the transactions in C (``fastloop``): same syscalls, same counters.

        The C loop returns at the same points as the Python one (timer due with
        a reply in and the next request held back: ``rr_client``'s IDLE; no reply
        within 1 ms; EOF) and also when its latency buffer is full or a request
        went out partly (sent here, as the Python loop does). Its state array is
        written back even when it raises (an error, or the SIGTERM handler's
        exception), so the counters stay exact.
        """
        sock, fast = self.sock, fastloop.ext
        assert sock is not None and fast is not None
        self.extra["rr_loop"] = "C"
        sampler = self.worker.sampler
        hot = (self, sampler.acc) if sampler.hot_on else ()  # its rows taken in C, no return for them
        deadline = lone_deadline(self) if hot else self.loop.next_deadline()
        latbuf, latview, lat = self.latbuf, self.latview, self.lat_raw
        st = array("q", (self.got, self.rx, self.tx, self.trans, self.t0, 0, 0))
        fd, request, reply_size = self.fd, self.request, self.reply_size
        reqlen = len(request)
        rr_client, monotonic = fast.rr_client, time.monotonic
        status = fast.AGAIN
        sock.setblocking(True)  # SO_RCVTIMEO bounds each recv
        try:
            while True:
                self.extra["rr_returns"] = self.extra.get("rr_returns", 0) + 1
                try:
                    status = rr_client(fd, reqlen, reply_size, deadline, st, latbuf, True, self.due_at, *hot)
                except Exception as exc:
                    if st[6] != -1:
                        raise
                    status = self._row_failed(exc, st)  # its row raised (nothing in flight): as Sampler.hot
                finally:
                    if st[5]:
                        lat.frombytes(latview[:st[5] * 8])
                        st[5] = 0
                if len(lat) >= LAT_FOLD:
                    self.fold_latency()
                if status == fast.PARTIAL:
                    sock.sendall(request[st[6]:])
                    st[2] += reqlen
                elif status in (fast.DUE, fast.ROW):  # its row (hot, nothing in flight), then the next request
                    self.got, self.rx, self.tx, self.trans = st[0], st[1], st[2], st[3]
                    if status == fast.ROW:  # what the row taken in C left to Python
                        sampler.hot_rest(self, int(st[6]), sampler.acc[2])
                    elif st[6] != -1:
                        sampler.hot(self)
                    if self.finished or self.ending:
                        status = fast.IDLE  # the half-close (or nothing) after the loop's turn (_resume)
                        break
                    st[4] = _perf_ns()
                    sock.sendall(request)
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
        elif status == fast.IDLE:
            self._idle()

    def _row_failed(self, exc: Exception, st: array) -> int:
        """rr_client's row raised ``exc``: the sampler's failure of this flow end's sampling; the loop goes on
        as after a row (DUE: the next request is not out)."""
        self.got, self.rx, self.tx, self.trans = st[0], st[1], st[2], st[3]
        self.worker.sampler.hot_rest(self, -1, exc)
        assert fastloop.ext is not None
        return fastloop.ext.DUE

    def _join(self) -> None:
        """Over to the worker's C loop of RR flow ends (a whole request is out)."""
        group_of(self.loop, fastloop.rrloop).join(self, False, self.reqlen, self.reply_size)

    def _leave(self) -> None:
        """Back from the C loop of RR flow ends to this loop's handler (when in it)."""
        if self.rr_slot >= 0:
            group_of(self.loop, fastloop.rrloop).leave(self)
            self.loop.register(self.fd, IN, self._on_event, turns=True)

    def rr_left(self, status: int, errno: int, left: int) -> None:
        """The C loop of RR flow ends handed this flow back (see ``rrgroup.RRGroup.wait``)."""
        take_back(self, fastloop.rrloop, status, errno, self.peer_closed, lambda: self._rest(left))

    def _rest(self, left: int) -> None:
        """The last ``left`` bytes of the request wait for EPOLLOUT, as in _on_event."""
        self.pending = self.request[self.reqlen - left:]
        self.loop.register(self.fd, IN | OUT, self._on_event, turns=True)

    def close_sockets(self) -> None:
        if getattr(self, "rr_slot", -1) >= 0:
            group_of(self.loop, fastloop.rrloop).leave(self)
        super().close_sockets()

    def end(self) -> None:
        self.ending = True  # half-close once the outstanding reply is in
        self._leave()  # which the handler sees


__all__ = ["RRClient", "SWEEP_HOLD", "lone_deadline"]
