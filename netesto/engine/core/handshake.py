"""The test-connection handshake between the engine's client and server.

A flow's first TCP connection opens with a hello::

    b"NTFL"  version (uint16 BE)  0 (uint16)  length (uint32 BE)  msgpack map

The map carries ``kind="main"``, the flow id, exp, test type, req/reply
sizes, duration, interval, ca, remote buffer, pacing, the per-experiment
token and the flow spec (without the token). The server answers with
``length (uint32 BE) + msgpack map`` ``{"ok": bool, "error": str,
"session": bytes, "udp_port": int, "ca": str}``. TCP_CRR's per-transaction
connections open with a fixed 16-byte join header instead, ``b"NTCJ"
version 0 session(8 bytes)``, followed directly by the request (no answer:
a join costs no extra round trip).

Start at an instant: a hello with a number ``go`` (the seconds the client
expects to wait before its start instant) asks the server to hold the flow
until the client's start marker :data:`GO` (one byte) arrives on this
connection; the server answers ``"go": True`` when it will. The client
connects and handshakes *before* the start instant, sends :data:`GO` at the
instant and its data right after, so connect and handshake time stay out of
the start skew. A hello without ``go`` starts the server's flow at once (the
behaviour of version-1 clients before this field existed).

Everything is bounded: hellos larger than :data:`MAX_HELLO` and unknown
magics are rejected before any allocation.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

import msgpack

HELLO_MAGIC = b"NTFL"
JOIN_MAGIC = b"NTCJ"
VERSION = 1
MAX_HELLO = 16 * 1024
MAX_REPLY = 16 * 1024
HELLO_HEAD = struct.Struct(">4sHHI")
JOIN = struct.Struct(">4sHH8s")
REPLY_HEAD = struct.Struct(">I")
GO = b"G"  # the start marker of a held flow (not counted as flow data)
MAX_GO_WAIT = 3600.0  # the longest hold a hello may ask for, s


class HandshakeError(Exception):
    """The peer sent something that is not a valid handshake (internal; never escapes)."""


@dataclass(frozen=True)
class Hello:
    """A decoded hello (``kind`` "main") from a client."""

    fields: dict[str, Any]

    @property
    def test(self) -> str:
        return str(self.fields.get("test", ""))

    @property
    def token(self) -> str:
        return str(self.fields.get("token", ""))


def encode_hello(fields: dict[str, Any]) -> bytes:
    body = msgpack.packb(dict(fields, kind="main"), use_bin_type=True)
    return HELLO_HEAD.pack(HELLO_MAGIC, VERSION, 0, len(body)) + body


JOIN_PREFIX = JOIN.pack(JOIN_MAGIC, VERSION, 0, bytes(8))[:8]  # a join's bytes before its session


def encode_join(session: bytes) -> bytes:
    return JOIN.pack(JOIN_MAGIC, VERSION, 0, session)


def parse_prefix(buf: bytes | bytearray) -> tuple[str, int] | None:
    """What the first bytes announce: ``("hello", total_len)`` or ``("join", 16)``.

    ``None`` means "need more bytes"; garbage raises :class:`HandshakeError`.
    """
    if len(buf) < 4:
        if not (HELLO_MAGIC.startswith(bytes(buf)) or JOIN_MAGIC.startswith(bytes(buf))):
            raise HandshakeError("bad magic")
        return None
    magic = bytes(buf[:4])
    if magic == JOIN_MAGIC:
        if len(buf) < JOIN.size:
            return None
        _, version, _, _ = JOIN.unpack_from(buf)
        if version != VERSION:
            raise HandshakeError(f"join version {version}")
        return "join", JOIN.size
    if magic != HELLO_MAGIC:
        raise HandshakeError("bad magic")
    if len(buf) < HELLO_HEAD.size:
        return None
    _, version, _, length = HELLO_HEAD.unpack_from(buf)
    if version != VERSION:
        raise HandshakeError(f"hello version {version}")
    if length > MAX_HELLO:
        raise HandshakeError(f"hello of {length} bytes")
    return "hello", HELLO_HEAD.size + length


def decode_hello(buf: bytes | bytearray) -> Hello:
    """Decode a complete hello (``parse_prefix`` said how long it is)."""
    try:
        fields = msgpack.unpackb(bytes(buf[HELLO_HEAD.size :]), raw=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise HandshakeError(f"undecodable hello: {exc}") from exc
    if not isinstance(fields, dict) or fields.get("kind") != "main":
        raise HandshakeError("hello is not a map of kind main")
    return Hello(fields)


def decode_join(buf: bytes | bytearray) -> bytes:
    return bytes(JOIN.unpack_from(buf)[3])


def encode_reply(fields: dict[str, Any]) -> bytes:
    body = msgpack.packb(fields, use_bin_type=True)
    return REPLY_HEAD.pack(len(body)) + body


def reply_length(buf: bytes | bytearray) -> int | None:
    """Total length of a reply once its 4-byte head is in ``buf``."""
    if len(buf) < REPLY_HEAD.size:
        return None
    (length,) = REPLY_HEAD.unpack_from(buf)
    if length > MAX_REPLY:
        raise HandshakeError(f"reply of {length} bytes")
    return REPLY_HEAD.size + length


def take_reply(buf: bytearray) -> dict[str, Any] | None:
    """The first complete reply/control message in ``buf``, removed from it; None until complete."""
    total = reply_length(buf)
    if total is None or len(buf) < total:
        return None
    fields = decode_reply(buf[:total])
    del buf[:total]
    return fields


def decode_reply(buf: bytes | bytearray) -> dict[str, Any]:
    try:
        fields = msgpack.unpackb(bytes(buf[REPLY_HEAD.size :]), raw=False)
    except Exception as exc:
        raise HandshakeError(f"undecodable reply: {exc}") from exc
    if not isinstance(fields, dict):
        raise HandshakeError("reply is not a map")
    return fields


__all__ = [
    "GO",
    "HandshakeError",
    "Hello",
    "JOIN",
    "JOIN_PREFIX",
    "decode_hello",
    "decode_join",
    "decode_reply",
    "encode_hello",
    "encode_join",
    "encode_reply",
    "parse_prefix",
    "reply_length",
    "take_reply",
]


# The start marker's arrival, from the kernel: a server end held off the CPU when the marker came
# would otherwise date the flow's start from when it read it, and judge a client that ran its whole
# time to have ended early (SO_TIMESTAMPNS on the connection only until the marker is read).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # (Linux's value; typeshed lacks the name)
_STAMP = struct.Struct("qq")  # struct timespec
STAMP_SPACE = socket.CMSG_SPACE(_STAMP.size)


def stamp_arrivals(sock: socket.socket, on: bool) -> None:
    """Have the kernel date what ``sock`` receives (CLOCK_REALTIME, given with each recvmsg), or stop."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, int(on))
    except OSError:
        pass  # then the marker is dated when it is read


def arrival(ancillary: list[tuple[int, int, bytes]]) -> tuple[float, float] | None:
    """(monotonic, wall) of the data a recvmsg returned, from its kernel stamp; None without one.
    Never later than now: a stamp ahead of the clock (a step) is now."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            sec, nsec = _STAMP.unpack_from(data)
            mono, wall = time.monotonic(), time.time()
            age = max(0.0, wall - (sec + nsec * 1e-9))
            return mono - age, wall - age
    return None
