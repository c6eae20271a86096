"""The raw per-flow data format (``.nflow``): versioned header + columnar blocks.

One file per flow end (client or server side). Layout::

    magic   b"NETESTO\\x00"                      8 bytes
    version major, minor                        2 x uint16 little-endian
    block*  length (uint32 LE), crc32 (uint32 LE), msgpack payload (length bytes)

Every block payload is a msgpack map with a ``"type"``:

``header`` (exactly one, first)
    ``format`` (major, minor), ``columns`` [[name, typecode, unit], ...] in
    file order, plus free metadata the engine records: ``flow`` (the flow
    spec as a dict), ``side`` ("client"/"server"), ``host``, ``start_wall``,
    ``start_mono``, ``interval``, ``byteorder``.
``samples`` (any number)
    ``n`` rows and ``cols``: {name: bytes} with each column's values packed
    as a :mod:`array` of the header's typecode. Blocks are written as the
    flow runs (every ``flush_interval`` seconds), so a crash loses at most the
    last flush period.
``records`` (any number; format 1.1, needs the header's ``record``)
    ``n`` rows as ``rec``: ``n`` fixed-length row records back to back. The
    header's ``record`` = {``length``, ``offsets``: [[column, byte offset],
    ...]} says where each column's value sits in a record (aligned to its
    size, header byte order); columns it does not name are zero in those rows.
    The engine writes these: a block is its buffered rows as they are, with
    no per-column work on the sampling host.
``summary`` (at most one, last)
    free map: totals, latency histogram, end status, error text.

Readers accept files whose last block is cut short (the writer died): the
complete blocks are kept and :attr:`RawFlow.truncated` is set. A damaged block
after the header (a checksum mismatch, an impossible length, undecodable
msgpack) loses only itself: the reader goes on with the next block when that
one's checksum holds (the damage left the lengths intact), else stops there,
and says what it skipped in :attr:`RawFlow.damaged`. A bad magic, an unknown
major version or a damaged header raise :class:`~netesto.errors.RawDataError`
naming the file.

Only the standard library and msgpack are used: the agent writes these files.
"""

from __future__ import annotations

import os
import select
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import msgpack

from netesto.errors import RawDataError

MAGIC = b"NETESTO\x00"
FORMAT_VERSION = (1, 1)  # the newest written and read; files without ``records`` blocks say (1, 0)
_COLUMNS_ONLY = (1, 0)
SUFFIX = ".nflow"
MAX_BLOCK = 64 * 1024 * 1024
_PREAMBLE = struct.Struct("<8sHH")
_BLOCK = struct.Struct("<II")
_TYPECODES = frozenset("bBhHiIlLqQfd")
_ITEMSIZE = {tc: array(tc).itemsize for tc in _TYPECODES}
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
# msgpack's encoding of {"type": "records", "n": n, "rec": <bin>} (use_bin_type=True) up to
# n's and the bin's headers: write_records builds it by hand instead of copying the records
_REC_MAP = b"\x83\xa4type\xa7records\xa1n"
_REC_KEY = b"\xa3rec"
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def _msgpack_uint(n: int) -> bytes:
    """msgpack's shortest encoding of ``0 <= n < 2**32`` (positive fixint, uint8/16/32)."""
    if n < 0x80:
        return _U8.pack(n)
    if n < 0x100:
        return b"\xcc" + _U8.pack(n)
    if n < 0x10000:
        return b"\xcd" + _U16.pack(n)
    return b"\xce" + _U32.pack(n)


def _msgpack_bin_header(size: int) -> bytes:
    """The header msgpack puts before ``size`` bytes of bin (bin8/16/32 by size)."""
    if size < 0x100:
        return b"\xc4" + _U8.pack(size)
    if size < 0x10000:
        return b"\xc5" + _U16.pack(size)
    return b"\xc6" + _U32.pack(size)


@dataclass(frozen=True)
class Column:
    """One sampled variable: name, :mod:`array` typecode, unit text."""

    name: str
    typecode: str
    unit: str = ""

    def __post_init__(self) -> None:
        if self.typecode not in _TYPECODES:
            raise ValueError(f"column {self.name!r}: bad typecode {self.typecode!r}")


