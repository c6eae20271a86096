"""The kernel's trace ring buffer as ``trace_pipe_raw`` hands it out: sub-buffer pages, event formats.

A read of ``per_cpu/cpuN/trace_pipe_raw`` gives one sub-buffer: a header
(``events/header_page``: a u64 timestamp, a ``local_t`` commit word holding the
data's length and two flags for events the writer lost before this page) and
the events, each a 4-byte header (``events/header_event``: 5 bits of type or
length, 27 bits of time delta) and its payload, whose layout
``events/<group>/<event>/format`` gives. These are pure functions over bytes
(tested on pages captured from a real kernel); :mod:`netesto.collectors.tracefs`
reads them.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Iterator

from netesto.errors import TrafficError

TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP = 29, 30, 31
MAX_DATA_TYPE_LEN = 28
TS_SHIFT = 27
TS_MASK = (1 << TS_SHIFT) - 1
COMMIT_MASK = (1 << 27) - 1  # the commit word's length bits (libtraceevent's kbuffer)
MISSED_EVENTS, MISSED_STORED = 1 << 31, 1 << 30
ABS_TS_MASK = (1 << 59) - 1  # an absolute stamp holds the low 59 bits; the page's stamp the rest
_U32 = struct.Struct("<I")
_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<signed>\d)")


@dataclass(frozen=True)
class PageLayout:
    """Where a sub-buffer page keeps its stamp, commit word and data (``events/header_page``)."""

    ts_offset: int = 0
    commit_offset: int = 8
    commit_size: int = 8
    data_offset: int = 16

    @classmethod
    def parse(cls, text: str) -> "PageLayout":
        """From ``events/header_page``'s text."""
        fields = {name: (off, size) for name, off, size, _, _ in _fields(text)}
        try:
            return cls(fields["timestamp"][0], fields["commit"][0], fields["commit"][1], fields["data"][0])
        except KeyError as exc:
            raise TrafficError(f"events/header_page has no {exc.args[0]!r} field: {text[:200]!r}") from None


@dataclass(frozen=True)
class EventFormat:
    """One event's ``format`` file: its id and its fields as (offset, size, signed, array)."""

    name: str
    id: int
    fields: dict[str, tuple[int, int, bool, bool]]

    @classmethod
    def parse(cls, text: str) -> "EventFormat":
        """From ``events/<group>/<event>/format``'s text."""
        name = re.search(r"^name:\s*(\S+)", text, re.M)
        ident = re.search(r"^ID:\s*(\d+)", text, re.M)
        if name is None or ident is None:
            raise TrafficError(f"not an event format (no name or ID): {text[:200]!r}")
        fields = {fname: (off, size, signed, is_array) for fname, off, size, signed, is_array in _fields(text)}
        return cls(name.group(1), int(ident.group(1)), fields)

    def struct(self, names: tuple[str, ...]) -> tuple[struct.Struct, tuple[str, ...]]:
        """A little-endian Struct unpacking ``names`` (scalars and byte arrays) from a payload, in
        offset order with padding between them, and the names in that order."""
        missing = [n for n in names if n not in self.fields]
        if missing:
            raise TrafficError(f"event {self.name} has no field {', '.join(missing)} on this kernel "
                               f"(it has {', '.join(self.fields)})")
        fmt, pos, order = "<", 0, []
        for name in sorted(names, key=lambda n: self.fields[n][0]):
            off, size, signed, is_array = self.fields[name]
            if off > pos:
                fmt += f"{off - pos}x"
            fmt += f"{size}s" if is_array else _code(size, signed)
            pos = off + size
            order.append(name)
        return struct.Struct(fmt), tuple(order)


def _code(size: int, signed: bool) -> str:
    code = {1: "b", 2: "h", 4: "i", 8: "q"}.get(size)
    if code is None:
        return f"{size}s"  # an array: its bytes
    return code if signed else code.upper()


def _fields(text: str) -> Iterator[tuple[str, int, int, bool, bool]]:
    for m in _FIELD.finditer(text):
        decl = m.group("decl").strip()
        name = decl.split()[-1].split("[")[0].lstrip("*")
        yield name, int(m.group("offset")), int(m.group("size")), m.group("signed") == "1", "[" in decl


@dataclass
class PageEvents:
    """The events of one page: ``(timestamp ns, payload offset, payload length)`` each, and the
    events the writer reported lost before it (``-1``: some, count unknown)."""

    events: list[tuple[int, int, int]]
    missed: int = 0


def page_events(page: bytes | memoryview, layout: PageLayout = PageLayout()) -> PageEvents:
    """Walk one sub-buffer page (see the module docstring).

    A padding event with no time delta ends the data; one with a delta is an
    event the kernel discarded after writing it (a filter's verdict): skipped.
    """
    fmt = "<Q" if layout.commit_size == 8 else "<I"
    (ts,) = struct.unpack_from("<Q", page, layout.ts_offset)
    (commit,) = struct.unpack_from(fmt, page, layout.commit_offset)
    size = commit & COMMIT_MASK
    start = layout.data_offset
    end = min(start + size, len(page))
    missed = 0
    if commit & MISSED_EVENTS:
        missed = -1
        if commit & MISSED_STORED and end + layout.commit_size <= len(page):
            (missed,) = struct.unpack_from(fmt, page, end)
    out: list[tuple[int, int, int]] = []
    pos = start
    unpack = _U32.unpack_from
    while pos + 4 <= end:
        (word,) = unpack(page, pos)
        kind, delta = word & 31, word >> 5
        if kind == 0:  # length in the next word, which counts itself
            (length,) = unpack(page, pos + 4)
            ts += delta
            out.append((ts, pos + 8, length - 4))
            pos += 4 + length
        elif kind <= MAX_DATA_TYPE_LEN:
            ts += delta
            out.append((ts, pos + 4, kind * 4))
            pos += 4 + kind * 4
        elif kind == TYPE_TIME_EXTEND:
            (high,) = unpack(page, pos + 4)
            ts += delta + (high << TS_SHIFT)
            pos += 8
        elif kind == TYPE_TIME_STAMP:
            (high,) = unpack(page, pos + 4)
            ts = (ts & ~ABS_TS_MASK) | (delta + (high << TS_SHIFT))
            pos += 8
        else:  # padding
            if delta == 0:
                break
            (length,) = unpack(page, pos + 4)
            pos += 4 + length
    return PageEvents(out, missed)


__all__ = ["EventFormat", "PageEvents", "PageLayout", "page_events"]
