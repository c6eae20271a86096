"""A small reader of tcpdump's classic pcap files (Ethernet, IPv4, TCP): per-connection data bytes on the wire."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Conn:
    """One direction of a TCP connection as the capture saw it."""

    first: float = 0.0  # time of its first and last data segment
    last: float = 0.0
    isn: int | None = None  # the lowest sequence number seen carrying data
    high: int = 0  # highest sequence number + length seen (relative to isn)
    packets: int = 0
    times: list[float] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # each segment's end sequence (relative), in capture order

    @property
    def bytes(self) -> int:
        """Unique payload bytes: retransmissions counted once."""
        return self.high


def read_pcap(path: Path) -> tuple[dict[tuple[str, int, str, int], Conn], float]:
    """(data-carrying connections by (src, sport, dst, dport), timestamp resolution in s)."""
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    if magic == 0xA1B2C3D4:
        endian, scale = "<", 1e-6
    elif magic == 0xA1B23C4D:
        endian, scale = "<", 1e-9
    else:
        raise ValueError(f"{path}: not a little-endian pcap file")
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, not Ethernet")
    conns: dict[tuple[str, int, str, int], Conn] = {}
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack_from(endian + "IIII", data, off)
        pkt = data[off + 16: off + 16 + incl]
        off += 16 + incl
        if len(pkt) < 14 + 20 or pkt[12:14] != b"\x08\x00":
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from("!H", ip, 2)[0]
        if ip[9] != 6 or len(ip) < ihl + 20:
            continue
        src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
        tcp = ip[ihl:]
        sport, dport, seq = struct.unpack_from("!HHI", tcp)
        doff = (tcp[12] >> 4) * 4
        length = total - ihl - doff
        if length <= 0:
            continue
        t = sec + frac * scale
        c = conns.setdefault((src, sport, dst, dport), Conn(first=t))
        if c.isn is None:
            c.isn = seq
        rel = (seq - c.isn) % (1 << 32)
        c.high = max(c.high, rel + length)
        c.last = t
        c.packets += 1
        c.times.append(t)
        c.ends.append(rel + length)
    return conns, scale


__all__ = ["Conn", "read_pcap"]
