"""What the drawn (stochastic) RR and CRR flows share: the request's header, the flow's draws, the
transaction log (``<flow_id>.txn.nflow``), and the byte pattern they send.

A drawn request is :data:`HEAD` (its payload's length, then the reply's length it
asks for, 8 bytes each, big-endian) and its payload; the server reads the header,
the payload, and answers with that many bytes. So the server needs neither the seed
nor the distributions, and a reply's size is exactly the one drawn.

Every transaction of a drawn flow becomes one row of the client's transaction log,
an ``.nflow`` file of plain columns (:data:`TXN_COLUMNS`) next to the flow's own
(docs/workloads.md): when it was due, when it started, how long its connect and its
exchange took, its sizes and how it ended (:data:`STATUS`). Its blocks go to the OS
about every :data:`FLUSH_ROWS` rows and at every progress tick (a crash loses little).
"""

from __future__ import annotations

import math
import mmap
import os
import socket
import struct
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from netesto.collectors.tcpinfo import TCP_INFO, TCP_INFO_FIELDS
from netesto.engine.core.loop import IN, OUT
from netesto.engine.kinds.client import ClientFlow
from netesto.engine.kinds.flowend import FlowEnd
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.nflow import Column, FlowWriter
from netesto.workload import Draws, Workload

HEAD = struct.Struct(">QQ")  # a drawn request: payload bytes, reply bytes; the payload follows
MAX_DRAWN = 1 << 30  # the largest payload or reply a header may ask for (the draws stop there too)
CHUNK = 1 << 18  # the most one send of a drawn payload or reply takes from PATTERN
_MAP = mmap.mmap(-1, CHUNK)  # page-aligned, as the stream ends' buffer (see flowend.SEND_CHUNK)
_MAP.write(bytes(range(256)) * (CHUNK // 256))
PATTERN = memoryview(_MAP)
FLUSH_ROWS = 512
STATUS = ("ok", "failed", "unfinished", "refused")  # a row's status: index = code
OK, FAILED, UNFINISHED, REFUSED = range(4)
MAX_ERRORS = 20  # distinct error messages a summary keeps
TXN_COLUMNS = (
    Column("seq", "Q", "1"),  # the transaction's draw (draw i of each quantity)
    Column("t_due", "d", "s"),  # time.time() the request was due: its arrival, or the end of its gap
    Column("t_start", "d", "s"),  # time.time() it began: its connect() (CRR), its first byte out (RR)
    Column("connect", "d", "s"),  # connect() to connected (CRR; 0 for RR)
    Column("fct", "d", "s"),  # the request's first byte to the kernel -> the reply's last byte read (NaN unless ok)
    Column("req", "Q", "bytes"),  # the request's payload, as drawn
    Column("reply", "Q", "bytes"),  # the reply asked for, as drawn
    Column("status", "B", "1"),  # STATUS
    Column("min_rtt", "I", "us"),  # CRR: tcp_info min_rtt of its connection at its end (0: unknown, RR)
)
_MIN_RTT_AT, _MIN_RTT_SIZE = TCP_INFO_FIELDS["min_rtt"]


def draws_of(spec: FlowSpec) -> Draws:
    """The flow's draws (see :mod:`netesto.workload.draws`)."""
    return Workload.of(spec.req_dist, spec.reply_dist, spec.gap, spec.seed, spec.stream).draws(spec.req, spec.reply)


def txn_path(datadir: str, exp: int, flow_id: str) -> Path:
    path = Path(datadir) / str(exp) / "flows" / f"{flow_id}.txn.nflow"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def min_rtt_us(sock: socket.socket) -> int:
    """tcp_info's min_rtt of ``sock`` (0 when it cannot be read)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, _MIN_RTT_AT + _MIN_RTT_SIZE)
    except OSError:
        return 0
    if len(raw) < _MIN_RTT_AT + _MIN_RTT_SIZE:
        return 0
    return int.from_bytes(raw[_MIN_RTT_AT:_MIN_RTT_AT + _MIN_RTT_SIZE], sys.byteorder)


class TxnLog:
    """A client flow end's transaction log: one row per transaction, the counts its summary reports."""

    def __init__(self, end: FlowEnd) -> None:
        spec = end.spec.to_dict()
        spec.pop("token", None)
        meta = {"flow": spec, "side": "client", "kind": "transactions", "start_wall": end.start_wall,
                "start_mono": end.start_mono, "pid": os.getpid()}
        self.writer: FlowWriter | None = FlowWriter(txn_path(end.worker.datadir, end.spec.exp, end.spec.flow_id),
                                                    TXN_COLUMNS, meta, flush_rows=FLUSH_ROWS)
        self.counts = [0, 0, 0, 0]
        self.errors: Counter[str] = Counter()

    def record(self, seq: int, t_due: float, t_start: float, connect: float, fct: float, req: int, reply: int,
               status: int, min_rtt: int = 0, error: str = "") -> None:
        self.counts[status] += 1
        if error and (error in self.errors or len(self.errors) < MAX_ERRORS):
            self.errors[error] += 1
        if self.writer is not None:
            self.writer.append((seq, t_due, t_start, connect, fct if status == OK else math.nan, req, reply,
                                status, min_rtt))

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def summary(self) -> dict[str, Any]:
        """What the flow's summary says of its transactions: started = completed + failed (failed counts
        the unfinished); arrivals = started + refused."""
        ok, failed, unfinished, refused = self.counts
        started = ok + failed + unfinished
        return {"arrivals": started + refused, "started": started, "completed": ok, "failed": failed + unfinished,
                "unfinished": unfinished, "refused": refused, "errors": dict(self.errors)}

    def close(self) -> dict[str, Any]:
        out = self.summary()
        if self.writer is not None:
            self.writer.close(out)
            self.writer = None
        return out


def want_out(end: FlowEnd, fd: int, wanted: bool, asked: bool) -> bool:
    """Poll ``fd`` for EPOLLOUT as well as EPOLLIN when ``wanted`` (a send did not fit), only for IN when not;
    ``asked`` is what is polled for now. Returns what is polled for then."""
    if wanted != asked:
        end.loop.modify(fd, IN | OUT if wanted else IN)
    return wanted


class Requests:
    """A server end's reading of drawn requests: headers and payloads in, the reply bytes owed out."""

    __slots__ = ("head", "left", "reply")

    def __init__(self) -> None:
        self.head = bytearray()
        self.left = -1  # payload bytes still to come; -1: reading a header
        self.reply = 0

    def feed(self, data: memoryview) -> tuple[int, int]:
        """Take ``data``: (requests completed, reply bytes they ask for); ValueError on a bad header."""
        done = owed = 0
        i, n = 0, len(data)
        while i < n:
            if self.left < 0:
                take = min(HEAD.size - len(self.head), n - i)
                self.head += data[i:i + take]
                i += take
                if len(self.head) < HEAD.size:
                    break
                req, reply = HEAD.unpack(self.head)
                self.head.clear()
                if req > MAX_DRAWN or not 0 < reply <= MAX_DRAWN:
                    raise ValueError(f"a request of {req} bytes asking for {reply}")
                self.left, self.reply = req, reply
            if self.left > 0:
                take = min(self.left, n - i)
                i += take
                self.left -= take
            if self.left == 0:
                done += 1
                owed += self.reply
                self.left = -1
        return done, owed


class DrawnClient(ClientFlow):
    """The client end of a drawn flow: its draws, its transaction log, their place in its summary and header."""

    nodelay = True  # a drawn request that spans segments must not wait for Nagle

    def start_log(self) -> None:
        """At the data phase: the draws and the log (its file next to the flow's)."""
        self.draws = draws_of(self.spec)
        self.log: TxnLog | None = TxnLog(self)
        self.extra["rr_loop"] = "python (drawn)"

    def header_extra(self) -> dict[str, Any]:
        spec = self.spec
        return {"workload": {"seed": spec.seed, "stream": spec.stream, "req": spec.req_dist, "reply": spec.reply_dist,
                             "gap": spec.gap, "open_loop": spec.open_loop, "load": spec.load,
                             "link_bps": spec.link_bps, "draws": "netesto.workload.draws"}}

    def _progress(self) -> None:
        super()._progress()
        if getattr(self, "log", None) is not None:
            self.log.flush()  # type: ignore[union-attr]

    def abandon(self) -> None:
        """The flow ends now: log what is still in flight as unfinished (subclasses)."""

    def finish(self, error: str = "") -> None:
        log = getattr(self, "log", None)
        if not self.finished and log is not None:
            try:
                self.abandon()
                self.extra["txn"] = log.close()
            except OSError as exc:  # the log's file: the flow's own still gets its summary
                self.extra["txn_error"] = str(exc)
            self.log = None
        super().finish(error)


__all__ = ["CHUNK", "DrawnClient", "Requests", "want_out", "FAILED", "HEAD", "MAX_DRAWN", "OK", "PATTERN", "REFUSED", "STATUS", "TXN_COLUMNS", "TxnLog",
           "UNFINISHED", "draws_of", "min_rtt_us", "txn_path"]
