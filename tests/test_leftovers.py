"""The suite's check that no test leaves a process behind (tests/leftovers.py) finds one and stops it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import leftovers
from leftovers import alive


ORPHAN = """
import subprocess
quiet = subprocess.DEVNULL
print(subprocess.Popen(["sleep", "30"], stdout=quiet, stderr=quiet, start_new_session=True).pid)
"""


def _orphan(env: dict[str, str]) -> int:
    """A sleeping process whose parent has exited (its pid)."""
    out = subprocess.run([sys.executable, "-c", ORPHAN], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_an_orphan_carrying_the_runs_mark_is_named_and_killed():
    since = leftovers.now()
    value = f"leftover-test-{os.getpid()}"
    pid = _orphan({**os.environ, leftovers.MARK: value})
    try:
        t0 = time.monotonic()
        assert leftovers.orphans(since, f"{leftovers.MARK}={value[:-1]}", "/nowhere/") == []  # whole values only
        told = leftovers.stop_leftovers(since, f"{leftovers.MARK}={value}", "/nowhere/", within=0.5)
        assert time.monotonic() - t0 >= 0.5  # it was given the time to end
        assert len(told) == 1 and told[0].startswith(f"pid {pid}: sleep 30 (State=S") and "SigBlk=" in told[0], told
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(pid)  # killed (its reaping is PID 1's, which a loaded runner can delay)
    finally:
        if alive(pid):
            os.kill(pid, 9)


def test_an_orphan_without_the_mark_or_started_before_the_test_is_not_this_tests():
    env = {k: v for k, v in os.environ.items() if k != leftovers.MARK}
    before = leftovers.now()
    pid = _orphan(env)  # someone else's (a loaded runner once took over 1 s to start it)
    try:
        after = leftovers.now() + 2  # ... and one that started before "the test" (start times are in whole ticks)
        mine = f"{leftovers.MARK}={os.environ[leftovers.MARK]}"
        assert leftovers.orphans(before, mine, "/nowhere/") == []
        assert pid in leftovers.orphans(before, mine, "sleep")  # found by its command line
        assert pid not in leftovers.orphans(after, mine, "sleep")
    finally:
        os.kill(pid, 9)
