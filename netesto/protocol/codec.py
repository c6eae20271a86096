"""msgpack encoding of wire messages with size limits and version checks (never pickle)."""

from __future__ import annotations

import threading
from typing import Any

import msgpack

from netesto.errors import ProtocolError, VersionMismatch
from netesto.protocol.messages import COMMANDS, MAX_ID, ErrorInfo, Event, Message, Reply, Request, is_token
from netesto.protocol.version import PROTOCOL_VERSION, check_compatible

MiB = 1024 * 1024
DEFAULT_MAX_MESSAGE = 16 * MiB
CHUNK_SIZE = 1 * MiB

# One frame per message: a msgpack map with short keys.
#   v version, k kind ("req" | "rep" | "evt"), id, t type/event, a args/result/data,
#   ok, e [type, message, detail], c the run's claim token (requests; optional, ignored
#   by agents that predate it: the version stays 1.0)


_local = threading.local()
COMMANDS_SET = frozenset(COMMANDS)


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
        if msg.claim is not None:
            obj["c"] = msg.claim
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


def unpack(data: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE) -> Any:
    """The msgpack value of one frame; :class:`ProtocolError` if too big or not msgpack."""
    if len(data) > max_size:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the limit of {max_size} bytes")
    try:
        return msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise ProtocolError(f"malformed message ({len(data)} bytes): {exc}") from exc


def from_wire(obj: Any, *, ours: str = PROTOCOL_VERSION) -> Message:
    """The message an unpacked frame holds, fully validated (see :func:`decode`)."""
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
            return Request(obj["id"], obj["t"], obj.get("a") or {}, version, obj.get("c"))  # type: ignore[arg-type]
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


def decode(data: bytes, *, max_size: int = DEFAULT_MAX_MESSAGE, ours: str = PROTOCOL_VERSION) -> Message:
    """Parse one frame; :class:`ProtocolError` if malformed or too big,
    :class:`VersionMismatch` (with ``request_id`` set when known) if the major differs."""
    return from_wire(unpack(data, max_size=max_size), ours=ours)


# Fast paths for the request/reply round trip. They accept only what the full
# validation above accepts (same version, known command, id in range, a map of
# text keys) and answer None for everything else, which then takes the full path
# and gets its precise error. They skip building the frozen dataclasses: that and
# re-checking fields already checked was a third of a small request's overhead.


def request_parts(obj: Any, ours: str = PROTOCOL_VERSION) -> tuple[int, str, dict[str, Any]] | None:
    """``(id, command, args)`` of an unpacked request in the common case, else None."""
    if type(obj) is not dict or obj.get("k") != "req" or obj.get("v") != ours:
        return None
    rid, command, args = obj.get("id"), obj.get("t"), obj.get("a")
    # type() first: ``in`` on a frozenset raises TypeError for an unhashable command.
    if type(rid) is not int or not 0 <= rid <= MAX_ID or type(command) is not str or command not in COMMANDS_SET:
        return None
    if args is None:
        args = {}
    elif type(args) is not dict or not all(type(k) is str for k in args):
        return None
    return rid, command, args  # type: ignore[return-value]


def claim_token(obj: Any) -> str | None:
    """The claim token an unpacked request carries (None if none, or not a token)."""
    token = obj.get("c") if type(obj) is dict else None
    return token if is_token(token) else None


def reply_result(obj: Any, request_id: int, ours: str = PROTOCOL_VERSION) -> tuple[bool, Any]:
    """``(True, result)`` if ``obj`` is the successful reply to ``request_id``, else ``(False, None)``."""
    if (type(obj) is dict and obj.get("id") == request_id and obj.get("k") == "rep" and obj.get("ok") is True
            and obj.get("v") == ours and type(request_id) is int):
        return True, obj.get("a")
    return False, None


def encode_request(request_id: int, command: str, args: dict[str, Any], version: str = PROTOCOL_VERSION,
                   claim: str | None = None) -> bytes:
    """The frame of ``Request(request_id, command, args, version, claim)``; validated in full
    unless it is the common case."""
    if (command not in COMMANDS_SET or type(request_id) is not int or not 0 <= request_id <= MAX_ID
            or type(args) is not dict or not all(type(k) is str for k in args) or version != PROTOCOL_VERSION
            or (claim is not None and not is_token(claim))):
        return encode(Request(request_id, command, args, version, claim))
    obj = {"v": version, "k": "req", "id": request_id, "t": command, "a": args}
    if claim is not None:
        obj["c"] = claim
    try:
        return _pack(obj)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode Request: {exc}") from exc


def encode_result(request_id: int, result: Any, version: str = PROTOCOL_VERSION) -> bytes:
    """The frame of ``Reply(request_id, True, result)`` (the id came from :func:`request_parts`)."""
    try:
        return _pack({"v": version, "k": "rep", "id": request_id, "ok": True, "a": result})
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode Reply: {exc}") from exc


__all__ = ["CHUNK_SIZE", "DEFAULT_MAX_MESSAGE", "MiB", "claim_token", "decode", "encode", "encode_request", "encode_result",
           "from_wire", "reply_result", "request_parts", "unpack"]
