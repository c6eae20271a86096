"""The test and bench namespaces go even when their run dies: stale ones of dead runs are removed when a
session or a bench starts, and a bench stopped with SIGTERM removes its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import netns

pytestmark = pytest.mark.netns
ROOT = Path(__file__).resolve().parents[1]


def dead_run() -> str:
    """A run prefix no live process can own: five digits no pid ends in now, and (below pid_max) none soon."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    alive = {int(p) % 100000 for p in os.listdir("/proc") if p.isdigit()}
    last = int(Path("/proc/loadavg").read_text().split()[-1])  # the pid given last
    start = pid_max if pid_max < 100000 else last + 50000
    run = next(n % 100000 for n in range(start, start + 100000) if n % 100000 not in alive)
    return f"nt{run:05d}"


def namespaces() -> set[str]:
    return {line.split()[0] for line in netns.sh("ip", "netns", "list").stdout.splitlines() if line.split()}


def test_stale_namespaces_of_dead_runs_go_with_their_processes():
    dead, live, other = f"{dead_run()}7a", f"{netns.RUN_PREFIX}9999b", f"ntkeep{os.getpid()}"
    sleeper = None
    try:
        for name in (dead, live, other):
            netns.sh("ip", "netns", "add", name)
        sleeper = subprocess.Popen(["ip", "netns", "exec", dead, "sleep", "60"])
        deadline = time.monotonic() + 5
        while not netns.ns_pids(dead) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert netns.ns_pids(dead), "the sleeper did not start in its namespace"
        assert dead in netns.stale_namespaces()
        assert dead in netns.remove_stale()
        left = namespaces()
        assert dead not in left
        assert {live, other} <= left  # a live run's and a name not of this module's stay
        assert sleeper.wait(timeout=5) != 0  # killed with its namespace
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
        for name in (dead, live, other):
            netns.sh("ip", "netns", "del", name, check=False)


def test_a_bench_stopped_with_sigterm_removes_its_namespaces_and_processes():
    script = (
        "import time\n"
        "from bench.common import guard\n"
        "from tests import netns\n"
        "guard()\n"
        "pair = netns.make_veth_pair()\n"
        "pair.popen(pair.b, ['sleep', '60'])\n"
        "print(pair.a, pair.b, flush=True)\n"
        "try:\n"
        "    time.sleep(60)\n"
        "finally:\n"
        "    print('finally ran', flush=True)\n"
    )
    bench = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    names: list[str] = []
    try:
        assert bench.stdout is not None
        names = bench.stdout.readline().split()
        assert len(names) == 2, "the bench made no veth pair"
        deadline = time.monotonic() + 5
        while not netns.ns_pids(names[1]) and time.monotonic() < deadline:
            time.sleep(0.02)
        sleepers = netns.ns_pids(names[1])
        assert sleepers
        bench.terminate()
        rest, _ = bench.communicate(timeout=20)
        assert bench.returncode == 128 + 15
        assert "finally ran" in rest
        assert not set(names) & namespaces()
        for pid in sleepers:
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for name in names:
            netns.delete_ns(name)
