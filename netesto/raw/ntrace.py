"""The raw per-flow kernel trace (``.ntrace``): tcp_probe, retransmission and congestion-state events.

Next to a flow end's ``.nflow`` (``flows/<flow_id>.<side>.ntrace``), in the same
container: the ``.nflow`` magic and version words, then checksummed msgpack
blocks (:mod:`netesto.raw.nflow`). A ``header`` block (``kind: "ntrace"``) names
the tables and their columns; ``events`` blocks hold ``n`` rows of one table as
packed columns; a ``summary`` block ends the file. A damaged or cut block loses
only itself, as in ``.nflow``. Only the standard library and msgpack are
needed: the agent writes these.
"""

from __future__ import annotations

import contextlib
import os
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import msgpack

from netesto.errors import RawDataError
from netesto.raw.nflow_format import BLOCK, ITEMSIZE, MAGIC, PREAMBLE, Column
from netesto.raw.nflow_reader import _split_blocks, read_bytes

SUFFIX = ".ntrace"
KIND = "ntrace"
FORMAT = (1, 0)
BLOCK_ROWS = 65536
_TIME = (Column("t_wall", "d", "s"), Column("t_mono", "d", "s"))
# table -> columns, in file order
TABLES: dict[str, tuple[Column, ...]] = {
    "probe": _TIME + (  # tcp:tcp_probe, one per segment the socket took in while established
        Column("snd_cwnd", "I", "packets"),
        Column("ssthresh", "I", "packets"),
        Column("srtt", "I", "us"),
        Column("snd_nxt", "I", "1"),  # sequence numbers as the kernel has them (32 bits, wrapping)
        Column("snd_una", "I", "1"),
        Column("snd_wnd", "I", "bytes"),
        Column("rcv_wnd", "I", "bytes"),
        Column("data_len", "I", "bytes"),  # payload of the segment that came in (0: a pure ACK)
    ),
    "retransmit": _TIME + (  # tcp:tcp_retransmit_skb
        Column("state", "B", "1"),
        Column("err", "i", "1"),  # 0: sent; negative errno: the retransmission failed
    ),
    "cong_state": _TIME + (  # tcp:tcp_cong_state_set: the new ca_state (0 open .. 4 loss)
        Column("cong_state", "B", "1"),
    ),
}


@dataclass
class RawTrace:
    """A decoded ``.ntrace`` file: ``tables[name][column]`` arrays, units alike."""

    path: str
    header: dict[str, Any]
    tables: dict[str, dict[str, array]] = field(default_factory=dict)
    units: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    truncated: bool = False
    damaged: list[str] = field(default_factory=list)

    def rows(self, table: str) -> int:
        cols = self.tables.get(table) or {}
        first = next(iter(cols.values()), None)
        return len(first) if first is not None else 0