@dataclass(frozen=True)
class RecordLayout:
    """Byte offsets of columns in a fixed-length row record (``records`` blocks).

    ``length`` is the record size; ``offsets`` pairs a column name with where
    its value starts. Offsets must be aligned to the column's item size and
    ``length`` to 8 bytes, so a column of a block is one strided slice.
    """

    length: int
    offsets: tuple[tuple[str, int], ...]

    def problem(self, columns: Sequence[Column]) -> str | None:
        """What is wrong with this layout for ``columns`` (None: it fits)."""
        types = {c.name: c.typecode for c in columns}
        if not isinstance(self.length, int) or self.length <= 0 or self.length % 8:
            return f"record length {self.length!r} is not a positive multiple of 8"
        for name, off in self.offsets:
            tc = types.get(name)
            if tc is None:
                return f"record names unknown column {name!r}"
            size = _ITEMSIZE[tc]
            if not isinstance(off, int) or off < 0 or off % size or off + size > self.length:
                return f"column {name!r} at record offset {off!r} is misaligned or out of range"
        return None


class FlowWriter:
    """Appends one flow's samples to a ``.nflow`` file as the flow runs.

    Rows are buffered per column and written as one block per
    ``flush_interval`` seconds of sample time (or ``flush_rows`` rows), and on
    :meth:`close`. Each block is handed to the OS immediately (a crash of the
    writer process loses nothing already flushed).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[Column],
        meta: dict[str, Any] | None = None,
        *,
        flush_rows: int = 64,
        record: RecordLayout | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.columns = tuple(columns)
        self.record = record
        if record is not None and (why := record.problem(self.columns)):
            raise ValueError(why)
        version = FORMAT_VERSION if record is not None else _COLUMNS_ONLY
        self._names = [c.name for c in self.columns]
        self._buf: list[array[Any]] = [array(c.typecode) for c in self.columns]
        self._flush_rows = max(1, flush_rows)
        # An unbuffered fd: every block is one writev straight from the caller's
        # buffers, in the kernel when the call returns (a crash loses nothing written).
        self._fd: int | None = os.open(self.path, _OPEN_FLAGS, 0o666)
        self._write_all([_PREAMBLE.pack(MAGIC, *version)])
        header = dict(meta or {})
        header.update(
            type="header",
            format=list(version),
            columns=[[c.name, c.typecode, c.unit] for c in self.columns],
            byteorder=sys.byteorder,
        )
        if record is not None:
            header["record"] = {"length": record.length, "offsets": [list(o) for o in record.offsets]}
        self._write_block(header)
        self.rows = 0

    def append(self, row: Sequence[float | int]) -> None:
        """Add one sample row, values in column order."""
        for buf, value in zip(self._buf, row):
            buf.append(value)
        self.rows += 1
        if len(self._buf[0]) >= self._flush_rows:
            self.flush()

    def flush(self) -> None:
        """Write buffered rows as one ``samples`` block."""
        n = len(self._buf[0]) if self._buf else 0
        if n == 0 or self._fd is None:
            return
        cols = {name: buf.tobytes() for name, buf in zip(self._names, self._buf)}
        self._write_block({"type": "samples", "n": n, "cols": cols})
        self._buf = [array(c.typecode) for c in self.columns]

    def write_columns(self, n: int, cols: dict[str, bytes]) -> None:
        """Write ``n`` ready-made rows as one ``samples`` block (rows buffered by
        :meth:`append` go first).

        ``cols`` maps every column to its ``n`` values packed in the host's
        byte order (``array(typecode).tobytes()``); a missing column or a
        wrong length raises :class:`~netesto.errors.RawDataError`.
        """
        if n == 0 or self._fd is None:
            return
        for c in self.columns:
            got = cols.get(c.name)
            if got is None or len(got) != n * _ITEMSIZE[c.typecode]:
                raise RawDataError(
                    f"{self.path}: column {c.name!r} of a {n}-row block has "
                    f"{'no data' if got is None else f'{len(got)} bytes'}"
                )
        self.flush()
        self._write_block({"type": "samples", "n": n, "cols": cols})
        self.rows += n

    def write_records(self, n: int, rec: bytes | bytearray | memoryview, written: int = 0) -> None:
        """Write ``n`` rows as one ``records`` block: ``n`` records laid out as
        the writer's :class:`RecordLayout` says (rows buffered by
        :meth:`append` go first). A wrong length raises
        :class:`~netesto.errors.RawDataError`. ``written``: bytes of this very
        block already written to :meth:`direct_fd` (the C sampler tick's
        writev fell short); the rest goes out from there.

        The engine's hot path (a block per flow end every ~0.2 s): the bytes
        are exactly what msgpack writes for ``{"type": "records", "n": n,
        "rec": rec}``, but the map's few header bytes are built here, the
        checksum runs over them and then over ``rec`` in place, and one
        ``writev`` hands block header, map header and ``rec`` to the kernel
        without copying ``rec``. The C tick (``fastloop.sample_tick``)
        writes the same bytes.
        """
        if n == 0 or self._fd is None:
            return
        size = len(rec)
        if self.record is None or size != n * self.record.length:
            raise RawDataError(
                f"{self.path}: a {n}-row records block of {size} bytes "
                + ("(the writer has no record layout)" if self.record is None
                   else f"(records are {self.record.length} bytes)")
            )
        if self._buf[0]:
            self.flush()
        prefix = _REC_MAP + _msgpack_uint(n) + _REC_KEY + _msgpack_bin_header(size)
        head = _BLOCK.pack(len(prefix) + size, zlib.crc32(rec, zlib.crc32(prefix))) + prefix
        done = written
        if not done:
            try:
                done = os.writev(self._fd, (head, rec))
            except BlockingIOError:
                done = 0
        if done != len(head) + size:
            self._write_rest([head, rec], done)  # a short write (a pipe, a signal, a full disk): go on
        self.rows += n

    def direct_fd(self, record_length: int) -> int | None:
        """The fd a ``records`` block of ``record_length``-byte records may go
        to as is (the C sampler tick writes :meth:`write_records`' bytes there
        and adds to :attr:`rows`), or None: the writer is closed, has another
        record layout, or holds rows of :meth:`append` that must go first."""
        if self._fd is None or self.record is None or self.record.length != record_length or self._buf[0]:
            return None
        return self._fd

    def close(self, summary: dict[str, Any] | None = None) -> None:
        """Flush, write the ``summary`` block (if any) and close the file."""
        if self._fd is None:
            return
        try:
            self.flush()
            if summary is not None:
                self._write_block(dict(summary, type="summary"))
        finally:
            os.close(self._fd)
            self._fd = None

    def abandon(self) -> None:
        """Close the file as it is, writing nothing more (a write failed: a
        full disk, a bad fd). The blocks already written stay readable; with
        no summary, readers see a writer that stopped."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _write_block(self, payload: dict[str, Any]) -> None:
        data = msgpack.packb(payload, use_bin_type=True)
        self._write_all([_BLOCK.pack(len(data), zlib.crc32(data)), data])

    def _write_all(self, parts: list[Any]) -> None:
        """Write ``parts`` in full, in order (one writev when the kernel takes it all)."""
        assert self._fd is not None
        try:
            done = os.writev(self._fd, parts)
        except BlockingIOError:
            done = 0
        if done != sum(map(len, parts)):
            self._write_rest(parts, done)

    def _write_rest(self, parts: list[Any], done: int) -> None:
        """Write what is left of ``parts`` after their first ``done`` bytes.

        writev may take less than everything (a pipe with little room, a
        signal, a full disk); an fd without room (non-blocking) is waited on.
        """
        assert self._fd is not None
        views = [memoryview(p).cast("B") for p in parts]
        while True:
            while views and done >= len(views[0]):
                done -= len(views.pop(0))
            if not views:
                return
            views[0] = views[0][done:]
            select.select([], [self._fd], [])  # room for more (a non-blocking fd may have none)
            try:
                done = os.writev(self._fd, views)
            except BlockingIOError:
                done = 0

    def __enter__(self) -> "FlowWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def read_flow(path: str | os.PathLike[str]) -> RawFlow:
    """Decode a ``.nflow`` file (see the module docstring for what is tolerated)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise RawDataError(f"cannot read: {exc.strerror}", path=path) from exc
    return decode_flow(data, path=path)


def decode_flow(data: bytes, *, path: str = "<bytes>") -> RawFlow:
    """Decode the bytes of a ``.nflow`` file."""
    if len(data) < _PREAMBLE.size:
        raise RawDataError("not a netesto flow file (too short)", path=path)
    magic, major, minor = _PREAMBLE.unpack_from(data)
    if magic != MAGIC:
        raise RawDataError("not a netesto flow file (bad magic)", path=path)
    if major != FORMAT_VERSION[0]:
        raise RawDataError(
            f"format version {major}.{minor} is not readable by this netesto "
            f"(reads {FORMAT_VERSION[0]}.x)",
            path=path,
        )
    blocks, truncated, damaged = _split_blocks(data, _PREAMBLE.size, path)
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
    if pos + _BLOCK.size > end:
        return None, -1, ""
    length, crc = _BLOCK.unpack_from(data, pos)
    start = pos + _BLOCK.size
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
        size = _ITEMSIZE[col.typecode]
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


__all__ = [
    "Column",
    "FORMAT_VERSION",
    "FlowWriter",
    "MAGIC",
    "RawFlow",
    "RecordLayout",
    "SUFFIX",
    "decode_flow",
    "read_flow",
]
