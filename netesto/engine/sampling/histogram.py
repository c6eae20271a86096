"""The engine's latency histogram: :class:`netesto.raw.histogram.Histogram` counted in C when it can be.

An ``array('q')`` batch goes to the optional extension's ``hist_record`` (a
few ns a value against ~100-150 in Python); anything else, or an engine
without the extension, takes the pure-Python path. Both give the same
histogram, bit for bit (``tests/engine/test_histogram_fast.py``).
"""

from __future__ import annotations

from array import array
from typing import Iterable

from netesto.engine.native import fastloop
from netesto.raw import histogram as raw

# The C counter of an int64 array, or None for the pure-Python path (tests switch it to compare both).
_fast_record = fastloop.hist_record


class Histogram(raw.Histogram):
    """A histogram whose int64 batches are counted by the C extension when it is built."""

    __slots__ = ()

    def record_many(self, values: "Iterable[int]") -> None:
        if (_fast_record is not None and isinstance(values, array)
                and values.typecode in "ql" and values.itemsize == 8):
            got = _fast_record(values, self.counts)
            if got is not None:
                self._add(len(values), *got)
            return
        super().record_many(values)


__all__ = ["Histogram"]
