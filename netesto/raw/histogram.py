"""Log-bucketed latency histogram (HDR-like): bounded memory, <= 0.4 % relative error, mergeable.

Values are non-negative integers (the engine records nanoseconds). Values
below ``2 * SUB`` (256) are counted exactly; above, each power-of-two octave
``[2^k, 2^(k+1))`` is split into ``SUB`` (128) equal buckets, so a bucket is
at most 1/128 of its lower bound wide. A percentile is reported as the middle
of the bucket holding the nearest-rank sample (clamped to the exact min/max),
which is within 1/256 (0.4 %) of the exact nearest-rank value. A histogram of
values up to 2^40 ns (18 minutes) has at most 128 * 33 + 256 buckets.
Counting is in Python here; the engine's
:class:`netesto.engine.sampling.histogram.Histogram` counts an ``array('q')`` with its
C extension when it is built. Both give the same histogram.
"""

from __future__ import annotations

import itertools
import math
import operator
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

SUB_BITS = 7
SUB = 1 << SUB_BITS  # buckets per octave
_EXACT = 2 * SUB  # values below this have their own bucket
_SHIFT0 = SUB_BITS + 1  # bit_length of the smallest non-exact value is _SHIFT0 + 1

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def bucket_index(value: int) -> int:
    """The bucket holding ``value`` (>= 0).

    >>> [bucket_index(v) for v in (0, 255, 256, 257, 511, 512)]
    [0, 255, 256, 256, 383, 384]
    """
    if value < _EXACT:
        return value
    shift = value.bit_length() - _SHIFT0
    return SUB * (shift + 1) + (value >> shift) - SUB


def bucket_bounds(index: int) -> tuple[int, int]:
    """``(low, high)`` of a bucket: it holds ``low <= v < high``.

    >>> bucket_bounds(5), bucket_bounds(256), bucket_bounds(384)
    ((5, 6), (256, 258), (512, 516))
    """
    if index < _EXACT:
        return index, index + 1
    shift = index // SUB - 1
    mantissa = index % SUB + SUB
    return mantissa << shift, (mantissa + 1) << shift


@dataclass(frozen=True)
class LatencySummary:
    """Summary statistics of a histogram, in the histogram's unit scaled by ``scale``."""

    count: int
    min: float
    mean: float
    max: float
    p50: float
    p90: float
    p99: float
    p999: float

    def to_dict(self) -> dict[str, float]:
        return {
            "count": self.count,
            "min": self.min,
            "mean": self.mean,
            "max": self.max,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "p999": self.p999,
        }


EMPTY_SUMMARY = LatencySummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


