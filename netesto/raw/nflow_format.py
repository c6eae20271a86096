"""The fixed parts of the ``.nflow`` format: magic, version, block framing, columns, record layouts.

What the header of a file declares and every block is framed by (the whole
format is described in :mod:`netesto.raw.nflow`); the writer and the reader
both follow it.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from typing import Sequence

MAGIC = b"NETESTO\x00"
FORMAT_VERSION = (1, 1)  # the newest written and read; files without ``records`` blocks say (1, 0)
COLUMNS_ONLY = (1, 0)
SUFFIX = ".nflow"
MAX_BLOCK = 64 * 1024 * 1024
PREAMBLE = struct.Struct("<8sHH")  # magic, version major, minor
BLOCK = struct.Struct("<II")  # a block's length and crc32
TYPECODES = frozenset("bBhHiIlLqQfd")
ITEMSIZE = {tc: array(tc).itemsize for tc in TYPECODES}


@dataclass(frozen=True)
class Column:
    """One sampled variable: name, :mod:`array` typecode, unit text."""

    name: str
    typecode: str
    unit: str = ""

    def __post_init__(self) -> None:
        if self.typecode not in TYPECODES:
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
            size = ITEMSIZE[tc]
            if not isinstance(off, int) or off < 0 or off % size or off + size > self.length:
                return f"column {name!r} at record offset {off!r} is misaligned or out of range"
        return None


__all__ = [
    "BLOCK",
    "COLUMNS_ONLY",
    "Column",
    "FORMAT_VERSION",
    "ITEMSIZE",
    "MAGIC",
    "MAX_BLOCK",
    "PREAMBLE",
    "RecordLayout",
    "SUFFIX",
    "TYPECODES",
]
