"""TCP_INFO of a connection another process owns, by its addresses, over sock_diag netlink.

The agent adds the congestion window and smoothed RTT of each client flow to the
engine's once-a-second ``progress`` event (the live view's cwnd), without touching
the engine: one netlink request for the exact 4-tuple (no dump of every socket),
answered by the kernel from the agent's own process, so the flows never wait on it.
"""

from __future__ import annotations

import itertools
import socket
import struct
import sys
from typing import Any, Sequence

from netesto.collectors.tcpinfo import TCP_INFO_FIELDS

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
INET_DIAG_INFO = 2
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
INET_DIAG_NOCOOKIE = 0xFFFFFFFF
_NLMSG = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBBxI")  # inet_diag_req_v2 up to its inet_diag_sockid
_DIAG_MSG_LEN = 72  # struct inet_diag_msg: 4 bytes, the 48-byte sockid, then 5 u32


def _sockid(family: int, local: tuple[str, int], remote: tuple[str, int]) -> bytes:
    """struct inet_diag_sockid: ports and addresses in network order, any interface, no cookie."""
    src = socket.inet_pton(family, local[0]).ljust(16, b"\0")
    dst = socket.inet_pton(family, remote[0]).ljust(16, b"\0")
    return struct.pack("!HH", local[1], remote[1]) + src + dst + struct.pack("=III", 0, INET_DIAG_NOCOOKIE,
                                                                               INET_DIAG_NOCOOKIE)


def parse_reply(data: bytes) -> bytes | None:
    """The struct tcp_info carried by one SOCK_DIAG_BY_FAMILY reply (None: no such socket)."""
    if len(data) < _NLMSG.size:
        return None
    length, kind, _, _, _ = _NLMSG.unpack_from(data)
    if kind == NLMSG_ERROR or kind != SOCK_DIAG_BY_FAMILY:
        return None
    at, end = _NLMSG.size + _DIAG_MSG_LEN, min(length, len(data))
    while at + 4 <= end:
        rta_len, rta_type = struct.unpack_from("=HH", data, at)
        if rta_len < 4:
            return None
        if rta_type == INET_DIAG_INFO:
            return data[at + 4: at + rta_len]
        at += (rta_len + 3) & ~3
    return None


class TcpDiag:
    """Looks connections up by (local, remote) address; :meth:`close` when done."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._seq = itertools.count(1)

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
            sock.settimeout(0.05)  # the kernel answers at once; never hold the agent's loop
            self._sock = sock
        return self._sock

    def tcp_info(self, local: Sequence[Any], remote: Sequence[Any]) -> bytes | None:
        """The raw struct tcp_info of the TCP connection local -> remote, None if there is none."""
        try:
            lhost, lport, rhost, rport = str(local[0]), int(local[1]), str(remote[0]), int(remote[1])
            family = socket.AF_INET6 if ":" in lhost else socket.AF_INET
            body = _REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0xFFFFFFFF) + _sockid(
                family, (lhost, lport), (rhost, rport))
            sock = self._socket()
            seq = next(self._seq)
            sock.send(_NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0) + body)
            while True:
                data = sock.recv(65536)
                if len(data) >= _NLMSG.size and _NLMSG.unpack_from(data)[3] == seq:
                    return parse_reply(data)
        except (OSError, ValueError, IndexError, TypeError, struct.error):
            return None

    def summary(self, local: Sequence[Any], remote: Sequence[Any]) -> dict[str, int]:
        """``{"cwnd": packets, "srtt_us": ...}`` of the connection, empty when it cannot be read."""
        raw = self.tcp_info(local, remote)
        out = {}
        for key, name in (("cwnd", "snd_cwnd"), ("srtt_us", "rtt")):
            offset, size = TCP_INFO_FIELDS[name]
            if raw is not None and len(raw) >= offset + size:
                out[key] = int.from_bytes(raw[offset: offset + size], sys.byteorder)
        return out

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


__all__ = ["TcpDiag", "parse_reply"]
