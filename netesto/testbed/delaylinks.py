"""The delay line's release disciplines: each queue's :class:`Link` says when a packet it admits is due.

:class:`Link` holds each packet for a delay (+ jitter) or drops it with a
probability, as netem does. :class:`TraceLink` is a Mahimahi-style
trace-driven link: packets wait in a drop-tail queue and leave at the
delivery opportunities of a trace (:mod:`netesto.linktrace`: 1500 bytes
each, at given milliseconds, looping), then take the link's delay.
Both compute a packet's due time as it arrives, from the arrival and what
the link already holds, so the loop (:mod:`netesto.testbed.delayloop`)
only keeps a heap of due times.
"""

from __future__ import annotations

import bisect
import collections
import math
import random
from dataclasses import dataclass

from netesto.errors import TestbedError
from netesto.linktrace import MTU
from netesto.testbed.delaystats import LinkStats


@dataclass(frozen=True)
class LinkSettings:
    """What one queue does to its packets: one-way delay/jitter in ms, loss probability, order.

    Each packet's hold is ``delay`` plus a uniform draw in [-jitter, +jitter]
    (at least 0), as netem's. Such holds reorder packets, as netem without a
    rate does; ``ordered`` keeps a packet from leaving before the one queued
    ahead of it, as netem with a rate does.
    """

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    ordered: bool = False

    def __post_init__(self) -> None:
        if not (self.delay_ms >= 0 and self.jitter_ms >= 0 and math.isfinite(self.delay_ms + self.jitter_ms)):
            raise TestbedError(f"delay line: delay and jitter must be finite and >= 0, got {self}")
        if not 0.0 <= self.loss <= 1.0:
            raise TestbedError(f"delay line: loss is a probability in [0, 1], got {self.loss}")


class Link:
    """One queue's release discipline: when each packet it admits is due (None: dropped), and its statistics.

    The loop asks nothing else of a link, so another discipline (a delivery
    trace: :class:`TraceLink`) is another ``admit`` that computes a due time
    from the arrival and what the link already holds.
    """

    __slots__ = ("settings", "rng", "stats", "hold_ns", "last_due")

    def __init__(self, settings: LinkSettings, rng: random.Random) -> None:
        self.rng = rng
        self.stats = LinkStats()
        self.last_due = 0
        self.settings = settings
        self.hold_ns = math.ceil(settings.delay_ms * 1e6)

    def configure(self, settings: LinkSettings) -> None:
        """New settings for packets admitted from now on (those held keep their due times)."""
        self.settings = settings
        self.hold_ns = math.ceil(settings.delay_ms * 1e6)

    def lost(self) -> bool:
        """Whether the loss probability takes this packet (counted)."""
        loss = self.settings.loss
        if loss and self.rng.random() < loss:
            self.stats.dropped += 1
            return True
        return False

    def admit(self, arrival_ns: int, size: int = -1) -> int | None:
        """The CLOCK_MONOTONIC ns at which a packet of ``size`` bytes (-1: unknown) that arrived at
        ``arrival_ns`` is due; None to drop it."""
        if self.lost():
            return None
        s = self.settings
        hold = self.hold_ns
        if s.jitter_ms:
            hold = max(0, math.ceil((s.delay_ms + self.rng.uniform(-s.jitter_ms, s.jitter_ms)) * 1e6))
        due = arrival_ns + hold
        if s.ordered and due < self.last_due:
            due = self.last_due
        self.last_due = due
        if due > arrival_ns:
            self.stats.held += 1
        else:
            self.stats.passed += 1
        return due

    def describe(self) -> dict[str, object]:
        """What this link does, for the control socket's readback."""
        return dict(vars(self.settings))


