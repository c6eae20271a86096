"""struct tcp_info / TCP_CC_INFO: read from an owned socket, decode, set congestion control.

Reading is one ``getsockopt(IPPROTO_TCP, TCP_INFO)`` (~1.2 us) per sample.
The sampler keeps the raw records (:data:`TCP_INFO_LEN` bytes each, shorter
ones from older kernels zero-filled) and turns a block of them into columns
with strided byte slicing (:func:`records_to_columns`), so per-sample work in
Python stays tiny. Field offsets follow ``struct tcp_info`` in linux/tcp.h;
values are in the host's byte order, like the ``.nflow`` columns.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from array import array
from pathlib import Path

from netesto.errors import CongestionControlError, TrafficError

TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
TCP_CC_INFO = 26
SO_MAX_PACING_RATE = 47
PACED_BACKLOG = 0.02  # s of data at the paced rate a paced socket may hold unsent (set_pacing)
PACED_BACKLOG_MIN = 16384  # bytes: the floor of the cap (slow flows: a few segments)
TCP_INFO_LEN = 280  # the size of struct tcp_info on kernel 6.18
CC_INFO_LEN = 20  # struct tcp_bbr_info: bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain (u32)
AVAILABLE_PATH = "/proc/sys/net/ipv4/tcp_available_congestion_control"
ALLOWED_PATH = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

# column name -> (offset, size) in struct tcp_info.
TCP_INFO_FIELDS: dict[str, tuple[int, int]] = {
    "state": (0, 1),
    "ca_state": (1, 1),
    "retransmits": (2, 1),
    "rto": (8, 4),
    "snd_mss": (16, 4),
    "unacked": (24, 4),
    "sacked": (28, 4),
    "lost": (32, 4),
    "retrans": (36, 4),
    "pmtu": (60, 4),
    "rtt": (68, 4),
    "rttvar": (72, 4),
    "snd_ssthresh": (76, 4),
    "snd_cwnd": (80, 4),
    "reordering": (88, 4),
    "total_retrans": (100, 4),
    "pacing_rate": (104, 8),
    "bytes_acked": (120, 8),
    "bytes_received": (128, 8),
    "segs_out": (136, 4),
    "segs_in": (140, 4),
    "min_rtt": (148, 4),
    "data_segs_in": (152, 4),
    "data_segs_out": (156, 4),
    "delivery_rate": (160, 8),
    "busy_time": (168, 8),
    "rwnd_limited": (176, 8),
    "sndbuf_limited": (184, 8),
    "bytes_sent": (200, 8),
    "bytes_retrans": (208, 8),
}

# column name -> (offset, size) in struct tcp_bbr_info (bw_lo/bw_hi read as one u64).
CC_INFO_FIELDS: dict[str, tuple[int, int]] = {
    "bbr_bw": (0, 8),
    "bbr_min_rtt": (8, 4),
    "bbr_pacing_gain": (12, 4),
    "bbr_cwnd_gain": (16, 4),
}

_TYPECODE = {1: "B", 4: "I", 8: "Q"}
_ORDER = "<" if sys.byteorder == "little" else ">"
_FMT = {1: "B", 4: "I", 8: "Q"}
ZERO_INFO = bytes(TCP_INFO_LEN)
ZERO_CC = bytes(CC_INFO_LEN)


def read_tcp_info(sock: socket.socket) -> bytes:
    """The raw ``struct tcp_info`` of ``sock``, zero-filled to :data:`TCP_INFO_LEN`."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_LEN)
    if len(raw) < TCP_INFO_LEN:
        raw += bytes(TCP_INFO_LEN - len(raw))
    return raw


