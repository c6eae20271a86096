"""Every matching TCP socket of a host, sampled at an interval from outside its process: ``.nflow`` files.

``python -m netesto.collectors.sockwatch --spec FILE`` (the agent starts it)
takes one sock_diag dump per tick (:mod:`netesto.collectors.sockdiag`: the
kernel filters by port, address and cgroup; an owning process is matched by
its sockets' inodes) and appends one row per socket to a file of its own,
``<exp>/sockets/<host>-<watch>-<n>.nflow``, in the engine's columns: the
socket's ``tcp_info`` and bbr info as the kernel filled them, and the
application's bytes, which the kernel's counters give exactly (written =
``bytes_acked`` + the write queue, read = ``bytes_received`` - the receive
queue). A socket's file ends when it leaves the dump (closed, or in
TIME_WAIT). On SIGTERM the watcher closes the rest and hands the files to
:mod:`netesto.collectors.sockfiles`, which makes flow ends of them.
"""

from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from netesto.collectors.sockdiag import DiagSocket, SockDiag
from netesto.collectors.sockowner import descendants, process_inodes
from netesto.collectors.procmain import collector_main
from netesto.collectors.sockfiles import finish
from netesto.collectors.tcpinfo import CC_INFO_FIELDS, TCP_INFO_FIELDS, TCP_INFO_LEN
from netesto.collectors.watchspec import WatchSpec
from netesto.errors import TrafficError
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter, RecordLayout

# CLOSE_WAIT, LAST_ACK, CLOSING, and CLOSE (a socket destroyed after the peer's FIN, or reset: the rows
# never go back, so a reset socket's last row keeps the count before it): the peer's FIN counted
FIN_RECEIVED_STATES = frozenset((7, 8, 9, 11))
FIN_QUEUED_STATES = frozenset((4, 7, 9, 11))  # FIN_WAIT1, CLOSE, LAST_ACK, CLOSING: this end's FIN may be unsent
_HEAD = struct.Struct("=ddQQ")  # t_wall, t_mono, app_bytes_tx, app_bytes_rx
_INFO_AT, _CC_AT, RECORD_LEN = 32, 32 + TCP_INFO_LEN, 32 + TCP_INFO_LEN + 24
LAYOUT = RecordLayout(RECORD_LEN, (("t_wall", 0), ("t_mono", 8), ("app_bytes_tx", 16), ("app_bytes_rx", 24))
                      + tuple((n, _INFO_AT + off) for n, (off, _) in TCP_INFO_FIELDS.items())
                      + tuple((n, _CC_AT + off) for n, (off, _) in CC_INFO_FIELDS.items()))
_BYTES_SENT, _BYTES_RETRANS = TCP_INFO_FIELDS["bytes_sent"][0], TCP_INFO_FIELDS["bytes_retrans"][0]
_BYTES_RECEIVED = TCP_INFO_FIELDS["bytes_received"][0]
_NOTSENT = 144  # tcpi_notsent_bytes (not a column)
INET_DIAG_BBRINFO = 16
GONE_TICKS = 3  # a socket missing from this many dumps in a row is closed without its last counters


def app_bytes(sock: DiagSocket) -> tuple[int, int]:
    """(written, read) by the application, from the kernel's counters: data bytes sent the first time
    (``bytes_sent`` - ``bytes_retrans``) plus those not sent yet (``notsent_bytes``); ``bytes_received``
    less what waits unread, and less the peer's FIN, which takes a sequence number (``bytes_acked``
    would count the connecting end's SYN and its own FIN too)."""
    info = sock.info
    if len(info) < _BYTES_RETRANS + 8:
        return 0, 0
    sent, retrans, received = (int.from_bytes(info[o:o + 8], "little")
                               for o in (_BYTES_SENT, _BYTES_RETRANS, _BYTES_RECEIVED))
    notsent = int.from_bytes(info[_NOTSENT:_NOTSENT + 4], "little")
    if notsent and sock.state in FIN_QUEUED_STATES:  # the FIN waits behind the data, counted in write_seq
        notsent -= 1
    fin = 1 if sock.state in FIN_RECEIVED_STATES and received else 0
    return max(0, sent - retrans + notsent), max(0, received - sock.rqueue - fin)


