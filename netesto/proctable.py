"""The process table as Linux's /proc shows it: state, parent, start, environment, children, signals.

One reader for the agent, which stops what an agent before it left running
(:mod:`netesto.agent.leftovers`), and for the suite, which fails a test that leaves a process behind.
A pid names a process only with its start time: a pid is reused once its process is gone.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

TICKS = os.sysconf("SC_CLK_TCK")


class Stat(NamedTuple):
    state: str  # R, S, D, Z, ...
    parent: int
    start: int  # clock ticks since boot (:func:`now`)


def now() -> int:
    """The clock of :attr:`Stat.start` (ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * TICKS)


def read(pid: int, name: str) -> bytes:
    """/proc/PID/NAME; empty when the process is gone or hides it."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def stat(pid: int) -> Stat | None:
    """``pid``'s state, parent and start; None once it is gone."""
    data = read(pid, "stat")
    if not data:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return Stat(fields[0].decode(), int(fields[1]), int(fields[19]))


def pids() -> list[int]:
    """Every process this PID namespace shows."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def alive(pid: int) -> bool:
    """``pid`` runs: neither gone nor a zombie (which only its parent can take away)."""
    st = stat(pid)
    return st is not None and st.state != "Z"


def identity(pid: int) -> str:
    """``PID.START``, naming one process for as long as the machine runs; empty once it is gone."""
    st = stat(pid)
    return "" if st is None else f"{pid}.{st.start}"


def pid_of(ident: str) -> int:
    """The pid an :func:`identity` names."""
    return int(ident.partition(".")[0])


def runs(ident: str) -> bool:
    """Whether the process an :func:`identity` named still runs (the same pid, started at the same tick)."""
    pid, _, start = ident.partition(".")
    if not (pid.isdigit() and start.isdigit()):
        return False
    st = stat(int(pid))
    return st is not None and st.state != "Z" and st.start == int(start)


def environ(pid: int) -> list[bytes]:
    """The environment ``pid`` started with, as ``NAME=value`` entries."""
    return read(pid, "environ").split(b"\0")


def env_value(pid: int, name: str) -> str | None:
    """The value of ``name`` in the environment ``pid`` started with; None without it."""
    key = name.encode() + b"="
    for entry in environ(pid):
        if entry.startswith(key):
            return entry[len(key):].decode(errors="replace")
    return None


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (any of its threads); none once it is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [int(child) for task in tasks for child in read(pid, f"task/{task}/children").split()]


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    return [pid] + [p for child in children(pid) for p in tree(child)]


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, its parent's parent, ... up to PID 1."""
    found: list[int] = []
    st = stat(pid)
    while st is not None and st.parent > 0 and st.parent not in found:
        found.append(st.parent)
        st = stat(st.parent)
    return found


def status(pid: int) -> dict[str, str]:
    """/proc/PID/status as a dict ("State", "SigCgt", ...); empty once it is gone."""
    return {k: v.strip() for k, _, v in (line.partition(":") for line in read(pid, "status").decode().splitlines())}


def command(pid: int, limit: int = 300) -> str:
    """``pid``'s command line, its arguments joined by spaces, at most ``limit`` characters."""
    return read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()[:limit]


def describe(pid: int) -> str:
    """What ``pid`` runs and how it stands with its signals (pending, blocked, ignored, caught)."""
    st = status(pid)
    sig = " ".join(f"{k}={st.get(k, '?')}" for k in ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))
    wchan = read(pid, "wchan").decode(errors="replace")
    return f"pid {pid}: {command(pid)} ({sig}; wchan {wchan or '?'})"


__all__ = ["Stat", "TICKS", "alive", "ancestors", "children", "command", "describe", "env_value", "environ",
           "identity", "now", "pid_of", "pids", "read", "runs", "stat", "status", "tree"]
