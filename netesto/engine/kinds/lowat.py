"""A stream receiver's low-water mark (SO_RCVLOWAT) when its sender paces, kept in step with what it reads.

A paced sender (bbr, or a flow with a pacing rate) sends one TSO packet at a
time. With the default mark of one byte, the kernel wakes the sleeping reader
for each packet. On a veth pair the packets are queued on the sender's CPU, in
its softirq, so each wakeup is an interprocessor interrupt that the sender's CPU
pays for, and that CPU is the one that limits the flow. A mark of about two
64 KiB packets halves the reader's wakeups. Measured on a 2-vCPU AMD EPYC guest
(kernel 6.18), bbr over a veth pair:
- one flow went from 0.7 of iperf3's goodput to 1.1;
- four flows on one worker went from 0.7 to 1.3 (A/B medians; the scorecard then read
  1.16, and 1.01 beside two busy loops: docs/performance.md).
A 32 KiB mark changed nothing there: every 64 KiB packet is over it.

An unpaced sender (cubic) is a different case. It sends in bursts, and its
reader, rarely sleeping, works through the queue on its own CPU. A mark made
that reader sleep between bursts, which moved the queue's work to the sender's
CPU. It cost cubic 15-21 % of its goodput (one flow and four), so a flow whose sender
does not pace keeps the kernel's default mark.

A mark holds bytes back from the reader, and so from the flow end's byte
counter, which its rows record. To keep that in bounds the mark is at most what
arrives in :data:`SHARE` of a sampling interval, judged from the bytes read since
the last look. A slow flow keeps the one-byte mark. The looks come once a row,
10 to 50 ms apart (:func:`look_every`): when the rate falls, the bytes a mark
still holds are read at the next look, at most a row later, because lowering
the mark wakes a reader that has enough queued (``tcp_set_rcvlowat``). The
kernel also wakes the reader when the window is nearly closed, under memory
pressure, or at the peer's FIN.
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netesto.engine.kinds.flowend import FlowEnd

MARK_MAX = 1 << 17  # bytes: two 64 KiB GSO packets and a margin (64 KiB and 128 KiB measured alike with bbr)
MARK_MIN = 1 << 14  # bytes: a smaller mark would be the default's one byte in all but name
PERIOD = 0.05  # s between two looks at the rate read, at most
PERIOD_MIN = 0.01  # s: the least, for rows this close or closer
SHARE = 1 / 16  # of a sampling interval's bytes, at most, held back by the mark


def mark_for(read_per_s: float, interval: float) -> int:
    """The low-water mark for a reader taking ``read_per_s`` bytes a second, sampled every ``interval`` s
    (0: no rows, then :data:`PERIOD` stands in): 1 (the kernel's default) below :data:`MARK_MIN`, else up
    to :data:`MARK_MAX`."""
    held = int(read_per_s * (interval if interval > 0 else PERIOD) * SHARE)
    return 1 if held < MARK_MIN else min(MARK_MAX, held)


def look_every(interval: float) -> float:
    """Seconds between two looks for rows every ``interval`` s (0: none): one a row, within
    [:data:`PERIOD_MIN`, :data:`PERIOD`]."""
    return min(PERIOD, max(PERIOD_MIN, interval)) if interval > 0 else PERIOD


def paced_sender(end: FlowEnd) -> bool:
    """Whether the far end of ``end``'s flow paces what it sends. Both ends set the flow's congestion
    control (``ca``), so this end's own is the sender's; without one, each end has its namespace's
    default, taken as the same. bbr and its versions pace, and so does any flow given a pacing rate."""
    return end.ca.startswith("bbr") or bool(end.spec.pacing)


class ReadMark:
    """Keeps ``end``'s socket's SO_RCVLOWAT at :func:`mark_for` its read rate when its sender paces
    (:func:`paced_sender`, judged at the first look, when the flow has begun), from :meth:`start` until the
    flow end finishes. Its one pending look then does nothing (a new timer each period, not one more in
    ``end.timers`` each time). The highest mark set goes into the end's summary as ``read_mark`` (bytes;
    1: the kernel's default throughout)."""

    __slots__ = ("end", "sock", "mark", "rx", "at", "interval", "every")

    def __init__(self, end: FlowEnd, sock: socket.socket) -> None:
        self.end = end
        self.sock = sock
        self.mark = 1
        self.rx = end.rx
        self.at = time.monotonic()
        self.interval = float(end.spec.interval or 0)
        self.every = look_every(self.interval)

    def start(self) -> None:
        self.end.extra["read_mark"] = 1
        self.end.loop.call_later(self.every, self._first)

    def _first(self) -> None:
        if not self.end.finished and paced_sender(self.end):
            self._look()

    def _look(self) -> None:
        end = self.end
        if end.finished:
            return
        now = time.monotonic()
        rate = (end.rx - self.rx) / max(now - self.at, 1e-6)
        self.rx, self.at = end.rx, now
        mark = mark_for(rate, self.interval)
        if mark != self.mark:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, mark)
            except OSError:
                return  # closed meanwhile: the flow end is ending
            self.mark = mark
            end.extra["read_mark"] = max(mark, end.extra["read_mark"])
        end.loop.call_at(now + self.every, self._look)


__all__ = ["MARK_MAX", "MARK_MIN", "PERIOD", "PERIOD_MIN", "SHARE", "ReadMark", "look_every", "mark_for",
           "paced_sender"]
