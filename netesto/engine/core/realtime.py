"""A worker's real-time hold: SCHED_FIFO while one of its flows is about to start."""

from __future__ import annotations

import os


class RealtimeHold:
    """SCHED_FIFO (priority 1) for this process while any flow is about to start.

    A flow takes the hold :data:`~netesto.engine.kinds.client.RT_LEAD` before its
    start instant, so the loop's timer wakes on time on a busy host (a normal
    task's wake-up can be tens of ms late there), and lets go once its start
    marker is out. Without the privilege nothing changes; a policy somebody
    chose for us (e.g. chrt) is left alone.
    """

    def __init__(self) -> None:
        self.holders: set[object] = set()
        self._saved = -1  # the policy to go back to; -1: we changed nothing

    def acquire(self, holder: object) -> None:
        if not self.holders:
            try:
                if os.sched_getscheduler(0) == os.SCHED_OTHER:
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
                    self._saved = os.SCHED_OTHER
            except (OSError, AttributeError):
                self._saved = -1
        self.holders.add(holder)

    def release(self, holder: object) -> None:
        if holder not in self.holders:
            return
        self.holders.discard(holder)
        if not self.holders and self._saved != -1:
            try:
                os.sched_setscheduler(0, self._saved, os.sched_param(0))
            except OSError:
                pass
            self._saved = -1


__all__ = ["RealtimeHold"]
