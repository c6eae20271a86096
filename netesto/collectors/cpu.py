"""CPU utilisation of a process (and its descendants) and of the whole host, from /proc.

:class:`ProcessCpu` reads ``/proc/<pid>/stat`` utime+stime (plus the
cutime/cstime of children already reaped, plus every live descendant) and
reports percent of ONE core over a window, as top does (200 % = two cores
busy). :class:`HostCpu` reads the ``cpu`` line of /proc/stat and reports
the busy percent of ALL cores (100 % = every core busy), like iostat -c.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from netesto.errors import TrafficError

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcTimes:
    """CPU seconds of one process: its own and its reaped children's."""

    utime: float
    stime: float
    cutime: float
    cstime: float
    ppid: int

    @property
    def total(self) -> float:
        return self.utime + self.stime + self.cutime + self.cstime


def parse_pid_stat(text: str) -> ProcTimes:
    """Times from the text of ``/proc/<pid>/stat`` (the name may contain spaces and parens).

    >>> parse_pid_stat("42 (a b) S 1 42 42 0 -1 0 0 0 0 0 150 50 10 30 20 0").total
    2.4
    """
    rest = text[text.rindex(")") + 2 :].split()
    # fields after the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17)
    utime, stime, cutime, cstime = (int(rest[i]) / CLK_TCK for i in (11, 12, 13, 14))
    return ProcTimes(utime, stime, cutime, cstime, ppid=int(rest[1]))


def read_pid_times(pid: int) -> ProcTimes:
    try:
        return parse_pid_stat((PROC / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError) as exc:
        raise TrafficError(f"cannot read CPU times of process {pid}: {exc}") from exc


def descendants(pid: int) -> list[int]:
    """Live descendant pids of ``pid`` (one scan of /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            ppid = parse_pid_stat((PROC / entry / "stat").read_text()).ppid
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class ProcessCpu:
    """Percent of one core used by ``pid`` (and, with ``children``, its descendants).

    Call :meth:`sample` to close a window: it returns the percent since the
    previous call (or since construction). Times of descendants that exit
    between samples are not lost: their parent's cutime/cstime includes them
    once reaped.
    """

    def __init__(self, pid: int, *, children: bool = True) -> None:
        self.pid = pid
        self.children = children
        self._last_cpu = self._cpu_seconds()
        self._last_t = time.monotonic()
        self._start_cpu, self._start_t = self._last_cpu, self._last_t

    def _cpu_seconds(self) -> float:
        own = read_pid_times(self.pid)
        if not self.children:
            return own.utime + own.stime
        total = own.total
        for child in descendants(self.pid):
            try:
                t = read_pid_times(child)
            except TrafficError:
                continue  # exited since the scan
            total += t.total  # its cutime holds grandchildren it has reaped
        return total

    def sample(self) -> float:
        """Percent of one core over the window since the previous sample."""
        cpu, now = self._cpu_seconds(), time.monotonic()
        pct = 100.0 * (cpu - self._last_cpu) / max(now - self._last_t, 1e-9)
        self._last_cpu, self._last_t = cpu, now
        return max(pct, 0.0)

    def overall(self) -> float:
        """Percent of one core since construction (does not close a window)."""
        cpu, now = self._cpu_seconds(), time.monotonic()
        return max(100.0 * (cpu - self._start_cpu) / max(now - self._start_t, 1e-9), 0.0)


@dataclass(frozen=True)
class CpuTimes:
    """The /proc/stat ``cpu`` line, in clock ticks summed over all cores."""

    busy: int
    idle: int  # idle + iowait

    @property
    def total(self) -> int:
        return self.busy + self.idle


def parse_cpu_line(text: str, name: str = "cpu") -> CpuTimes:
    """Busy and idle ticks of ``name`` (``cpu`` = all cores, ``cpu0``...) in /proc/stat text.

    guest/guest_nice are already counted in user/nice and are left out.

    >>> parse_cpu_line("cpu  10 0 5 80 5 0 0 0 0 0\\n")
    CpuTimes(busy=15, idle=85)
    """
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == name:
            v = [int(x) for x in parts[1:9]] + [0] * (8 - len(parts[1:9]))
            user, nice, system, idle, iowait, irq, softirq, steal = v
            return CpuTimes(user + nice + system + irq + softirq + steal, idle + iowait)
    raise TrafficError(f"/proc/stat has no {name!r} line")


def host_busy_percent(before: CpuTimes, after: CpuTimes) -> float:
    """Busy percent of all cores between two readings."""
    total = after.total - before.total
    return 100.0 * (after.busy - before.busy) / total if total > 0 else 0.0


class HostCpu:
    """Busy percent of all cores (or one, ``name="cpu1"``) between samples."""

    def __init__(self, name: str = "cpu") -> None:
        self.name = name
        self._last = self._read()
        self._start = self._last

    def _read(self) -> CpuTimes:
        return parse_cpu_line((PROC / "stat").read_text(), self.name)

    def sample(self) -> float:
        now = self._read()
        pct = host_busy_percent(self._last, now)
        self._last = now
        return pct

    def overall(self) -> float:
        return host_busy_percent(self._start, self._read())


__all__ = [
    "CpuTimes",
    "HostCpu",
    "ProcTimes",
    "ProcessCpu",
    "descendants",
    "host_busy_percent",
    "parse_cpu_line",
    "parse_pid_stat",
    "read_pid_times",
]
