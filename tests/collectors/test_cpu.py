"""CPU helpers measured against real busy and idle processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netesto.errors import TrafficError
from netesto.collectors import cpu
from netesto.raw.hoststats import parse_proc_stat

DATA = Path(__file__).parents[1] / "data"
BUSY = "import time\nend = time.time() + {secs}\nwhile time.time() < end: pass\n"


def _spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def _started(code: str) -> subprocess.Popen:
    """A process running ``code`` once its interpreter has started: its start-up (~50 ms of CPU, more on a
    loaded machine) must not count in what a test measures of the code."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys\nprint(flush=True)\n" + code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"\n"
    return proc


def test_parse_pid_stat_of_this_process():
    times = cpu.read_pid_times(os.getpid())
    assert times.ppid == os.getppid()
    assert times.utime + times.stime > 0


def test_parse_cpu_line_real_capture():
    text = (DATA / "proc-stat.txt").read_text()
    t = cpu.parse_cpu_line(text)
    fields = parse_proc_stat(text)["cpu"]
    assert t.busy + t.idle == sum(fields[:8])
    assert cpu.parse_cpu_line(text, "cpu1").total > 0
    with pytest.raises(TrafficError, match="no 'cpu9'"):
        cpu.parse_cpu_line(text, "cpu9")


def test_busy_process_near_one_core_idle_process_near_zero():
    busy = _started(BUSY.format(secs=3))
    idle = _started("import time; time.sleep(3)")
    try:
        pb, pi = cpu.ProcessCpu(busy.pid), cpu.ProcessCpu(idle.pid)
        time.sleep(0.8)
        b, i = pb.sample(), pi.sample()
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
    # a loaded shared machine: the busy loop gets at least ~40 % of a core
    assert 40 < b <= 110, b
    assert i < 5, i


def test_children_are_counted():
    # a shell-free parent that runs a busy child and waits for it
    parent = _started(
        "import subprocess\n"
        f"child = subprocess.Popen([sys.executable, '-c', {BUSY.format(secs=1.2)!r}])\n"
        "print(flush=True)\n"
        "child.wait()\n"
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"\n"  # its child started
        with_children = cpu.ProcessCpu(parent.pid)
        alone = cpu.ProcessCpu(parent.pid, children=False)
        time.sleep(0.7)
        assert with_children.sample() > 40
        assert alone.sample() < 10
        assert cpu.descendants(parent.pid)
        parent.wait(5)
    finally:
        parent.kill()
        parent.wait()


def test_host_cpu_sees_a_busy_loop():
    host = cpu.HostCpu()
    busy = _spawn(BUSY.format(secs=0.8))
    try:
        busy.wait(5)
    finally:
        busy.kill()
    pct = host.sample()
    ncpu = os.cpu_count() or 1
    # at least most of one core out of ncpu cores was busy
    assert 100 / ncpu * 0.5 < pct <= 100.0, pct
    assert 0 <= host.overall() <= 100


def test_missing_process_is_traffic_error():
    p = _spawn("pass")
    p.wait()
    with pytest.raises(TrafficError, match=f"process {p.pid}"):
        cpu.ProcessCpu(p.pid)
