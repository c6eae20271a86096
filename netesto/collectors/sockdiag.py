"""Every TCP socket of a host that matches a filter, with its tcp_info, in one sock_diag dump.

One ``TCPDIAG_GETSOCK`` dump request (the inet_diag interface ``ss`` grew from)
with an ``INET_DIAG_REQ_BYTECODE`` filter: the kernel walks its established
hash once, for IPv4 and IPv6 sockets together (the v2 request takes one
family per dump, and a dual-stack server's accepted sockets are IPv6 with
v4-mapped addresses), runs the filter on each socket and fills ``tcp_info``
(and the congestion control's info: bbr's) only for those that pass. Ports
and addresses (with prefixes) are conditions of the kernel's bytecode, and so
is the socket's cgroup v2 id (``INET_DIAG_BC_CGROUP_COND``, Linux 5.10+).
The owning process is not: inet_diag reports a socket's inode, which
:func:`netesto.collectors.sockowner.process_inodes` matches against ``/proc/PID/fd``.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import struct
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

from netesto.errors import TrafficError

NETLINK_SOCK_DIAG = 4
TCPDIAG_GETSOCK = 18  # the compat request: family AF_UNSPEC, both families in one walk
SOCK_DIAG_BY_FAMILY = 20  # also the type of destroy broadcasts
# multicast groups of socket destructions (linux/sock_diag.h SKNLGRP_INET_TCP_DESTROY, _INET6_): bind mask
TCP_DESTROY_GROUPS = 1 << (1 - 1) | 1 << (3 - 1)
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_REQ_BYTECODE = 1
INET_DIAG_INFO, INET_DIAG_VEGASINFO, INET_DIAG_CONG, INET_DIAG_BBRINFO = 2, 3, 4, 16
# bytecode ops (linux/inet_diag.h)
BC_JMP, BC_S_COND, BC_D_COND, BC_S_EQ, BC_D_EQ, BC_CGROUP_COND = 1, 7, 8, 11, 12, 13
TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT",
              7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING", 12: "NEW_SYN_RECV"}
# Sockets with a whole tcp_info: not listeners, not TIME_WAIT or request minisocks.
SAMPLED_STATES = sum(1 << s for s in (1, 2, 4, 5, 8, 9, 11))
_NLMSG = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBBB48sII")  # struct inet_diag_req (compat)
# struct inet_diag_msg (72 bytes): family, state, (timer, retrans), sockid's ports and addresses,
# (interface), cookie, (expires), rqueue, wqueue, uid, inode
_MSG = struct.Struct("=BB2x36s4xQ4xIIII")
_OP = struct.Struct("=BBH")
_RTA = struct.Struct("=HH")
_RECV = 1 << 17


@dataclass(frozen=True)
class SocketFilter:
    """Which sockets a dump returns: a port condition, an address condition and a cgroup, ANDed.

    ``ports``: a socket matches when its local or its remote port is one of them
    (``local_ports``/``remote_ports`` name one end only). ``addresses``: when its
    local or remote address is in one of them (``10.0.0.2``, ``10.0.0.0/24``,
    ``fd00::/64``). ``cgroup``: the cgroup v2 id (the inode number of its
    directory). An empty filter matches every socket.
    """

    ports: tuple[int, ...] = ()
    local_ports: tuple[int, ...] = ()
    remote_ports: tuple[int, ...] = ()
    addresses: tuple[str, ...] = ()
    cgroup: int = 0

    def __post_init__(self) -> None:
        for port in (*self.ports, *self.local_ports, *self.remote_ports):
            if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                raise TrafficError(f"socket filter: bad port {port!r} (1..65535)")
        for addr in self.addresses:
            try:
                ipaddress.ip_network(addr, strict=False)
            except ValueError as exc:
                raise TrafficError(f"socket filter: bad address {addr!r}: {exc}") from None
        if not isinstance(self.cgroup, int) or self.cgroup < 0:
            raise TrafficError(f"socket filter: bad cgroup id {self.cgroup!r}")

    def bytecode(self) -> bytes:
        """The filter as inet_diag bytecode (b"" for an empty one)."""
        groups: list[list[tuple[int, bytes]]] = []
        port_group = ([(BC_S_EQ, _OP.pack(0, 0, p)) for p in (*self.ports, *self.local_ports)]
                      + [(BC_D_EQ, _OP.pack(0, 0, p)) for p in (*self.ports, *self.remote_ports)])
        if port_group:
            groups.append(port_group)
        if self.addresses:
            groups.append([(code, _host_cond(a)) for a in self.addresses for code in (BC_S_COND, BC_D_COND)])
        if self.cgroup:
            groups.append([(BC_CGROUP_COND, struct.pack("=Q", self.cgroup))])
        return assemble(groups)

    def matches(self, sock: "DiagSocket") -> bool:
        """The same test in Python (for sockets from elsewhere, and to check the kernel's answer)."""
        ports = set(self.ports)
        if ports or self.local_ports or self.remote_ports:
            if not (sock.local[1] in ports | set(self.local_ports) or sock.remote[1] in ports | set(self.remote_ports)):
                return False
        if self.addresses:
            nets = [ipaddress.ip_network(a, strict=False) for a in self.addresses]
            if not any(_in(addr, net) for addr in (sock.local[0], sock.remote[0]) for net in nets):
                return False
        return True


def _in(addr: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    ip = ipaddress.ip_address(addr)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None and net.version == 4:
        return ip.ipv4_mapped in net
    return ip.version == net.version and ip in net


def _host_cond(addr: str) -> bytes:
    """struct inet_diag_hostcond: family, prefix length, port (-1: any), then the address."""
    net = ipaddress.ip_network(addr, strict=False)
    family = socket.AF_INET if net.version == 4 else socket.AF_INET6
    return struct.pack("=BBxxi", family, net.prefixlen, -1) + net.network_address.packed


def _leaf(code: int, operand: bytes) -> bytes:
    size = _OP.size + len(operand)
    return _OP.pack(code, size, size + 4) + operand  # holds: on; fails: past what follows


def _either(a: bytes, b: bytes) -> bytes:
    """``a || b``: a that holds lands on a jump over b; a that fails skips the jump into b."""
    return a + _OP.pack(BC_JMP, 4, len(b) + 4) + b


def _both(a: bytes, b: bytes) -> bytes:
    """``a && b``: a's jumps past its own end (a failure) now go past b's too."""
    out = bytearray(a)
    pos = 0
    while pos < len(a):
        code, yes, no = _OP.unpack_from(out, pos)
        if no == len(a) - pos + 4:
            _OP.pack_into(out, pos, code, yes, no + len(b))
        pos += yes
    return bytes(out) + b


def assemble(groups: Sequence[Sequence[tuple[int, bytes]]]) -> bytes:
    """Bytecode for an AND of ORs of ``(op code, operand)`` conditions, laid out as ``ss`` does.

    The kernel runs the ops from the start, each jumping ``yes`` or ``no`` bytes
    on; a socket matches when the run lands exactly on the end. Its audit
    follows the ``yes`` jumps only and wants every ``no`` to land on an op of
    that chain (or just past the end: no match), so every op's ``yes`` is the
    next op and an OR short-cuts with a JMP (which always takes ``no``).

    >>> assemble([[(BC_S_EQ, _OP.pack(0, 0, 80)), (BC_D_EQ, _OP.pack(0, 0, 80))]]).hex()
    '0b080c000000500001040c000c080c0000005000'
    """
    out = b""
    for group in groups:
        alts = [_leaf(code, operand) for code, operand in group]
        part = alts[-1]
        for alt in reversed(alts[:-1]):
            part = _either(alt, part)
        out = _both(out, part) if out else part
    return out


class DiagSocket(NamedTuple):
    """One socket of a dump: its identity, queues and the raw kernel structs (addresses decoded on use:
    a sampler reads them once per socket, not once per tick)."""

    family: int
    state: int
    sid: bytes  # struct inet_diag_sockid's ports and addresses, as the kernel wrote them
    cookie: int
    inode: int
    uid: int
    rqueue: int  # bytes received and not read by the application (established sockets)
    wqueue: int  # bytes written and not acknowledged (sent or not)
    info: bytes = b""  # struct tcp_info as the kernel filled it
    cc_info: bytes = b""  # struct tcp_bbr_info (bbr) or b""
    cc_kind: int = 0  # the attribute type cc_info came in (INET_DIAG_BBRINFO, ...)
    ca: str = ""  # the congestion control's name

    @property
    def local(self) -> tuple[str, int]:
        return _address(self.family, self.sid[4:20]), int.from_bytes(self.sid[0:2], "big")

    @property
    def remote(self) -> tuple[str, int]:
        return _address(self.family, self.sid[20:36]), int.from_bytes(self.sid[2:4], "big")

    @property
    def key(self) -> tuple[bytes, int]:
        """Identifies the socket while it lives (the cookie tells reused 4-tuples apart)."""
        return self.sid, self.cookie


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[:4])
    text = socket.inet_ntop(socket.AF_INET6, raw)
    return text[7:] if text.startswith("::ffff:") and "." in text else text  # v4-mapped: the v4 address


def parse_messages(data: bytes | memoryview, seq: int | None = None) -> Iterator[DiagSocket | None]:
    """The sockets of one recv of a dump's answer; None at NLMSG_DONE. An NLMSG_ERROR raises
    :class:`TrafficError` with the kernel's errno (a refused filter: EINVAL)."""
    buf = memoryview(data)
    pos, end = 0, len(buf)
    while pos + _NLMSG.size <= end:
        length, kind, _flags, mseq, _pid = _NLMSG.unpack_from(buf, pos)
        if length < _NLMSG.size or pos + length > end:
            return
        body = pos + _NLMSG.size
        if seq is not None and mseq != seq:  # an answer to an earlier request: skip
            pos += (length + 3) & ~3
            continue
        if kind == NLMSG_DONE:
            yield None
            return
        if kind == NLMSG_ERROR:
            errno = -struct.unpack_from("=i", buf, body)[0]
            raise TrafficError(f"sock_diag dump refused: {os.strerror(errno)} (errno {errno})")
        if kind in (TCPDIAG_GETSOCK, SOCK_DIAG_BY_FAMILY) and length >= _NLMSG.size + _MSG.size:
            yield _socket(buf, body, pos + length)
        pos += (length + 3) & ~3


def _socket(buf: memoryview, at: int, end: int) -> DiagSocket:
    family, state, sid, cookie, rq, wq, uid, inode = _MSG.unpack_from(buf, at)
    info = cc = b""
    cc_kind = 0
    ca = ""
    pos = at + _MSG.size
    while pos + 4 <= end:
        rlen, rtype = _RTA.unpack_from(buf, pos)
        if rlen < 4:
            break
        if rtype == INET_DIAG_INFO:
            info = bytes(buf[pos + 4: pos + rlen])
        elif rtype == INET_DIAG_CONG:
            ca = bytes(buf[pos + 4: pos + rlen]).split(b"\0", 1)[0].decode("ascii", "replace")
        elif rtype in (INET_DIAG_BBRINFO, INET_DIAG_VEGASINFO):
            cc, cc_kind = bytes(buf[pos + 4: pos + rlen]), rtype
        pos += (rlen + 3) & ~3
    return DiagSocket(family, state, sid, cookie, inode, uid, rq, wq, info, cc, cc_kind, ca)


def dump_request(seq: int, bytecode: bytes = b"", states: int = SAMPLED_STATES, cc_info: bool = True) -> bytes:
    """A TCPDIAG_GETSOCK dump of every family with tcp_info (and the congestion control's name and
    info), filtered by ``bytecode``."""
    ext = 1 << (INET_DIAG_INFO - 1)
    if cc_info:
        ext |= 1 << (INET_DIAG_VEGASINFO - 1) | 1 << (INET_DIAG_CONG - 1)  # bbr answers with INET_DIAG_BBRINFO
    body = _REQ.pack(socket.AF_UNSPEC, 0, 0, ext, bytes(40) + b"\xff\xff\xff\xff" * 2, states, 0)
    if bytecode:
        body += _RTA.pack(_RTA.size + len(bytecode), INET_DIAG_REQ_BYTECODE) + bytecode
    return _NLMSG.pack(_NLMSG.size + len(body), TCPDIAG_GETSOCK, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


class SockDiag:
    """A NETLINK_SOCK_DIAG socket that dumps the sockets a :class:`SocketFilter` matches."""

    def __init__(self, filt: SocketFilter | None = None, *, cc_info: bool = True,
                 states: int = SAMPLED_STATES) -> None:
        self.filter = filt or SocketFilter()
        self._bytecode = self.filter.bytecode()
        self._cc = cc_info
        self._states = states
        self._seq = itertools.count(1)
        self._buf = bytearray(_RECV)
        try:
            self._sock: socket.socket | None = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        except OSError as exc:
            raise TrafficError(f"cannot open a sock_diag netlink socket: {exc.strerror}") from exc
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self._destroy: socket.socket | None = None

    def dump(self) -> list[DiagSocket]:
        """Every matching socket now (one request; the answer comes in as many recvs as it takes)."""
        sock = self._sock
        if sock is None:
            raise TrafficError("sock_diag socket is closed")
        seq = next(self._seq)
        sock.send(dump_request(seq, self._bytecode, self._states, self._cc))
        out: list[DiagSocket] = []
        view = memoryview(self._buf)
        while True:
            n = sock.recv_into(view)
            for item in parse_messages(view[:n], seq):
                if item is None:
                    return out
                out.append(item)

    def watch_destroyed(self) -> None:
        """Subscribe to the kernel's broadcast of each TCP socket destroyed in this namespace, with
        its last tcp_info and queues (CAP_NET_ADMIN): what a socket did after the last dump."""
        if self._destroy is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
                sock.bind((0, TCP_DESTROY_GROUPS))
            except OSError as exc:
                sock.close()
                raise TrafficError(f"cannot watch TCP socket destructions: {exc.strerror}") from exc
            sock.setblocking(False)
            self._destroy = sock

    def destroyed(self) -> list[DiagSocket]:
        """The sockets destroyed since the last call (after :meth:`watch_destroyed`)."""
        out: list[DiagSocket] = []
        if self._destroy is None:
            return out
        view = memoryview(self._buf)
        while True:
            try:
                n = self._destroy.recv_into(view)
            except (BlockingIOError, InterruptedError):
                return out
            except OSError:  # ENOBUFS: broadcasts were lost; the dumps still hold
                continue
            out.extend(s for s in parse_messages(view[:n]) if s is not None)

    def close(self) -> None:
        for sock in (self._sock, self._destroy):
            if sock is not None:
                sock.close()
        self._sock = self._destroy = None

    def __enter__(self) -> "SockDiag":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "DiagSocket",
    "SAMPLED_STATES",
    "SockDiag",
    "SocketFilter",
    "TCP_STATES",
    "dump_request",
    "parse_messages",
]