def write_trace(path: str | os.PathLike[str], tables: Mapping[str, Mapping[str, Sequence[Any]]],
                meta: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
    """Write a whole trace: ``tables[name][column]`` values (every column of :data:`TABLES` of each
    table given, the same length), in blocks of :data:`BLOCK_ROWS` rows; written to a temporary
    name and renamed, so a reader never sees half a file."""
    target = os.fspath(path)
    tmp = target + ".tmp"
    header = dict(meta, type="header", kind=KIND, format=list(FORMAT), byteorder=sys.byteorder,
                  tables={name: [[c.name, c.typecode, c.unit] for c in cols] for name, cols in TABLES.items()})
    try:
        _write(tmp, tables, header, summary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, target)


def _write(tmp: str, tables: Mapping[str, Mapping[str, Sequence[Any]]], header: dict[str, Any],
           summary: Mapping[str, Any], target: str) -> None:
    with open(tmp, "wb") as fh:
        fh.write(PREAMBLE.pack(MAGIC, *FORMAT))
        _block(fh, header)
        for name, values in tables.items():
            cols = TABLES[name]
            n = len(values[cols[0].name]) if cols[0].name in values else 0
            for c in cols:
                if len(values.get(c.name, ())) != n:
                    raise RawDataError(f"table {name}: column {c.name} has {len(values.get(c.name, ()))} "
                                       f"values, expected {n}", path=target)
            for lo in range(0, n, BLOCK_ROWS):
                hi = min(n, lo + BLOCK_ROWS)
                packed = {c.name: _packed(c, values[c.name], lo, hi) for c in cols}
                _block(fh, {"type": "events", "table": name, "n": hi - lo, "cols": packed})
        _block(fh, dict(summary, type="summary"))


def _packed(col: Column, values: Sequence[Any], lo: int, hi: int) -> bytes:
    if isinstance(values, array) and values.typecode == col.typecode:
        return values[lo:hi].tobytes()
    return array(col.typecode, values[lo:hi]).tobytes()


def _block(fh: Any, payload: dict[str, Any]) -> None:
    data = msgpack.packb(payload, use_bin_type=True)
    fh.write(BLOCK.pack(len(data), zlib.crc32(data)))
    fh.write(data)


def read_trace(path: str | os.PathLike[str]) -> RawTrace:
    """Decode a ``.ntrace`` file (a cut or damaged block loses only itself; a bad header raises
    :class:`RawDataError` naming the file)."""
    path = os.fspath(path)
    data = read_bytes(path)
    if len(data) < PREAMBLE.size or PREAMBLE.unpack_from(data)[0] != MAGIC:
        raise RawDataError("not a netesto trace file (bad magic)", path=path)
    _, major, minor = PREAMBLE.unpack_from(data)
    if major != FORMAT[0]:
        raise RawDataError(f"trace format {major}.{minor} is not readable by this netesto (reads {FORMAT[0]}.x)",
                           path=path)
    blocks, truncated, damaged = _split_blocks(data, PREAMBLE.size, path)
    if not blocks or blocks[0].get("type") != "header" or blocks[0].get("kind") != KIND:
        raise RawDataError("first block is not a trace header", path=path)
    header = blocks[0]
    trace = RawTrace(path, header, truncated=truncated, damaged=damaged)
    try:
        declared = {name: [Column(str(n), str(t), str(u)) for n, t, u in cols]
                    for name, cols in dict(header["tables"]).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise RawDataError(f"bad table list in header: {exc}", path=path) from exc
    for name, cols in declared.items():
        trace.tables[name] = {c.name: array(c.typecode) for c in cols}
        trace.units[name] = {c.name: c.unit for c in cols}
    swap = header.get("byteorder", sys.byteorder) != sys.byteorder
    for index, block in enumerate(blocks[1:], start=1):
        kind = block.get("type")
        if kind == "summary":
            trace.summary = {k: v for k, v in block.items() if k != "type"}
        elif kind == "events" and block.get("table") in declared:
            _add_events(trace, declared[block["table"]], block, swap, index)
        elif kind != "events":  # events of a table this reader does not know: skipped (a newer minor)
            raise RawDataError(f"block {index}: unknown type {kind!r}", path=path)
    return trace


def _add_events(trace: RawTrace, cols: Sequence[Column], block: dict[str, Any], swap: bool, index: int) -> None:
    n, packed = block.get("n"), block.get("cols")
    if not isinstance(n, int) or not isinstance(packed, dict):
        raise RawDataError(f"block {index}: malformed events block", path=trace.path)
    parts = {}
    for col in cols:
        part = array(col.typecode)
        raw = packed.get(col.name)
        if raw is not None:
            try:
                part.frombytes(raw)
            except (TypeError, ValueError):
                raise RawDataError(f"block {index}: column {col.name!r} is malformed", path=trace.path) from None
        else:
            part.frombytes(bytes(n * ITEMSIZE[col.typecode]))
        if swap:
            part.byteswap()
        if len(part) != n:
            raise RawDataError(f"block {index}: column {col.name!r} has {len(part)} values, expected {n}",
                               path=trace.path)
        parts[col.name] = part
    for name, part in parts.items():
        trace.tables[block["table"]][name].extend(part)


__all__ = ["BLOCK_ROWS", "FORMAT", "KIND", "RawTrace", "SUFFIX", "TABLES", "read_trace", "write_trace"]
