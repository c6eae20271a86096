"""msgpack encoding of wire messages with size limits and version checks (never pickle)."""

from __future__ import annotations

import threading
from typing import Any

import msgpack

from netesto.errors import ProtocolError, VersionMismatch
from netesto.protocol.messages import ErrorInfo, Event, Message, Reply, Request
from netesto.protocol.version import PROTOCOL_VERSION, check_compatible

MiB = 1024 * 1024
DEFAULT_MAX_MESSAGE = 16 * MiB
CHUNK_SIZE = 1 * MiB

# One frame per message: a msgpack map with short keys.
#   v version, k kind ("req" | "rep" | "evt"), id, t type/event, a args/result/data,
#   ok, e [type, message, detail]


_local = threading.local()


def _pack(obj: Any) -> bytes:
    # A Packer per thread: msgpack.packb builds a new one per call, which is a
    # measurable part of a small request's round trip.
    packer = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    try:
        return packer.pack(obj)
    except BaseException:
        _local.packer = None  # a failed pack can leave the packer's buffer dirty
        raise


def encode(msg: Message) -> bytes:
    """The one msgpack frame for ``msg``."""
    if isinstance(msg, Request):
        obj: dict[str, Any] = {"v": msg.version, "k": "req", "id": msg.id, "t": msg.type, "a": msg.args}
    elif isinstance(msg, Reply):
        obj = {"v": msg.version, "k": "rep", "id": msg.id, "ok": msg.ok}
        if msg.ok:
            obj["a"] = msg.result
        else:
            assert msg.error is not None
            obj["e"] = [msg.error.type, msg.error.message, msg.error.detail]
    elif isinstance(msg, Event):
        obj = {"v": msg.version, "k": "evt", "t": msg.event, "a": msg.data}
    else:
        raise ProtocolError(f"cannot encode {type(msg).__name__}")
    try:
        return _pack(obj)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode {type(msg).__name__}: {exc}") from exc


def decode(data: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE, ours: str = PROTOCOL_VERSION) -> Message:
    """Parse one frame; :class:`ProtocolError` if malformed or too big,
    :class:`VersionMismatch` (with ``request_id`` set when known) if the major differs."""
    if len(data) > max_size:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the limit of {max_size} bytes")
    try:
        obj = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise ProtocolError(f"malformed message ({len(data)} bytes): {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"malformed message: expected a map, got {type(obj).__name__}")
    version = obj.get("v")
    try:
        check_compatible(version, ours=ours)  # type: ignore[arg-type]
    except VersionMismatch as exc:
        exc.request_id = obj.get("id")  # type: ignore[attr-defined]
        raise
    kind = obj.get("k")
    try:
        if kind == "req":
            return Request(obj["id"], obj["t"], obj.get("a") or {}, version)  # type: ignore[arg-type]
        if kind == "rep":
            if obj["ok"]:
                return Reply(obj["id"], True, obj.get("a"), None, version)  # type: ignore[arg-type]
            etype, message, detail = obj["e"]
            return Reply(obj["id"], False, None, ErrorInfo(etype, message, detail), version)  # type: ignore[arg-type]
        if kind == "evt":
            return Event(obj["t"], obj.get("a") or {}, version)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed {kind} message: {exc!r}") from exc
    raise ProtocolError(f"malformed message: unknown kind {kind!r}")


__all__ = ["CHUNK_SIZE", "DEFAULT_MAX_MESSAGE", "MiB", "decode", "encode"]
