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
The format's fixed parts are in :mod:`~netesto.raw.nflow_format`, the writer
in :mod:`~netesto.raw.nflow_writer`, the reader in
:mod:`~netesto.raw.nflow_reader`; this module is their public face.
"""

from __future__ import annotations

from netesto.raw.nflow_format import FORMAT_VERSION, MAGIC, SUFFIX, Column, RecordLayout
from netesto.raw.nflow_reader import RawFlow, decode_flow, read_flow
from netesto.raw.nflow_writer import FlowWriter

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