class Histogram:
    """Counts of non-negative integer values in log-spaced buckets."""

    __slots__ = ("counts", "count", "total", "min", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    def record(self, value: int) -> None:
        """Add one value (negative values count as 0)."""
        self.record_many((value,))

    def record_many(self, values: "Iterable[int]") -> None:
        """Add many values (one tight loop: cheaper than :meth:`record` per value)."""
        if isinstance(values, array) and len(values) >= 64 and self._record_batch(values):
            return
        counts = self.counts
        get = counts.get
        n = 0
        total = 0
        low = high = -1
        for value in values:
            if value < 0:
                value = 0
            if value < _EXACT:
                index = value
            else:
                shift = value.bit_length() - _SHIFT0
                index = SUB * (shift + 1) + (value >> shift) - SUB
            counts[index] = get(index, 0) + 1
            n += 1
            total += value
            if low < 0 or value < low:
                low = value
            if value > high:
                high = value
        if n:
            self._add(n, low, high, total)

    def _add(self, n: int, low: int, high: int, total: int) -> None:
        """Account for ``n`` (> 0) values already in the buckets."""
        if self.count == 0:
            self.min, self.max = low, high
        else:
            self.min = min(self.min, low)
            self.max = max(self.max, high)
        self.count += n
        self.total += total

    def _record_batch(self, values: "array[int]") -> bool:
        """Many values at C speed: count them per ``value >> shift``, then bucket the keys.

        ``shift`` is the bucket shift of the smallest value; every larger value
        has a shift at least as large and the same bit length as ``key << shift``,
        so each key falls in exactly the bucket of every value it stands for.
        Latencies cluster, so there are far fewer keys than values. False (and
        nothing recorded) when the batch holds values below the exact range.
        """
        low = min(values)
        if low < _EXACT:
            return False
        high = max(values)
        shift = low.bit_length() - _SHIFT0
        counts = self.counts
        get = counts.get
        for key, n in Counter(map(operator.rshift, values, itertools.repeat(shift))).items():
            value = key << shift
            vshift = value.bit_length() - _SHIFT0
            index = SUB * (vshift + 1) + (value >> vshift) - SUB
            counts[index] = get(index, 0) + n
        self._add(len(values), low, high, sum(values))
        return True

    def merge(self, other: "Histogram") -> None:
        """Add every count of ``other`` to this histogram."""
        if other.count == 0:
            return
        counts = self.counts
        for index, n in other.counts.items():
            counts[index] = counts.get(index, 0) + n
        if self.count == 0:
            self.min, self.max = other.min, other.max
        else:
            self.min = min(self.min, other.min)
            self.max = max(self.max, other.max)
        self.count += other.count
        self.total += other.total

    def clear(self) -> None:
        self.counts = {}
        self.count = self.total = self.min = self.max = 0

    def percentiles(self, qs: Iterable[float]) -> list[float]:
        """Nearest-rank percentiles (``q`` in 0..1), bucket middles clamped to min/max."""
        qs = list(qs)
        if self.count == 0:
            return [0.0] * len(qs)
        ranks = [max(1, math.ceil(q * self.count)) for q in qs]
        order = sorted(range(len(qs)), key=lambda i: ranks[i])
        out = [0.0] * len(qs)
        pos = 0
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            while pos < len(order) and ranks[order[pos]] <= seen:
                low, high = bucket_bounds(index)
                mid = low if high - low == 1 else (low + high - 1) / 2
                out[order[pos]] = float(min(max(mid, self.min), self.max))
                pos += 1
            if pos == len(order):
                break
        return out

    def summary(self, scale: float = 1.0) -> LatencySummary:
        """min/mean/max/p50/p90/p99/p999, each multiplied by ``scale``."""
        if self.count == 0:
            return EMPTY_SUMMARY
        p = self.percentiles(q for _, q in PERCENTILES)
        return LatencySummary(
            self.count,
            self.min * scale,
            self.total / self.count * scale,
            self.max * scale,
            p[0] * scale,
            p[1] * scale,
            p[2] * scale,
            p[3] * scale,
        )

    def to_dict(self) -> dict[str, Any]:
        """A msgpack/JSON-friendly form that :meth:`from_dict` restores (for merging)."""
        return {
            "sub_bits": SUB_BITS,
            "count": self.count,
            "total": self.total,
            "min": self.min,
            "max": self.max,
            "buckets": [[i, n] for i, n in sorted(self.counts.items())],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Histogram":
        if data.get("sub_bits", SUB_BITS) != SUB_BITS:
            raise ValueError(f"histogram with sub_bits {data.get('sub_bits')} (expected {SUB_BITS})")
        hist = cls()
        hist.counts = {int(i): int(n) for i, n in data.get("buckets", ())}
        hist.count = int(data.get("count", sum(hist.counts.values())))
        hist.total = int(data.get("total", 0))
        hist.min = int(data.get("min", 0))
        hist.max = int(data.get("max", 0))
        return hist


__all__ = [
    "EMPTY_SUMMARY",
    "Histogram",
    "LatencySummary",
    "PERCENTILES",
    "SUB",
    "bucket_bounds",
    "bucket_index",
]
