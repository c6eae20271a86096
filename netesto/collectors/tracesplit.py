"""A spooled kernel trace, decoded and split: one ``.ntrace`` per flow end, the rest per connection.

The recorder (:mod:`netesto.collectors.tcpprobe`) spools the ring buffer's pages
as they came; here, after the run, each event is decoded with the layout its
``format`` file gave, its connection found from its addresses and ports, and
its kernel timestamp (trace clock ``mono``, CLOCK_MONOTONIC) mapped to the wall
clock the ``.nflow`` rows use. A connection belongs to a flow end when its
addresses are those the end's ``.nflow`` header records (``local``,
``remote``); connections of this host that no flow file names are kept per
connection under ``<exp>/traces/``; those of other hosts sharing the kernel
(network namespaces) are counted and left out.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Mapping

from netesto.collectors.ringbuf import EventFormat, PageLayout, page_events
from netesto.collectors.tcpinfo import records_to_columns
from netesto.errors import RawDataError
from netesto.raw.nflow import read_flow
from netesto.raw.ntrace import SUFFIX, TABLES, write_trace

SPOOL_RECORD = struct.Struct("<HI")  # cpu, page length; the page follows
Conn = tuple[str, int, str, int]  # local address, port, remote address, port
_PROBE = ("common_type", "saddr", "daddr", "sport", "dport", "snd_cwnd", "ssthresh", "srtt", "snd_nxt",
          "snd_una", "snd_wnd", "rcv_wnd", "data_len")
_SOCK = ("common_type", "sport", "dport", "family", "saddr", "daddr", "saddr_v6", "daddr_v6")
TABLE_OF = {"tcp_probe": "probe", "tcp_retransmit_skb": "retransmit", "tcp_cong_state_set": "cong_state"}


def spool_pages(spool: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """``(cpu, page)`` of a spool file as the recorder wrote them (a cut last record is dropped)."""
    while True:
        head = spool.read(SPOOL_RECORD.size)
        if len(head) < SPOOL_RECORD.size:
            return
        cpu, length = SPOOL_RECORD.unpack(head)
        page = spool.read(length)
        if len(page) < length:
            return
        yield cpu, page


def normal_address(text: str) -> str:
    """An address as flow headers and traces both give it: v4-mapped IPv6 as plain IPv4.

    >>> normal_address("::ffff:10.0.0.1"), normal_address("fd00::1")
    ('10.0.0.1', 'fd00::1')
    """
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _sockaddr(raw: bytes) -> str:
    """The address of a ``struct sockaddr_in``/``_in6`` as tcp_probe stores it."""
    family = int.from_bytes(raw[:2], "little")
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[4:8])
    return normal_address(socket.inet_ntop(socket.AF_INET6, raw[8:24]))


def _pair(family: int, v4: bytes, v6: bytes) -> str:
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, v4)
    return normal_address(socket.inet_ntop(socket.AF_INET6, v6))


@dataclass
class ConnEvents:
    """One connection's events as they came: per table, the payloads back to back and their stamps."""

    raw: dict[str, bytearray] = field(default_factory=lambda: {name: bytearray() for name in TABLES})
    ns: dict[str, array] = field(default_factory=lambda: {name: array("Q") for name in TABLES})

    def count(self, table: str) -> int:
        return len(self.ns[table])


@dataclass
class Decoded:
    """Every connection's events, the layouts to read them, and what decoding met."""

    conns: dict[Conn, ConnEvents] = field(default_factory=dict)
    layouts: dict[str, "_Layout"] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=lambda: {name: 0 for name in TABLES})
    missed_in_pages: int = 0  # events the pages' headers say the writer lost (-1 counted as 1)
    pages: int = 0
    other_types: int = 0

    def columns(self, ev: ConnEvents, table: str) -> dict[str, array]:
        """A table's columns (after the times) of one connection, from its payloads in a few strided copies."""
        how = self.layouts.get(table)
        n = ev.count(table)
        out: dict[str, array] = {}
        got = records_to_columns(ev.raw[table], how.size, how.fields) if how is not None and n else {}
        for col in TABLES[table][2:]:
            arr = array(col.typecode)
            data = got.get(col.name)
            if data is None:
                arr.frombytes(bytes(n * arr.itemsize))
            elif how is not None and how.fields[col.name][1] != arr.itemsize:  # data_len: u16 in the kernel
                arr.extend(iter(array({1: "B", 2: "H", 4: "I", 8: "Q"}[how.fields[col.name][1]], data)))
            else:
                arr.frombytes(data)
            out[col.name] = arr
        return out


