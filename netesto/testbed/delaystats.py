"""The delay line's per-packet statistics: what each link held, dropped and added beyond its delay.

Every released packet adds one sample, its *added delay*: the moment its
verdict had reached the kernel (the clock read after the ``send`` that
carried it returned, so never before it) minus the moment it was due (its
arrival stamp plus its own hold). Samples go into a histogram: 1 us bins
up to 1 ms, then bins 1 % wide; a percentile is reported as the upper edge
of its bin, so it is never below the true value, and by at most 1 us or 1 %.
The maximum and the mean are exact. A packet whose verdict was sent before
it was due counts as ``early`` (the loop never does that; the count says so
from the clocks it read, not from its intent).
"""

from __future__ import annotations

import math
import time
from typing import Any

LINEAR_BINS = 1000  # 1 us each: 0 .. 1 ms
LOG_STEP = 100  # bins per factor e (about 1 % wide) above 1 ms


def bin_of(added_ns: int) -> int:
    """The histogram bin of an added delay (ns, >= 0)."""
    us = added_ns // 1000
    if us < LINEAR_BINS:
        return int(us)
    return LINEAR_BINS + int(math.log(us / LINEAR_BINS) * LOG_STEP)


def bin_top_ns(b: int) -> int:
    """The upper edge of bin ``b`` in ns: every value in it is below this."""
    if b < LINEAR_BINS:
        return (b + 1) * 1000
    return math.ceil(LINEAR_BINS * math.exp((b - LINEAR_BINS + 1) / LOG_STEP)) * 1000 + 1000


class LinkStats:
    """Counts and added-delay histogram of one queue (one link direction) since the last reset."""

    __slots__ = ("held", "passed", "dropped", "early", "unstamped", "capped", "hist", "sum_ns", "max_ns", "since")

    def __init__(self) -> None:
        self.held = 0  # released after a hold > 0
        self.passed = 0  # released with a hold of 0 (delay 0, or jitter drew 0)
        self.dropped = 0  # the loss probability's drops
        self.early = 0  # verdict sent before the packet was due (must stay 0)
        self.unstamped = 0  # no kernel stamp: held from when it was read (late by its wait in the socket)
        self.capped = 0  # a stamp after the moment it was read (another clock's): held from the read
        self.hist: dict[int, int] = {}
        self.sum_ns = 0
        self.max_ns = 0
        self.since = time.monotonic()

    def add(self, added_ns: int) -> None:
        """One released packet whose verdict reached the kernel ``added_ns`` (>= 0) after it was due."""
        b = bin_of(added_ns)
        self.hist[b] = self.hist.get(b, 0) + 1
        self.sum_ns += added_ns
        if added_ns > self.max_ns:
            self.max_ns = added_ns

    def merge(self, other: "LinkStats") -> None:
        for name in ("held", "passed", "dropped", "early", "unstamped", "capped", "sum_ns"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for b, n in other.hist.items():
            self.hist[b] = self.hist.get(b, 0) + n
        self.max_ns = max(self.max_ns, other.max_ns)
        self.since = min(self.since, other.since)

    def percentile_ns(self, p: float) -> int | None:
        """The ``p``-th percentile of the added delay (upper edge of its bin), None without samples."""
        total = sum(self.hist.values())
        if not total:
            return None
        rank = max(1, math.ceil(p / 100 * total))
        seen = 0
        for b in sorted(self.hist):
            seen += self.hist[b]
            if seen >= rank:
                return min(bin_top_ns(b), self.max_ns)  # every sample is <= max: still an upper bound
        return self.max_ns

    def summary(self) -> dict[str, Any]:
        """The numbers a reader wants: counts, added delay p50/p99/max/mean in ms."""
        released = sum(self.hist.values())

        def ms(ns: int | None) -> float | None:
            return None if ns is None else round(ns / 1e6, 4)

        return {
            "released": released, "held": self.held, "passed": self.passed, "dropped": self.dropped,
            "early": self.early, "unstamped": self.unstamped, "capped": self.capped,
            "added_p50_ms": ms(self.percentile_ns(50)), "added_p99_ms": ms(self.percentile_ns(99)),
            "added_max_ms": ms(self.max_ns) if released else None,
            "added_mean_ms": ms(self.sum_ns // released) if released else None,
            "seconds": round(time.monotonic() - self.since, 3),
        }


def total(links: dict[int, LinkStats]) -> LinkStats:
    """Every link's statistics summed into one."""
    out = LinkStats()
    for st in links.values():
        out.merge(st)
    return out


def kernel_counters(path: str = "/proc/net/netfilter/nfnetlink_queue") -> dict[int, dict[str, int]]:
    """This namespace's nfnetlink_queue counters per queue: packets waiting in the kernel, and those it
    dropped because its queue was full or our socket's buffer was (those never reached the loop)."""
    out: dict[int, dict[str, int]] = {}
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 8:
                    out[int(fields[0])] = {"waiting": int(fields[2]), "queue_dropped": int(fields[5]),
                                           "user_dropped": int(fields[6])}
    except OSError:
        pass
    return out


__all__ = ["LinkStats", "bin_of", "bin_top_ns", "kernel_counters", "total"]