class TraceLink(Link):
    """Packets leave at a trace's delivery opportunities, after a drop-tail queue, then take the delay.

    ``times_ms`` are the trace's opportunity instants (ms, non-decreasing, looping with period
    ``times_ms[-1]``), counted from ``epoch_ns`` (CLOCK_MONOTONIC). As Mahimahi's link: an
    opportunity carries :data:`~netesto.linktrace.MTU` bytes, shared by packets queued by then
    (a longer packet takes several, and leaves at the one carrying its last byte); an
    opportunity the queue leaves unused is lost, so is what remains of one when the queue
    empties; a packet arriving at an opportunity's instant waits for the next. The queue holds
    every admitted packet that has not left yet, at most ``limit_bytes`` bytes and
    ``limit_packets`` packets (0: no limit); a packet that does not fit is dropped. Jitter is
    not applied: a trace link keeps its packets in order.
    """

    __slots__ = ("times_ns", "period_ns", "epoch_ns", "n", "g", "left", "queue", "queued_bytes",
                 "limit_bytes", "limit_packets", "tail_dropped", "delivered", "trace_name")

    def __init__(self, settings: LinkSettings, rng: random.Random, times_ms: list[int], epoch_ns: int, *,
                 limit_bytes: int = 0, limit_packets: int = 0, name: str = "", stats: LinkStats | None = None) -> None:
        super().__init__(settings, rng)
        if stats is not None:
            self.stats = stats
        if not times_ms or times_ms[-1] <= 0:
            raise TestbedError("delay line: a trace needs opportunities and a last timestamp > 0")
        self.times_ns = [t * 1_000_000 for t in times_ms]
        self.period_ns = self.times_ns[-1]
        self.n = len(times_ms)
        self.epoch_ns = epoch_ns
        self.g: int | None = None  # the opportunity the last admitted packet leaves at
        self.left = 0  # bytes that opportunity still carries
        self.queue: collections.deque[tuple[int, int]] = collections.deque()  # (departure ns, bytes)
        self.queued_bytes = 0
        self.limit_bytes = limit_bytes
        self.limit_packets = limit_packets
        self.tail_dropped = 0
        self.delivered = 0  # bytes admitted to leave (they do, at their departures)
        self.trace_name = name

    def _time(self, g: int) -> int:
        loop, i = divmod(g, self.n)
        return self.epoch_ns + loop * self.period_ns + self.times_ns[i]

    def _first_after(self, t: int) -> int:
        loop, within = divmod(t - self.epoch_ns, self.period_ns)
        i = bisect.bisect_right(self.times_ns, within)
        return loop * self.n + i  # i == n is the next loop's first

    def admit(self, arrival_ns: int, size: int = -1) -> int | None:
        if self.lost():
            return None
        size = size if size > 0 else MTU
        queue = self.queue
        while queue and queue[0][0] <= arrival_ns:
            self.queued_bytes -= queue.popleft()[1]
        if ((self.limit_packets and len(queue) >= self.limit_packets)
                or (self.limit_bytes and self.queued_bytes + size > self.limit_bytes)):
            self.tail_dropped += 1
            self.stats.dropped += 1
            return None
        g, left = self.g, self.left
        if g is None or self._time(g) <= arrival_ns:
            g, left = self._first_after(arrival_ns), MTU  # the queue has drained: the next opportunity
        elif left <= 0:
            g, left = g + 1, MTU
        if size <= left:
            left -= size
        else:
            rest = size - left
            k = -(-rest // MTU)
            g, left = g + k, k * MTU - rest
        self.g, self.left = g, left
        departure = self._time(g)
        queue.append((departure, size))
        self.queued_bytes += size
        self.delivered += size
        due = max(departure + self.hold_ns, self.last_due)
        self.last_due = due
        self.stats.held += 1
        return due

    def describe(self) -> dict[str, object]:
        return {**vars(self.settings), "trace": self.trace_name, "opportunities": self.n,
                "period_ms": self.period_ns // 1_000_000, "limit_bytes": self.limit_bytes,
                "limit_packets": self.limit_packets, "tail_dropped": self.tail_dropped,
                "delivered_bytes": self.delivered, "queued_bytes": self.queued_bytes}


def load_times(path: str) -> list[int]:
    """A trace file's timestamps, read fast (the router agent checked the file before naming it)."""
    try:
        with open(path, "rb") as f:
            return [int(w) for w in f.read().split()]
    except (OSError, ValueError) as exc:
        raise TestbedError(f"delay line: cannot read trace {path}: {exc}") from exc


__all__ = ["Link", "LinkSettings", "TraceLink", "load_times"]
