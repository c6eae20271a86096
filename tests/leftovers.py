"""Processes a test left running: orphans it started, found by its run's mark, stopped and named.

A process whose parent is gone (an agent SIGKILLed at teardown, a server it had started) should have gone
with it. One that is still there, started during the test and marked as this run's (:data:`MARK` in its
environment, or the run's temporary directory in its command line), is a leak: the test fails with what the
process was and what it was doing with its signals, and the process is killed. :func:`tied_to_a_parent` starts a
process as the agent does, with a parent a test can kill, to show that it ends even when its death signal does
not end it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

MARK = "NETESTO_TEST_WORKER"  # set in each pytest process; every process it starts inherits it
# Orphans by design: chromium's crash handlers leave their parent as they start and end with the browser,
# which the page tests share until the session ends (tests/plots/browser.py).
BY_DESIGN = {b"chrome_crashpad_handler"}
TICKS = os.sysconf("SC_CLK_TCK")


def now() -> int:
    """The clock of /proc/PID/stat's start times (ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * TICKS)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent, start) of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[19])


def alive(pid: int) -> bool:
    """``pid`` runs: neither gone nor a zombie (which only its new parent, PID 1 here, can take away)."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _read(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def orphans(since: int, env: str, path: str) -> list[int]:
    """Processes started at or after ``since`` whose parent is gone, with ``env`` (``NAME=value``) in their
    environment or ``path`` in their command line."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        st = _stat(pid)
        if st is None or st[1] != 1 or st[2] < since - 1 or st[0] == "Z":
            continue
        cmdline = _read(pid, "cmdline")
        if os.path.basename(cmdline.split(b"\0")[0]) in BY_DESIGN:
            continue
        if (path and path.encode() in cmdline) or (env and env.encode() in _read(pid, "environ").split(b"\0")):
            found.append(pid)
    return found


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (any of its threads); none once it is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [int(child) for task in tasks for child in _read(pid, f"task/{task}/children").split()]


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    return [pid] + [p for child in children(pid) for p in _tree(child)]


def status(pid: int) -> dict[str, str]:
    """/proc/PID/status as a dict ("State", "SigCgt", ...); empty once it is gone."""
    return {k: v.strip() for k, _, v in (line.partition(":") for line in _read(pid, "status").decode().splitlines())}


def describe(pid: int) -> str:
    """What ``pid`` runs and how it stands with its signals (pending, blocked, ignored, caught)."""
    cmd = _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()
    st = status(pid)
    sig = " ".join(f"{k}={st.get(k, '?')}" for k in ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"))
    wchan = _read(pid, "wchan").decode(errors="replace")
    return f"pid {pid}: {cmd[:300]} ({sig}; wchan {wchan or '?'})"


def stop_leftovers(since: int, env: str, path: str, within: float) -> list[str]:
    """Give this test's :func:`orphans` ``within`` seconds to end; kill the rest with their children, and describe
    them."""
    deadline = time.monotonic() + within
    left = orphans(since, env, path)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if (st := _stat(pid)) is not None and st[0] != "Z" and st[1] == 1]
    told = []
    for pid in left:
        tree = _tree(pid)
        told += [describe(p) for p in tree]
        for p in tree:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return told


# A stand-in for a death signal that never stops its process (a test cannot make the kernel lose one).
BLOCK_TERM = "import signal; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})"
STARTER = """
import subprocess, sys, time
from netesto.procs import parent_death_signal
tie = parent_death_signal()
def preexec():
    tie()
    {block}
print(subprocess.Popen({argv!r}, preexec_fn=preexec).pid, flush=True)
time.sleep(60)
"""


def tied_to_a_parent(argv: list[str]) -> tuple[subprocess.Popen, int]:
    """``argv`` started as the agent starts its processes (a death signal, here blocked: :data:`BLOCK_TERM`)
    by a parent the test can kill: (that parent, whose stdout the process shares, and the process's pid)."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER.format(block=BLOCK_TERM, argv=argv)],
                               stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    return starter, int(starter.stdout.readline())
