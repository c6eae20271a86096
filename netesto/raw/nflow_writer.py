"""Writing ``.nflow`` files as a flow runs: :class:`FlowWriter` (the format is in :mod:`netesto.raw.nflow`)."""

from __future__ import annotations

import os
import select
import struct
import sys
import zlib
from array import array
from typing import Any, Sequence

import msgpack

from netesto.errors import RawDataError
from netesto.raw.nflow_format import (
    BLOCK,
    COLUMNS_ONLY,
    FORMAT_VERSION,
    ITEMSIZE,
    MAGIC,
    PREAMBLE,
    Column,
    RecordLayout,
)

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
        version = FORMAT_VERSION if record is not None else COLUMNS_ONLY
        self._names = [c.name for c in self.columns]
        self._buf: list[array[Any]] = [array(c.typecode) for c in self.columns]
        self._flush_rows = max(1, flush_rows)
        # An unbuffered fd: every block is one writev straight from the caller's
        # buffers, in the kernel when the call returns (a crash loses nothing written).
        self._fd: int | None = os.open(self.path, _OPEN_FLAGS, 0o666)
        self._write_all([PREAMBLE.pack(MAGIC, *version)])
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
            if got is None or len(got) != n * ITEMSIZE[c.typecode]:
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

        The engine's hot path (a block per flow end every ~0.5 s): the bytes
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
        head = BLOCK.pack(len(prefix) + size, zlib.crc32(rec, zlib.crc32(prefix))) + prefix
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
        self._write_all([BLOCK.pack(len(data), zlib.crc32(data)), data])

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



__all__ = ["FlowWriter"]
