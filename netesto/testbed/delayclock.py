"""The delay line's clocks: kernel packet stamps (CLOCK_REALTIME) mapped onto CLOCK_MONOTONIC, never too early.

The loop schedules on CLOCK_MONOTONIC (a wall-clock step must not move a
release), while the kernel stamps queued packets in CLOCK_REALTIME. The
two differ by an offset that only a clock *step* changes (NTP's slewing
moves both alike). A stamp ``r`` maps to ``r - offset``; for a release never
to come early, the mapped instant must never precede the true one, so the
offset used must never exceed the true one:

* it is sampled as ``realtime`` read *before* ``monotonic`` (the later
  monotonic read makes each sample a lower bound), keeping the largest of
  such samples (the tightest lower bound);
* a step is learnt from a CLOCK_REALTIME timerfd armed with
  ``TFD_TIMER_CANCEL_ON_SET`` (its read fails with ECANCELED once the clock
  was set), checked after each sample. Packets stamped before the step may
  still be unread, so for ``grace_ns`` the smaller of the old and new
  offsets is used: a forward step then makes packets late, never early;
* where there is no such timerfd, any sample above the kept offset by more
  than ``tolerance_ns`` is taken for a step.

The caller also caps each mapped instant at the moment it read the packet
(which is after the packet arrived, whatever a stamp says).
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from typing import Callable

CLOCK_REALTIME = 0
TFD_TIMER_ABSTIME = 1
TFD_TIMER_CANCEL_ON_SET = 2
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = os.O_CLOEXEC
FAR_FUTURE_S = 1 << 40


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class StepWatch:
    """A CLOCK_REALTIME timerfd that reports whether the clock was set (stepped) since the last look."""

    def __init__(self) -> None:
        self.fd = -1
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)
            fd = self._libc.timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd >= 0:
            self.fd = fd
            if not self._arm():
                self.close()

    def _arm(self) -> bool:
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(FAR_FUTURE_S, 0))
        return bool(self._libc.timerfd_settime(self.fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET,
                                               ctypes.byref(spec), None) == 0)

    @property
    def available(self) -> bool:
        return self.fd >= 0

    def stepped(self) -> bool:
        """True once after each step of CLOCK_REALTIME (the timer is re-armed)."""
        if self.fd < 0:
            return False
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno != errno.ECANCELED:
                raise
            self._arm()
            return True
        return False  # the timer itself expired (2^40 s from 1970): nothing stepped

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def sample_offset(realtime: Callable[[], int] = time.time_ns, monotonic: Callable[[], int] = time.monotonic_ns,
                  tries: int = 2) -> int:
    """A lower bound on CLOCK_REALTIME - CLOCK_MONOTONIC in ns: the tightest of ``tries`` samples."""
    best = None
    for _ in range(tries):
        r = realtime()
        m = monotonic()
        if best is None or r - m > best:
            best = r - m
    assert best is not None
    return best


class RealtimeMap:
    """Maps kernel CLOCK_REALTIME stamps to CLOCK_MONOTONIC instants that are never early."""

    def __init__(self, *, grace_ns: int = 1_000_000_000, tolerance_ns: int = 20_000,
                 realtime: Callable[[], int] = time.time_ns, monotonic: Callable[[], int] = time.monotonic_ns,
                 watch: StepWatch | None = None) -> None:
        self.realtime = realtime
        self.monotonic = monotonic
        self.grace_ns = grace_ns
        self.tolerance_ns = tolerance_ns
        self.watch = watch if watch is not None else StepWatch()
        self.kept = sample_offset(realtime, monotonic, tries=5)
        self.old = self.kept
        self.grace_until = 0
        self.steps = 0
        self.offset = self.kept  # what map() subtracts now

    def refresh(self) -> None:
        """Take a sample (once per wake-up of the loop, before mapping what it reads)."""
        sample = sample_offset(self.realtime, self.monotonic)
        now = self.monotonic()
        if self.watch.available:
            stepped = self.watch.stepped()
        else:
            stepped = sample > self.kept + self.tolerance_ns
            if sample < self.kept - self.tolerance_ns:
                self.kept = sample  # a step back (or a late read): a smaller offset is always safe
        if stepped:
            self.steps += 1
            self.old = min(self.old, self.kept) if now < self.grace_until else self.kept
            # Sampled again: the step may have come between the first sample and the look.
            self.kept = sample_offset(self.realtime, self.monotonic)
            self.grace_until = now + self.grace_ns
        elif sample > self.kept:
            self.kept = sample  # a tighter bound on the same offset
        self.offset = min(self.old, self.kept) if now < self.grace_until else self.kept

    def map(self, stamp_ns: int) -> int:
        """The CLOCK_MONOTONIC instant (ns) of a CLOCK_REALTIME stamp, never before the true one."""
        return stamp_ns - self.offset

    def close(self) -> None:
        self.watch.close()


__all__ = ["RealtimeMap", "StepWatch", "sample_offset"]
