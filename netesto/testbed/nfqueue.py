"""The nfnetlink_queue protocol over a raw ``AF_NETLINK`` socket, standard library only (the delay line's queues).

:class:`NfQueue` binds netfilter queues (``iptables ... -j NFQUEUE --queue-num N``)
with headers-only copies; :func:`parse_packets` reads the (queue, packet id,
kernel timestamp) of each queued packet from a datagram; :func:`verdict_message`
builds the ``NF_ACCEPT``/``NF_DROP`` verdict that releases one (or, batched,
every earlier one).

The kernel puts a timestamp (``NFQA_TIMESTAMP``, CLOCK_REALTIME, whole
microseconds) on a queued packet only while some socket on the machine has
asked for receive timestamps (the global ``netstamp_needed`` switch): then
it is the packet's receive stamp, taken as the router's veth received it, or,
for a packet that carries a sender's departure time instead (TCP's pacing
stamp, which survives the hop between namespaces), the time it was queued.
:class:`NfQueue` holds such a socket open (:func:`receive_timestamps_on`).
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Container, Iterable

from netesto.errors import TestbedError

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_TIMESTAMP = 4
NFQA_PAYLOAD = 10
NFQA_CAP_LEN = 13  # the packet's length, sent when the copy (COPY_RANGE) cut it short
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
# Queue GSO packets whole: without it the kernel segments a 64 KB veth
# super-packet into ~44 queue entries, and the loop would pay for each.
NFQA_CFG_F_GSO = 1 << 2
NFQNL_COPY_PACKET = 2
NF_DROP = 0
NF_ACCEPT = 1
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NLMSG_ERROR = 2
NETLINK_NO_ENOBUFS = 5
SOL_NETLINK = 270
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35

_NLMSGHDR = struct.Struct("=IHHII")
_NFGENMSG = struct.Struct("=BBH")  # family, version, res_id (big-endian, packed by hand)
_NLA = struct.Struct("=HH")
_STAMP = struct.Struct("!QQ")  # struct nfqnl_msg_packet_timestamp: seconds, microseconds
COPY_RANGE = 128  # headers only: the verdict needs the packet id, not the payload
QUEUE_MAXLEN = 65536


def _nla(attr_type: int, payload: bytes) -> bytes:
    length = _NLA.size + len(payload)
    pad = (4 - length % 4) % 4
    return _NLA.pack(length, attr_type) + payload + b"\0" * pad


def _nfmsg(msg_type: int, queue: int, attrs: bytes, *, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack("!H", queue) + attrs
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags, seq, 0) + body


def verdict_message(queue: int, packet_id: int, verdict: int, *, batch: bool = False) -> bytes:
    """One verdict (or, with ``batch``, a verdict for every id <= ``packet_id``)."""
    kind = NFQNL_MSG_VERDICT_BATCH if batch else NFQNL_MSG_VERDICT
    return _nfmsg(kind, queue, _nla(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id)))


def parse_packets(data: bytes | memoryview, nbytes: int, errors: list[int] | None = None) -> list[tuple[int, int, int]]:
    """(queue, packet_id, stamp) of every NFQNL_MSG_PACKET message in one datagram (see :func:`parse_sized`)."""
    return [(q, i, s) for q, i, s, _ in parse_sized(data, nbytes, errors)]


def parse_sized(data: bytes | memoryview, nbytes: int, errors: list[int] | None = None,
                sized: Container[int] = range(65536)) -> list[tuple[int, int, int, int]]:
    """(queue, packet_id, stamp, length) of every NFQNL_MSG_PACKET message in one datagram; ``length``
    read only for the queues in ``sized`` (-1 for the others: reading past the stamp costs ~1 us a packet).

    ``stamp`` is the kernel's timestamp of the packet in CLOCK_REALTIME
    nanoseconds, rounded UP to the end of its microsecond (the kernel sends
    whole microseconds, truncated: the true instant is never later than
    this), or -1 when the message carries none. ``length`` is the packet's
    length in bytes from its IP header on (a GSO packet's whole length), -1
    when the message says neither (no copy, no NFQA_CAP_LEN).
    Netlink error replies (a verdict for a packet the kernel already dropped,
    say, when an interface went away) are not fatal: their errno values go to
    ``errors``.
    """
    out: list[tuple[int, int, int, int]] = []
    off = 0
    while off + _NLMSGHDR.size <= nbytes:
        length, mtype, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
        if length < _NLMSGHDR.size:
            break
        if mtype == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            (queue,) = struct.unpack_from("!H", data, off + _NLMSGHDR.size + 2)
            aoff = off + _NLMSGHDR.size + _NFGENMSG.size
            end = min(off + length, nbytes)
            packet_id = -1
            stamp = -1
            size = -1
            while aoff + _NLA.size <= end:
                alen, atype = _NLA.unpack_from(data, aoff)
                if alen < _NLA.size:
                    break
                atype &= 0x7FFF
                if atype == NFQA_PACKET_HDR:
                    (packet_id,) = struct.unpack_from("!I", data, aoff + _NLA.size)
                elif atype == NFQA_TIMESTAMP and alen >= _NLA.size + _STAMP.size:
                    sec, usec = _STAMP.unpack_from(data, aoff + _NLA.size)
                    stamp = sec * 1_000_000_000 + usec * 1000 + 999
                    if queue not in sized:
                        break  # after the header: nothing further is needed
                elif atype == NFQA_CAP_LEN:
                    (size,) = struct.unpack_from("!I", data, aoff + _NLA.size)
                elif atype == NFQA_PAYLOAD:
                    if size < 0:  # not cut short: the copy is the whole packet
                        size = alen - _NLA.size
                    break  # the last attribute
                aoff += (alen + 3) & ~3
            if packet_id >= 0:
                out.append((queue, packet_id, stamp, size))
        elif mtype == NLMSG_ERROR and errors is not None:
            (err,) = struct.unpack_from("=i", data, off + _NLMSGHDR.size)
            if err:
                errors.append(-err)
        off += (length + 3) & ~3
    return out


def receive_timestamps_on() -> socket.socket | None:
    """A socket that asks for receive timestamps, so the kernel stamps every packet it receives
    (machine-wide, about one clock read per packet) and NFQA_TIMESTAMP is sent; keep it open.
    None if the kernel refuses."""
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        sock.close()
        return None
    return sock


class NfQueue:
    """A netlink socket bound to some netfilter queues (this namespace's)."""

    def __init__(self, queues: Iterable[int], *, rcvbuf: int = 16 << 20) -> None:
        self.queues = list(queues)
        try:
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        except OSError as exc:
            raise TestbedError(f"delay line: cannot open a netfilter netlink socket: {exc}") from exc
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        # A full receive buffer must not turn into an error on every later recv.
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        self.stamper = receive_timestamps_on()
        self._seq = 0
        for queue in self.queues:
            self._config(queue, _nla(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))
            self._config(queue, _nla(NFQA_CFG_PARAMS, struct.pack("!IB", COPY_RANGE, NFQNL_COPY_PACKET)))
            self._config(queue, _nla(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)))
            self._config(
                queue,
                _nla(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO))
                + _nla(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO)),
            )
        self.sock.setblocking(False)

    def _config(self, queue: int, attrs: bytes) -> None:
        self._seq += 1
        self.sock.sendall(_nfmsg(NFQNL_MSG_CONFIG, queue, attrs, flags=NLM_F_REQUEST | NLM_F_ACK, seq=self._seq))
        while True:
            data = self.sock.recv(65536)
            off = 0
            while off + _NLMSGHDR.size <= len(data):
                length, mtype, _f, seq, _p = _NLMSGHDR.unpack_from(data, off)
                if mtype == NLMSG_ERROR and seq == self._seq:
                    (err,) = struct.unpack_from("=i", data, off + _NLMSGHDR.size)
                    if err:
                        raise TestbedError(
                            f"delay line: configuring netfilter queue {queue} failed: "
                            f"{os.strerror(-err)} (another process bound to it?)"
                        )
                    return
                off += max((length + 3) & ~3, _NLMSGHDR.size)

    def set_gso(self, queue: int, whole: bool) -> None:
        """Queue ``queue``'s GSO packets whole (``whole``) or cut into wire-sized packets by the kernel
        (a trace link delivers 1500-byte opportunities: a 64 KB packet could only leave whole).
        Sent without waiting for the kernel's answer: packets arrive on this socket meanwhile,
        and an error comes back among them (counted by :func:`parse_sized`)."""
        flags = NFQA_CFG_F_GSO if whole else 0
        self.sock.send(_nfmsg(NFQNL_MSG_CONFIG, queue, _nla(NFQA_CFG_FLAGS, struct.pack("!I", flags))
                              + _nla(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO))))

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        try:
            self.sock.setblocking(True)
            for queue in self.queues:
                self.sock.send(_nfmsg(NFQNL_MSG_CONFIG, queue, _nla(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_UNBIND, 0))))
        except OSError:
            pass
        self.sock.close()
        if self.stamper is not None:
            self.stamper.close()


__all__ = ["NF_ACCEPT", "NF_DROP", "NfQueue", "parse_packets", "parse_sized", "receive_timestamps_on",
           "verdict_message"]
