"""Reading ``.nflow`` files: :func:`read_flow`, :func:`decode_flow` and the :class:`RawFlow` they give.

Damage is tolerated as :mod:`netesto.raw.nflow` describes: a cut last block,
a damaged block whose neighbours prove the lengths intact.
"""

from __future__ import annotations

import os
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import msgpack

from netesto.errors import RawDataError
from netesto.raw.nflow_format import (
    BLOCK,
    FORMAT_VERSION,
    ITEMSIZE,
    MAGIC,
    MAX_BLOCK,
    PREAMBLE,
    Column,
    RecordLayout,
)


@dataclass
class RawFlow:
    """A decoded ``.nflow`` file."""

    path: str
    header: dict[str, Any]
    columns: dict[str, array] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    truncated: bool = False
    damaged: list[str] = field(default_factory=list)  # what was skipped, and where

    @property
    def rows(self) -> int:
        first = next(iter(self.columns.values()), None)
        return len(first) if first is not None else 0


def read_bytes(path: str) -> bytes:
    """A raw file's bytes (:class:`RawDataError` naming it when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise RawDataError(f"cannot read: {exc.strerror}", path=path) from exc


def read_flow(path: str | os.PathLike[str]) -> RawFlow:
    """Decode a ``.nflow`` file (see the module docstring for what is tolerated)."""
    path = os.fspath(path)
    return decode_flow(read_bytes(path), path=path)


def decode_flow(data: bytes, *, path: str = "<bytes>") -> RawFlow:
    """Decode the bytes of a ``.nflow`` file."""
    if len(data) < PREAMBLE.size:
        raise RawDataError("not a netesto flow file (too short)", path=path)
    magic, major, minor = PREAMBLE.unpack_from(data)
    if magic != MAGIC:
        raise RawDataError("not a netesto flow file (bad magic)", path=path)
    if major != FORMAT_VERSION[0]:
        raise RawDataError(
            f"format version {major}.{minor} is not readable by this netesto "
            f"(reads {FORMAT_VERSION[0]}.x)",
            path=path,
        )
    blocks, truncated, damaged = _split_blocks(data, PREAMBLE.size, path)
    if not blocks or blocks[0].get("type") != "header":
        raise RawDataError("first block is not a header", path=path)
    header = blocks[0]
    try:
        cols = [Column(str(n), str(t), str(u)) for n, t, u in header["columns"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise RawDataError(f"bad column list in header: {exc}", path=path) from exc
    flow = RawFlow(path=path, header=header, truncated=truncated, damaged=damaged)
    flow.columns = {c.name: array(c.typecode) for c in cols}
    flow.units = {c.name: c.unit for c in cols}
    swap = header.get("byteorder", sys.byteorder) != sys.byteorder
    record = _header_record(header, cols, path)
    records: list[bytes] = []  # consecutive records blocks are split into columns together

    def add_records() -> None:
        if records:
            assert record is not None  # a records block without a layout was refused
            _add_records(flow, cols, record, b"".join(records), swap)
            records.clear()

    for index, block in enumerate(blocks[1:], start=1):
        kind = block.get("type")
        if kind == "records":
            if record is None:
                raise RawDataError(f"block {index}: records block but the header has no record layout", path=path)
            records.append(_records_of(block, record, index, path))
            continue
        add_records()
        if kind == "samples":
            _add_samples(flow, cols, block, swap, index)
        elif kind == "summary":
            flow.summary = {k: v for k, v in block.items() if k != "type"}
        else:
            raise RawDataError(f"block {index}: unknown type {kind!r}", path=path)
    add_records()
    return flow


def _header_record(header: dict[str, Any], cols: Sequence[Column], path: str) -> RecordLayout | None:
    spec = header.get("record")
    if spec is None:
        return None
    try:
        record = RecordLayout(spec["length"], tuple((str(n), o) for n, o in spec["offsets"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RawDataError(f"bad record layout in header: {exc}", path=path) from exc
    why = record.problem(cols)
    if why:
        raise RawDataError(f"bad record layout in header: {why}", path=path)
    return record


def _block_at(data: bytes, pos: int) -> tuple[dict[str, Any] | None, int, str]:
    """The block at ``pos``: (block, where the next starts, "") when whole and sound;
    (None, next, why) when damaged, next being -1 when its length cannot be trusted;
    (None, -1, "") when the file ends inside it."""
    end = len(data)
    if pos + BLOCK.size > end:
        return None, -1, ""
    length, crc = BLOCK.unpack_from(data, pos)
    start = pos + BLOCK.size
    if length > MAX_BLOCK:
        return None, -1, f"length {length} too large"
    if start + length > end:
        return None, -1, ""
    payload = data[start : start + length]
    if zlib.crc32(payload) != crc:
        return None, start + length, "checksum mismatch"
    try:
        block = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        return None, start + length, f"undecodable ({exc})"
    if not isinstance(block, dict):
        return None, start + length, "not a map"
    return block, start + length, ""


def _sound_or_cut(data: bytes, pos: int) -> bool:
    """A sound block starts at ``pos``, or one the end of the file cuts short."""
    block, _, why = _block_at(data, pos)
    return block is not None or not why


def _split_blocks(data: bytes, pos: int, path: str) -> tuple[list[dict[str, Any]], bool, list[str]]:
    """The sound blocks from ``pos`` on, whether the file ends inside one, and what was skipped."""
    blocks: list[dict[str, Any]] = []
    damaged: list[str] = []
    end = len(data)
    while pos < end:
        block, after, why = _block_at(data, pos)
        if block is not None:
            blocks.append(block)
            pos = after
            continue
        if not why:
            return blocks, True, damaged
        if not blocks:  # the header itself: nothing can be read without it
            raise RawDataError(f"block at byte {pos}: {why}", path=path)
        # Go on past it only if the next block proves the lengths are intact.
        if after < 0 or (after < end and not _sound_or_cut(data, after)):
            damaged.append(f"block at byte {pos}: {why}; the {end - pos} bytes from there are unreadable")
            return blocks, False, damaged
        damaged.append(f"block at byte {pos}: {why}; skipped its {after - pos} bytes")
        pos = after
    return blocks, False, damaged


def _add_samples(
    flow: RawFlow, cols: Iterable[Column], block: dict[str, Any], swap: bool, index: int
) -> None:
    n = block.get("n")
    packed = block.get("cols")
    if not isinstance(n, int) or not isinstance(packed, dict):
        raise RawDataError(f"block {index}: malformed samples block", path=flow.path)
    for col in cols:
        raw = packed.get(col.name)
        part = array(col.typecode)
        if raw is not None:
            try:
                part.frombytes(raw)
            except (TypeError, ValueError) as exc:
                raise RawDataError(
                    f"block {index}: column {col.name!r} is malformed", path=flow.path
                ) from exc
            if swap:
                part.byteswap()
        if len(part) != n:
            raise RawDataError(
                f"block {index}: column {col.name!r} has {len(part)} values, expected {n}",
                path=flow.path,
            )
        flow.columns[col.name].extend(part)


def _records_of(block: dict[str, Any], record: RecordLayout, index: int, path: str) -> bytes:
    n = block.get("n")
    rec = block.get("rec")
    if not isinstance(n, int) or n < 0 or not isinstance(rec, bytes):
        raise RawDataError(f"block {index}: malformed records block", path=path)
    if len(rec) != n * record.length:
        raise RawDataError(f"block {index}: {len(rec)} bytes of records, expected {n} x {record.length}", path=path)
    return rec


def _add_records(flow: RawFlow, cols: Iterable[Column], record: RecordLayout, rec: bytes, swap: bool) -> None:
    """Append the rows of whole records (one strided slice per column)."""
    n = len(rec) // record.length
    offsets = dict(record.offsets)
    whole = memoryview(rec)
    views: dict[str, memoryview[Any]] = {}
    for col in cols:
        size = ITEMSIZE[col.typecode]
        part = array(col.typecode)
        off = offsets.get(col.name)
        if off is None:
            part.frombytes(bytes(n * size))
        else:
            view = views.get(col.typecode)
            if view is None:
                view = views[col.typecode] = whole.cast(col.typecode)  # type: ignore[call-overload]
            part.frombytes(view[off // size :: record.length // size].tobytes())
            if swap:
                part.byteswap()
        flow.columns[col.name].extend(part)
    for view in views.values():
        view.release()
    whole.release()



__all__ = ["RawFlow", "decode_flow", "read_flow"]