class _Layout:
    """How one event type's payload reads: its table, size, the bytes that name its connection, its columns."""

    def __init__(self, table: str, fmt: EventFormat) -> None:
        names: tuple[str, ...]
        if table == "probe":
            names = _PROBE
        elif table == "retransmit":  # err: Linux 6.14+
            names = _SOCK + ("state",) + (("err",) if "err" in fmt.fields else ())
        else:
            names = _SOCK + ("cong_state",)
        self.table = table
        self.struct, _ = fmt.struct(names)
        self.size = self.struct.size
        keys = [fmt.fields[n] for n in names if n in ("saddr", "daddr", "sport", "dport", "family", "saddr_v6",
                                                      "daddr_v6")]
        self.key = (min(k[0] for k in keys), max(k[0] + k[1] for k in keys))
        self.fields = {c.name: fmt.fields[c.name][:2] for c in TABLES[table][2:] if c.name in fmt.fields}
        self.names = dict(zip(sorted(names, key=lambda n: fmt.fields[n][0]), range(len(names))))


class Decoder:
    """Decodes spooled pages with the layouts of the events recorded (their ``format`` files).

    Per event it copies the payload to its connection's buffer, found by the
    bytes that hold the addresses and ports; columns come out of the buffers
    in strided copies at the end (:meth:`Decoded.columns`).
    """

    def __init__(self, layout: PageLayout, formats: Mapping[str, EventFormat]) -> None:
        self.layout = layout
        self.by_id = {fmt.id: _Layout(TABLE_OF[name], fmt) for name, fmt in formats.items()}
        self.out = Decoded(layouts={how.table: how for how in self.by_id.values()})
        self._seen: dict[bytes, tuple[bytearray, array]] = {}

    def page(self, page: bytes) -> None:
        pe = page_events(page, self.layout)
        self.out.pages += 1
        if pe.missed:
            self.out.missed_in_pages += max(1, pe.missed)
        by_id, seen, counts = self.by_id, self._seen, self.out.events
        view = memoryview(page)
        for ts, off, _length in pe.events:
            how = by_id.get(page[off] | page[off + 1] << 8)
            if how is None:
                self.out.other_types += 1
                continue
            # the event's type, then its addresses and ports (two types may lay those out alike)
            key = page[off: off + 2] + page[off + how.key[0]: off + how.key[1]]
            target = seen.get(key)
            if target is None:
                target = seen[key] = self._target(how, page, off)
            target[0].extend(view[off: off + how.size])
            target[1].append(ts)
            counts[how.table] += 1

    def _target(self, how: _Layout, page: bytes, off: int) -> tuple[bytearray, array]:
        v = how.struct.unpack_from(page, off)
        f = {name: v[i] for name, i in how.names.items()}
        if how.table == "probe":
            conn = (_sockaddr(f["saddr"]), f["sport"], _sockaddr(f["daddr"]), f["dport"])
        else:
            conn = (_pair(f["family"], f["saddr"], f["saddr_v6"]), f["sport"],
                    _pair(f["family"], f["daddr"], f["daddr_v6"]), f["dport"])
        ev = self.out.conns.get(conn)
        if ev is None:
            ev = self.out.conns[conn] = ConnEvents()
        return ev.raw[how.table], ev.ns[how.table]


@dataclass(frozen=True)
class Clock:
    """CLOCK_MONOTONIC -> wall clock, from (mono, wall) pairs read at the start and the end."""

    pairs: tuple[tuple[float, float], ...]

    def wall(self, mono: float) -> float:
        (m0, w0), (m1, w1) = self.pairs[0], self.pairs[-1]
        if m1 <= m0:
            return mono + (w0 - m0)
        return mono + (w0 - m0) + ((w1 - m1) - (w0 - m0)) * (mono - m0) / (m1 - m0)


