"""How long a router really held each packet: tcpdump on its links, matched per packet by content.

A :class:`Captures` runs one tcpdump per router link (both directions,
headers only, nanosecond kernel timestamps). On a testbed link ``r-hI`` a
packet whose source is host I came in, one whose destination is host I went
out; the same packet (same addresses, IP id and total length, and TCP
seq/ack or ICMP id/seq: the TTL and checksums change on the way) seen coming
in on one link and going out on another was held for the difference of the
two stamps. Both stamps come from the same kernel clock on the same machine,
so the difference needs no synchronisation; its resolution is the capture's
(nanoseconds here, though taking a stamp itself costs well under a microsecond).

The independent check of the delay line (its own statistics are the thing
being checked): ``bench.bench_delayline`` and ``tests/testbed`` use it.
"""

from __future__ import annotations

import collections
import os
import signal
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

PCAP_NANO = 0xA1B23C4D
PCAP_MICRO = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
SNAPLEN = 96
Key = tuple[bytes, bytes, int, int, int, int, int]  # src, dst, proto, ip id, ip length, then seq/ack or id/seq


@dataclass(frozen=True)
class Seen:
    """One captured packet: when (ns, CLOCK_REALTIME), on which link, its addresses and its key."""

    t_ns: int
    dev: str
    src: str
    dst: str
    proto: int
    key: Key


@dataclass(frozen=True)
class Hold:
    """One packet matched across the router: in on one link, out on another."""

    src: str
    dst: str
    proto: int
    held_ns: int
    t_in_ns: int


def read_pcap(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """(timestamp in ns, frame) of every record of a classic pcap file (micro- or nanosecond)."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        return
    magic_le = struct.unpack_from("<I", data)[0]
    endian = "<" if magic_le in (PCAP_NANO, PCAP_MICRO) else ">"
    magic, _maj, _min, _tz, _sig, _snap, linktype = struct.unpack_from(endian + "IHHiIII", data)
    if magic not in (PCAP_NANO, PCAP_MICRO):
        raise ValueError(f"{path}: not a pcap file (magic {magic:#x})")
    if linktype != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, expected Ethernet")
    scale = 1 if magic == PCAP_NANO else 1000
    rec = struct.Struct(endian + "IIII")
    off = 24
    while off + rec.size <= len(data):
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += rec.size
        yield sec * 1_000_000_000 + frac * scale, data[off : off + incl]
        off += incl


def packet_key(frame: bytes) -> tuple[str, str, int, Key] | None:
    """(src, dst, protocol, key) of an IPv4 TCP or ICMP frame, None for anything else."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    length, ident = struct.unpack_from("!HH", ip, 2)
    proto = ip[9]
    src, dst = ip[12:16], ip[16:20]
    l4 = ip[ihl:]
    if proto == 6 and len(l4) >= 12:
        a, b = struct.unpack_from("!II", l4, 4)
    elif proto == 1 and len(l4) >= 8:
        a, b = struct.unpack_from("!HH", l4, 4)
        a |= l4[0] << 16  # the ICMP type: a request and its reply share id and seq
    else:
        return None
    return ".".join(map(str, src)), ".".join(map(str, dst)), proto, (src, dst, proto, ident, length, a, b)


def parse_capture(path: str | os.PathLike[str], dev: str) -> list[Seen]:
    out = []
    for t_ns, frame in read_pcap(path):
        parsed = packet_key(frame)
        if parsed is not None:
            out.append(Seen(t_ns, dev, *parsed))
    return out


def match_holds(seen: Iterable[Seen], link_hosts: dict[str, str]) -> tuple[list[Hold], int]:
    """Every packet seen coming in (source = the link's host) matched with the same packet going out
    (destination = its link's host), oldest first per key; also how many came in and never went out."""
    arrivals: dict[Key, collections.deque[Seen]] = {}
    departures: list[Seen] = []
    for s in sorted(seen, key=lambda s: s.t_ns):
        host = link_hosts.get(s.dev)
        if s.src == host:
            arrivals.setdefault(s.key, collections.deque()).append(s)
        elif s.dst == host:
            departures.append(s)
    holds = []
    for d in departures:
        waiting = arrivals.get(d.key)
        if waiting and waiting[0].t_ns <= d.t_ns and waiting[0].dev != d.dev:
            a = waiting.popleft()
            holds.append(Hold(a.src, a.dst, a.proto, d.t_ns - a.t_ns, a.t_ns))
    unmatched = sum(len(v) for v in arrivals.values())
    return holds, unmatched


class Captures:
    """tcpdump on router links (``dev -> host address``) in namespace ``ns``, written to ``dir``."""

    def __init__(self, ns: str, link_hosts: dict[str, str], dir: Path) -> None:
        self.ns = ns
        self.link_hosts = dict(link_hosts)
        self.dir = Path(dir)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stderr: dict[str, str] = {}

    def __enter__(self) -> "Captures":
        try:
            for dev in self.link_hosts:
                err = open(self.dir / f"{dev}.err", "wb")
                self.procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", self.ns, "tcpdump", "-i", dev, "-n", "-U", "--immediate-mode", "-B", "16384", "-s", str(SNAPLEN),
                     "--time-stamp-precision=nano", "-w", str(self.dir / f"{dev}.pcap"), "ip and (tcp or icmp)"],
                    stdout=subprocess.DEVNULL, stderr=err, start_new_session=True))
                err.close()
            deadline = time.monotonic() + 10
            while not all(b"listening on" in (self.dir / f"{d}.err").read_bytes() for d in self.link_hosts):
                if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                    raise RuntimeError(f"tcpdump did not start: {self._errors()}")
                time.sleep(0.02)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _errors(self) -> str:
        return "; ".join((self.dir / f"{d}.err").read_text(errors="replace").strip() for d in self.link_hosts)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()

    def dropped(self) -> int:
        """Packets the capture missed: those tcpdump says the kernel dropped (its buffer overflowed) and
        those its filter took but it never wrote."""
        total = 0
        for d in self.link_hosts:
            counts = {}
            for line in (self.dir / f"{d}.err").read_text(errors="replace").splitlines():
                words = line.split()
                if len(words) >= 3 and words[0].isdigit():
                    counts[" ".join(words[1:])] = int(words[0])
            total += counts.get("packets dropped by kernel", 0)
            total += max(0, counts.get("packets received by filter", 0) - counts.get("packets captured", 0))
        return total

    def holds(self) -> tuple[list[Hold], int]:
        seen: list[Seen] = []
        for dev in self.link_hosts:
            seen += parse_capture(self.dir / f"{dev}.pcap", dev)
        return match_holds(seen, self.link_hosts)