class Series:
    """One socket's rows: records buffered and written as a block about every 0.5 s."""

    def __init__(self, path: Path, sock: DiagSocket, spec: WatchSpec, side: str, t_wall: float,
                 t_mono: float) -> None:
        self.path = path
        self.sock = sock
        self.side = side
        self.rows = 0
        self.missing = 0  # ticks since the socket was last in a dump
        self.first = (t_wall, t_mono)
        self.last = (t_wall, t_mono)
        self.last_bytes = (0, 0)
        self.buf = bytearray()
        self.per_block = max(1, round(0.5 / spec.interval))
        meta = {"side": side, "host": spec.host, "engine": "sock_diag", "interval": spec.interval, "ca": sock.ca,
                "local": list(sock.local), "remote": list(sock.remote), "start_wall": t_wall, "start_mono": t_mono,
                "sampled": {"by": "sock_diag", "watch": spec.name, "cookie": sock.cookie, "inode": sock.inode,
                            "uid": sock.uid, "family": sock.family}}
        self.writer = FlowWriter(path, FLOW_COLUMNS, meta, record=LAYOUT)

    def add(self, sock: DiagSocket, t_wall: float, t_mono: float) -> None:
        tx, rx = app_bytes(sock)
        tx, rx = max(tx, self.last_bytes[0]), max(rx, self.last_bytes[1])  # cumulative: never back
        row = _HEAD.pack(t_wall, t_mono, tx, rx) + sock.info[:TCP_INFO_LEN].ljust(TCP_INFO_LEN, b"\0")
        row += (sock.cc_info if sock.cc_kind == INET_DIAG_BBRINFO else b"")[:24].ljust(24, b"\0")
        self.buf += row
        self.rows += 1
        self.sock = sock
        self.last = (t_wall, t_mono)
        self.last_bytes = (tx, rx)
        if len(self.buf) >= self.per_block * RECORD_LEN:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.writer.write_records(len(self.buf) // RECORD_LEN, bytes(self.buf))
            self.buf.clear()

    def close(self, why: str) -> dict[str, Any]:
        self.flush()
        duration = max(1e-9, self.last[0] - self.first[0])
        tx, rx = self.last_bytes
        summary = {"status": "ok", "side": self.side, "ended": why, "samples": self.rows,
                   "start_wall": self.first[0], "end_wall": self.last[0], "duration": duration,
                   "bytes_tx": tx, "bytes_rx": rx, "rate_tx_bps": tx * 8 / duration, "rate_rx_bps": rx * 8 / duration,
                   "local": list(self.sock.local), "remote": list(self.sock.remote)}
        self.writer.close(summary)
        return summary


@dataclass
class Watcher:
    """The tick loop's state: the live series, the files closed, the cost so far."""

    spec: WatchSpec
    live: dict[tuple[Any, ...], Series] = field(default_factory=dict)
    closed: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    dumps: int = 0
    samples: int = 0
    cpu_ns: int = 0
    late: int = 0
    _n: int = 0
    _inodes_ok: set[int] = field(default_factory=set)
    _inodes_no: set[int] = field(default_factory=set)
    _ended: set[tuple[Any, ...]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.diag = SockDiag(self.spec.socket_filter())
        try:  # the last counters of each socket, as it is destroyed (root: CAP_NET_ADMIN)
            self.diag.watch_destroyed()
            self.last_rows = True
        except TrafficError:
            self.last_rows = False
        self._servers = set(self.spec.ports) | set(self.spec.local_ports)
        self.dir = Path(self.spec.datadir) / self.spec.exp / "sockets"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _owned(self, sock: DiagSocket) -> bool:
        """The socket belongs to the watched process tree (looked up again only for a new inode)."""
        if not self.spec.pid:
            return True
        if sock.inode in self._inodes_ok:
            return True
        if sock.inode in self._inodes_no:
            return False
        owned = process_inodes(descendants(self.spec.pid))
        self._inodes_ok |= owned
        if sock.inode not in owned:
            self._inodes_no.add(sock.inode)
        return sock.inode in owned

    def _side(self, sock: DiagSocket) -> str:
        """"server" for the end that accepted: its local port is a watched one and the remote is not,
        else the one with the lower port (services listen low, connections leave from ephemeral ports)."""
        local, remote = sock.local[1], sock.remote[1]
        if (local in self._servers) != (remote in self._servers):
            return "server" if local in self._servers else "client"
        return "server" if local < remote else "client"

    def tick(self) -> None:
        c0 = time.thread_time_ns()
        t_wall, t_mono = time.time(), time.monotonic()
        for sock in self.diag.destroyed():
            series = self.live.get(sock.key)
            if series is not None and sock.info:
                series.add(sock, t_wall, t_mono)
                self._close(sock.key, "destroyed")
        seen = set()
        for sock in self.diag.dump():
            # TIME_WAIT sockets come with their FIN_WAIT2 substate's bit, and without a tcp_info
            if not sock.info or sock.key in self._ended or not self._owned(sock):
                continue
            key = sock.key
            seen.add(key)
            series = self.live.get(key)
            if series is None:
                side = self._side(sock)
                self._n += 1
                path = self.dir / f"{self.spec.host}-{self.spec.name}-{self._n}.nflow"
                series = self.live[key] = Series(path, sock, self.spec, side, t_wall, t_mono)
            series.add(sock, t_wall, t_mono)
        for key, series in list(self.live.items()):
            if key not in seen:
                # Gone from the dump: its destruction's broadcast (the last counters) may still come.
                series.missing += 1
                if series.missing > GONE_TICKS:
                    self._close(key, "closed")
        self.dumps += 1
        self.samples += len(seen)
        self.cpu_ns += time.thread_time_ns() - c0

    def _close(self, key: tuple[Any, ...], why: str) -> None:
        series = self.live.pop(key)
        self._ended.add(key)
        self.closed.append((series.path, series.close(why)))

    def run(self, stopping: Any) -> None:
        """Tick on the interval's grid until ``stopping()`` (a late tick skips the points it missed)."""
        interval = self.spec.interval
        due = time.monotonic()
        while not stopping():
            self.tick()
            due += interval
            now = time.monotonic()
            if now > due:
                self.late += int((now - due) // interval)
                due += (int((now - due) // interval) + 1) * interval
            time.sleep(max(0.0, due - time.monotonic()))

    def close(self) -> None:
        for key in list(self.live):
            self._close(key, "watch stopped")
        self.diag.close()

    def cost(self) -> dict[str, Any]:
        return {"dumps": self.dumps, "socket_samples": self.samples, "last_rows_on_destroy": self.last_rows, "cpu_seconds": self.cpu_ns / 1e9,
                "us_per_socket_sample": self.cpu_ns / 1e3 / self.samples if self.samples else None,
                "us_per_dump": self.cpu_ns / 1e3 / self.dumps if self.dumps else None, "late_ticks": self.late}


def watch(text: str, ready: Callable[[], None], stopping: Callable[[], bool]) -> dict[str, Any]:
    """A watch from its spec's JSON until ``stopping()``, its flow ends made; the watch's summary."""
    spec = WatchSpec.from_json(text)
    watcher = Watcher(spec)
    watcher.tick()  # a refused filter fails here, before "ready"
    ready()
    try:
        watcher.run(stopping)
    finally:
        watcher.close()
    return finish(spec, watcher.closed, watcher.cost())


def main(argv: Sequence[str] | None = None) -> int:
    return collector_main(argv, "netesto.collectors.sockwatch", "sample the TCP sockets a filter matches until "
                          "SIGTERM", watch)


__all__ = ["LAYOUT", "Series", "Watcher", "app_bytes", "main", "watch"]

if __name__ == "__main__":
    sys.exit(main())
