"""The engine's sample record: its layout per kind of flow end and the row builder (C or Python).

A sample is one fixed-length record: stamps and counters (:data:`HEAD`), the
raw ``tcp_info`` bytes, for bbr the padded ``tcp_bbr_info``, for RR tests
this interval's latency summary (:data:`LAT`). :data:`LAYOUTS` gives the
:class:`~netesto.raw.nflow.RecordLayout` the ``.nflow`` header declares for
each; :func:`sample_row` builds one row (``fastloop.sample_row`` when the
extension is built and lays rows out the same way, else :func:`sample_row_py`),
:func:`lat_summary` an RR row's latency part (``fastloop.lat_summary``, else
:func:`interval_summary`); ``sample_tick`` (the C tick) builds whole rows, RR
rows with their latency part too, ``sample_end`` one flow end's row at its own instant.
"""

from __future__ import annotations

import math
import socket
import struct
from array import array
from typing import Callable

from netesto.collectors import tcpinfo
from netesto.engine.native import fastloop
from netesto.raw.columns import (
    APP_COLUMNS,
    CC_COLUMNS,
    FLOW_COLUMNS,
    LATENCY_COLUMNS,
    TCP_INFO_COLUMNS,
    TIME_COLUMNS,
)
from netesto.raw.histogram import PERCENTILES, SUB_BITS
from netesto.raw.nflow import RecordLayout

_SIZES = {"B": 1, "I": 4, "Q": 8, "d": 8}

_TCP_INFO = tcpinfo.TCP_INFO
_TCP_CC_INFO = tcpinfo.TCP_CC_INFO
INFO_LEN = tcpinfo.TCP_INFO_LEN
HEAD = struct.Struct("=dd6Q")  # t_wall, t_mono and the six APP_COLUMNS counters
LAT = struct.Struct("=I4x7d")  # lat_count, then lat_min .. lat_p999 (8-byte aligned)
ZERO_LAT = bytes(LAT.size)
GAPS = struct.Struct("=5d")  # first and last sample stamp, gaps between samples: count, min, max
CC_SLOT = 24  # tcp_bbr_info (20 bytes) padded so every record stays 8-byte aligned


def _record_layout(tcp: bool, cc: bool, lat: bool) -> RecordLayout:
    """A sample record: head, [struct tcp_info], [tcp_bbr_info, padded], [latency].

    Only the parts a flow end can have are in its records (a UDP flow has no
    tcp_info, only bbr has cc info, only RR tests latency); the reader zero-fills
    the columns its layout leaves out. Every field is aligned to its size.
    """
    offsets = [(c.name, i * 8) for i, c in enumerate(TIME_COLUMNS + APP_COLUMNS)]
    base = HEAD.size
    parts = [(tcpinfo.TCP_INFO_FIELDS, INFO_LEN)] if tcp else []
    parts += [(tcpinfo.CC_INFO_FIELDS, CC_SLOT)] if cc else []
    for fields, length in parts:
        offsets += [(name, base + off) for name, (off, _) in fields.items()]
        base += length
    if lat:
        offsets += [(c.name, base + (8 * i if i else 0)) for i, c in enumerate(LATENCY_COLUMNS)]
        base += LAT.size
    layout = RecordLayout(base, tuple(offsets))
    assert layout.problem(FLOW_COLUMNS) is None, layout
    return layout


# (tcp, bbr, rr) -> layout; bbr implies tcp
LAYOUTS = {(t, b, r): _record_layout(t, b, r) for t in (False, True) for b in {False, t} for r in (False, True)}
assert {n for n, _ in LAYOUTS[True, True, True].offsets} == {c.name for c in FLOW_COLUMNS}
# The raw-record layouts must agree with the column contract (typecode sizes).
for _col in TCP_INFO_COLUMNS + CC_COLUMNS:
    _fields = tcpinfo.TCP_INFO_FIELDS if _col in TCP_INFO_COLUMNS else tcpinfo.CC_INFO_FIELDS
    assert _fields[_col.name][1] == _SIZES[_col.typecode], _col


def _row_size(parts: int) -> int:
    return HEAD.size + (INFO_LEN if parts else 0) + (CC_SLOT if parts == 2 else 0)


