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

from netesto.proctable import alive, children, describe, environ, now, pids, read, stat, status, tree

__all__ = ["BLOCK_TERM", "MARK", "alive", "children", "now", "orphans", "status", "stop_leftovers",
           "tied_to_a_parent"]

MARK = "NETESTO_TEST_WORKER"  # set in each pytest process; every process it starts inherits it
# Orphans by design: chromium's crash handlers leave their parent as they start and end with the browser,
# which the page tests share until the session ends (tests/plots/browser.py).
BY_DESIGN = {b"chrome_crashpad_handler"}


def orphans(since: int, env: str, path: str) -> list[int]:
    """Processes started at or after ``since`` whose parent is gone, with ``env`` (``NAME=value``) in their
    environment or ``path`` in their command line."""
    found = []
    for pid in pids():
        st = stat(pid)
        if st is None or st.parent != 1 or st.start < since - 1 or st.state == "Z":
            continue
        cmdline = read(pid, "cmdline")
        if os.path.basename(cmdline.split(b"\0")[0]) in BY_DESIGN:
            continue
        if (path and path.encode() in cmdline) or (env and env.encode() in environ(pid)):
            found.append(pid)
    return found


def stop_leftovers(since: int, env: str, path: str, within: float) -> list[str]:
    """Give this test's :func:`orphans` ``within`` seconds to end; kill the rest with their children, and describe
    them."""
    deadline = time.monotonic() + within
    left = orphans(since, env, path)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if (st := stat(pid)) is not None and st.state != "Z" and st.parent == 1]
    told = []
    for pid in left:
        whole = tree(pid)
        told += [describe(p) for p in whole]
        for p in whole:
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