def read_clock_pair() -> tuple[float, float]:
    """(monotonic, wall) read together: of three tries, the one read in the least time."""
    best: tuple[float, float, float] | None = None
    for _ in range(3):
        m0 = time.monotonic_ns()
        w = time.time()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[2]:
            best = ((m0 + m1) / 2e9, w, m1 - m0)
    assert best is not None
    return best[0], best[1]


def flow_ends(flows_dir: Path) -> dict[Conn, tuple[str, str]]:
    """The flow ends whose ``.nflow`` headers give their addresses: {connection: (flow id, side)}."""
    out: dict[Conn, tuple[str, str]] = {}
    if not flows_dir.is_dir():
        return out
    for path in sorted(flows_dir.glob("*.nflow")):
        try:
            header = read_flow(path).header
        except RawDataError:
            continue
        local, remote = header.get("local"), header.get("remote")
        if not (isinstance(local, (list, tuple)) and isinstance(remote, (list, tuple))
                and len(local) >= 2 and len(remote) >= 2):
            continue
        flow_id, side = path.name[: -len(".nflow")].rsplit(".", 1)
        out[(normal_address(str(local[0])), int(local[1]), normal_address(str(remote[0])), int(remote[1]))] = (
            flow_id, side)
    return out


def is_local(address: str, cache: dict[str, bool]) -> bool:
    """An address of this host's network namespace (a socket can bind to it)."""
    known = cache.get(address)
    if known is None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.bind((address, 0))
            known = True
        except OSError:
            known = False
        cache[address] = known
    return known


def conn_tables(decoded: Decoded, ev: ConnEvents, clock: Clock) -> dict[str, dict[str, Any]]:
    """A connection's tables in time order, with their times: ``t_mono`` in s, ``t_wall`` on the wall clock.

    Each CPU has a buffer of its own, and a socket's segments are handled on more than one (its softirq
    on one, its backlog where the application runs): the spool holds each CPU's events in order, so a
    connection's are merged by their stamps here."""
    out: dict[str, dict[str, Any]] = {}
    for table in TABLES:
        ns = ev.ns[table]
        cols = decoded.columns(ev, table)
        if any(ns[i] > ns[i + 1] for i in range(len(ns) - 1)):
            order = sorted(range(len(ns)), key=ns.__getitem__)  # stable: a CPU's own order kept on ties
            ns = array("Q", (ns[i] for i in order))
            cols = {name: array(col.typecode, (col[i] for i in order)) for name, col in cols.items()}
        mono = array("d", (t / 1e9 for t in ns))
        out[table] = dict(cols, t_mono=mono, t_wall=array("d", map(clock.wall, mono)))
    return out


def write_split(decoded: Decoded, exp_dir: Path, host: str, clock: Clock, meta: Mapping[str, Any],
                summary: Mapping[str, Any]) -> dict[str, Any]:
    """Write each connection's events: a flow end's as ``flows/<id>.<side>.ntrace``, another local
    connection's as ``traces/<host>-<local>-<remote>.ntrace``. What was written and left out."""
    ends = flow_ends(exp_dir / "flows")
    local: dict[str, bool] = {}
    files: list[str] = []
    foreign = 0
    for conn, ev in sorted(decoded.conns.items()):
        owner = ends.get(conn)
        counts = {t: ev.count(t) for t in TABLES}
        if owner is None and not is_local(conn[0], local):
            foreign += sum(counts.values())
            continue
        if owner is not None:
            path = exp_dir / "flows" / f"{owner[0]}.{owner[1]}{SUFFIX}"
            extra = {"flow_id": owner[0], "side": owner[1]}
        else:
            name = f"{host}-{conn[0]}_{conn[1]}-{conn[2]}_{conn[3]}".replace(":", "_")
            path = exp_dir / "traces" / f"{name}{SUFFIX}"
            extra = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trace(path, conn_tables(decoded, ev, clock), dict(meta, local=[conn[0], conn[1]], remote=[conn[2], conn[3]],
                                                        **extra), dict(summary, events=counts))
        files.append(os.path.relpath(path, exp_dir))
    return {"files": files, "foreign_events": foreign}


__all__ = ["Clock", "ConnEvents", "Decoded", "Decoder", "SPOOL_RECORD", "TABLE_OF", "conn_tables", "flow_ends",
           "is_local", "normal_address", "read_clock_pair", "spool_pages", "write_split"]