def sample_row_py(rec: bytearray, at: int, sock: socket.socket | None, parts: int, wall: float, mono: float,
                   tx: int, rx: int, trans: int, conns: int, lost: int, reordered: int, last: bytearray,
                   gaps: bytearray) -> int:
    """fastloop.sample_row in Python (see there): one row put at byte ``at`` of ``rec``; options read."""
    if not 0 <= at <= len(rec):
        raise ValueError(f"a row at {at} of a {len(rec)}-byte buffer")
    grow = at + _row_size(parts) - len(rec)
    if grow > 0:
        rec += bytes(grow)
    HEAD.pack_into(rec, at, wall, mono, tx, rx, trans, conns, lost if lost > 0 else 0, reordered)
    first, prev, count, low, high = GAPS.unpack(gaps)
    if count == 0 and first == 0 and prev == 0:
        GAPS.pack_into(gaps, 0, mono, mono, 0, 0, 0)
    else:
        gap = mono - prev
        GAPS.pack_into(gaps, 0, first, mono, count + 1, gap if count == 0 or gap < low else low,
                        gap if count == 0 or gap > high else high)
    if not parts:
        return 0
    read = 0
    if sock is not None:
        try:
            last[:INFO_LEN] = sock.getsockopt(6, _TCP_INFO, INFO_LEN).ljust(INFO_LEN, b"\0")
            read = 1
            if parts == 2:
                last[INFO_LEN:] = sock.getsockopt(6, _TCP_CC_INFO, tcpinfo.CC_INFO_LEN).ljust(CC_SLOT, b"\0")
                read = 2
        except OSError:
            pass  # closed or gone: the row carries the last values
    at += HEAD.size
    size = INFO_LEN + (CC_SLOT if parts == 2 else 0)
    rec[at:at + size] = memoryview(last)[:size]
    return read


_QS = tuple(q for _, q in PERCENTILES)
_OCTAVE_BITS = SUB_BITS + 1  # a value of bit length b >= this + 1 is bucketed by its top this many bits
_EXACT = 1 << _OCTAVE_BITS  # values below have a bucket each


def interval_summary(values: "array[int]", scale: float = 0.001) -> bytes | None:
    """The :data:`LAT` part of a row for one interval's latencies (ns): what the interval's
    :class:`~netesto.raw.histogram.Histogram` would give (``summary(scale)``: count, min, mean,
    max, and each percentile the middle of the bucket holding its nearest-rank value, clamped to
    min/max), the same bytes, from the values sorted instead of counted into buckets and walked:
    a few us for a tick's worth of values where the histogram took ~50-80 us (RR flows, every
    tick). None when a value is negative (the histogram counts it as 0) or there are none.
    """
    n = len(values)
    if not n:
        return None
    ranked = sorted(values)
    low, high = ranked[0], ranked[-1]
    if low < 0:
        return None
    cuts = []
    for q in _QS:
        rank: int = ranked[max(1, math.ceil(q * n)) - 1]
        value: float = rank
        if rank >= _EXACT:  # the middle of its bucket (bucket_index, bucket_bounds), inlined
            shift = rank.bit_length() - _OCTAVE_BITS
            start = rank >> shift << shift
            mid = (start + start + (1 << shift) - 1) / 2
            value = low if mid < low else high if mid > high else mid
        cuts.append(float(value) * scale)
    return LAT.pack(n, low * scale, sum(ranked) / n * scale, high * scale, *cuts)


def _c_lat_agrees() -> bool:
    """Whether the extension's ``lat_summary`` gives :func:`interval_summary`'s bytes (its quantiles,
    bucket and layout: an extension built from other sources may differ) on a few spreads of values."""
    if fastloop.lat_summary is None:
        return False
    probes = (array("q", [7]), array("q", range(0, 3000, 7)), array("q", (v * v * 997 % 10**9 for v in range(1500))))
    return all(fastloop.lat_summary(v) == interval_summary(v) for v in probes)


# The C row builder and tick, unless an extension built from other sources lays rows out differently.
_C_ROWS = fastloop.ROW_LAYOUT == (HEAD.size, INFO_LEN, CC_SLOT)
_C_LAT = _c_lat_agrees()
sample_row: Callable[..., int] = fastloop.sample_row if fastloop.sample_row and _C_ROWS else sample_row_py
# an RR row's latency part, or None (no values, a negative one, or too large for the C twin: the histogram's way)
lat_summary: Callable[["array[int]"], bytes | None] = fastloop.lat_summary if _C_LAT else interval_summary  # type: ignore[assignment]
sample_tick = fastloop.sample_tick if _C_ROWS and _C_LAT and fastloop.sample_setup else None  # set up with FlowEnd
# one flow end's row at its own instant (Sampler.hot), where the C tick is used
sample_end = fastloop.sample_end if sample_tick is not None else None


__all__ = ["CC_SLOT", "GAPS", "HEAD", "INFO_LEN", "LAT", "LAYOUTS", "ZERO_LAT", "interval_summary", "lat_summary",
           "sample_end", "sample_row", "sample_row_py", "sample_tick"]