def read_bbr_info(sock: socket.socket) -> bytes:
    """The raw ``struct tcp_bbr_info`` (zeros if the kernel gives less)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, CC_INFO_LEN)
    if len(raw) < CC_INFO_LEN:
        raw += bytes(CC_INFO_LEN - len(raw))
    return raw


def decode_record(raw: bytes, fields: dict[str, tuple[int, int]] = TCP_INFO_FIELDS) -> dict[str, int]:
    """One raw record as ``{column: value}`` (zero-fills a short record).

    >>> decode_record(bytes([1, 0, 0, 0]) + bytes(276))["state"]
    1
    """
    need = max(off + size for off, size in fields.values())
    if len(raw) < need:
        raw = bytes(raw) + bytes(need - len(raw))
    return {
        name: struct.unpack_from(_ORDER + _FMT[size], raw, off)[0]
        for name, (off, size) in fields.items()
    }


def records_to_columns(
    raw: bytes | bytearray, record_len: int, fields: dict[str, tuple[int, int]]
) -> dict[str, bytes]:
    """Columns (packed arrays, host byte order) from ``n`` concatenated records.

    Each field's bytes are gathered with strided slices, so the cost is a few
    C-level copies per column, not Python work per sample.

    >>> recs = bytes([7, 1]) + bytes([9, 2])
    >>> records_to_columns(recs, 2, {"a": (0, 1), "b": (1, 1)})
    {'a': b'\\x07\\t', 'b': b'\\x01\\x02'}
    """
    n = len(raw) // record_len
    out: dict[str, bytes] = {}
    for name, (off, size) in fields.items():
        if size == 1:
            out[name] = bytes(raw[off::record_len])
            continue
        buf = bytearray(size * n)
        for k in range(size):
            buf[k::size] = raw[off + k :: record_len]
        out[name] = bytes(buf)
    return out


def column_arrays(raw: bytes | bytearray, record_len: int, fields: dict[str, tuple[int, int]]) -> dict[str, array]:
    """Like :func:`records_to_columns` but as :class:`array.array` values."""
    out = {}
    for name, data in records_to_columns(raw, record_len, fields).items():
        arr = array(_TYPECODE[fields[name][1]])
        arr.frombytes(data)
        out[name] = arr
    return out


def available_congestion_controls() -> list[str]:
    """What this kernel offers (``tcp_available_congestion_control``)."""
    try:
        with open(AVAILABLE_PATH) as fh:
            return fh.read().split()
    except OSError:
        return []


_NOT_CC_MODULES = frozenset({"diag"})  # tcp_diag.ko: sock_diag, not an algorithm


def congestion_controls() -> list[str]:
    """What a socket of this host can be set to: the kernel's available algorithms, then those
    built as modules (``tcp_<name>.ko``), which a privileged ``TCP_CONGESTION`` loads."""
    found = available_congestion_controls()
    here = Path("/lib/modules") / os.uname().release / "kernel" / "net" / "ipv4"
    try:
        modules = sorted(p.name.split(".", 1)[0][4:] for p in here.glob("tcp_*.ko*"))
    except OSError:
        modules = []
    return found + [m for m in modules if m not in found and m not in _NOT_CC_MODULES]


def set_congestion_control(sock: socket.socket, name: str) -> None:
    """``setsockopt(TCP_CONGESTION)``; an unknown/disallowed name raises
    :class:`CongestionControlError` listing what is available."""
    if not name:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, name.encode())
    except OSError as exc:
        available = available_congestion_controls()
        err = CongestionControlError(name, available)
        if name in available:
            # Known but refused (EPERM): not in tcp_allowed_congestion_control and no CAP_NET_ADMIN.
            err.message += f" (refused: {exc.strerror}; needs CAP_NET_ADMIN or {ALLOWED_PATH})"
        raise err from exc


def congestion_control(sock: socket.socket) -> str:
    """The congestion control in use on ``sock``."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16)
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")


def paced_backlog(bits_per_s: int) -> int:
    """TCP_NOTSENT_LOWAT for a socket paced at ``bits_per_s``: :data:`PACED_BACKLOG`
    seconds of data at that rate, at least :data:`PACED_BACKLOG_MIN` bytes."""
    return max(PACED_BACKLOG_MIN, int(bits_per_s / 8 * PACED_BACKLOG))


def set_pacing(sock: socket.socket, bits_per_s: int) -> None:
    """SO_MAX_PACING_RATE from a rate in bits/s (the kernel takes bytes/s), and the
    unsent backlog capped to match (TCP_NOTSENT_LOWAT, :func:`paced_backlog`).

    Without the cap, the autotuned send buffer holds megabytes that drain at the
    paced rate after the flow's time is up: a 1 s flow paced at 1 Mbit/s ran 11 s.
    """
    if bits_per_s <= 0:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, struct.pack("=Q", bits_per_s // 8))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, paced_backlog(bits_per_s))
    except OSError as exc:
        raise TrafficError(f"cannot set max pacing rate {bits_per_s} bit/s: {exc.strerror}") from exc


def set_buffers(sock: socket.socket, size: int) -> None:
    """SO_SNDBUF and SO_RCVBUF (the kernel doubles and caps them at wmem_max/rmem_max)."""
    if size <= 0:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
    except OSError as exc:
        raise TrafficError(f"cannot set socket buffers to {size} bytes: {exc.strerror}") from exc


__all__ = [
    "CC_INFO_FIELDS",
    "CC_INFO_LEN",
    "PACED_BACKLOG",
    "PACED_BACKLOG_MIN",
    "TCP_INFO_FIELDS",
    "TCP_INFO_LEN",
    "ZERO_CC",
    "ZERO_INFO",
    "available_congestion_controls",
    "congestion_controls",
    "column_arrays",
    "congestion_control",
    "decode_record",
    "paced_backlog",
    "read_bbr_info",
    "read_tcp_info",
    "records_to_columns",
    "set_buffers",
    "set_congestion_control",
    "set_pacing",
]
