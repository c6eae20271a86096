"""Helpers for testbed tests: unique testbed names, commands inside hosts, leftovers."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Iterator

_count = itertools.count(1)
ISSUED: list[str] = []


def unique_name() -> str:
    """A testbed name unique to this test run (``t<pid>x<n>``, at most 11 characters)."""
    name = f"t{os.getpid() % 100000}x{next(_count)}"
    ISSUED.append(name)
    return name


def interrupt_group(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """Ctrl-C as a terminal sends it (SIGINT to the process group of ``proc``, which was
    started with ``start_new_session=True``), then the rest of its output."""
    os.killpg(proc.pid, signal.SIGINT)
    return proc.communicate(timeout=timeout)


@contextlib.contextmanager
def group_killed_after(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc``, its whole process group killed on the way out if it still runs (a failed test)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def testbed_up(tmp_path_factory: object, **config: object) -> Iterator[object]:
    """A testbed of ``config`` (a fresh name, its files in a temporary directory), taken down
    after, checking that nothing of it is left."""
    from netesto.testbed import lifecycle
    from netesto.testbed.config import TestbedConfig

    name = unique_name()
    up = lifecycle.up(TestbedConfig.parse(name=name, dir=tmp_path_factory.mktemp(name), **config))  # type: ignore[attr-defined, arg-type]
    try:
        yield up
    finally:
        assert lifecycle.down(up.name) == []
        assert leftovers(up.name) == []


def take_down_leftovers(since: int = 0) -> list[str]:
    """Safety net: take down testbeds named since ``ISSUED[since]`` that are still up."""
    from netesto.errors import TestbedError
    from netesto.testbed import lifecycle
    from netesto.testbed.state import state_path

    taken = []
    while len(ISSUED) > since:
        name = ISSUED.pop()
        if state_path(name).exists():
            try:
                lifecycle.down(name)
            except TestbedError:
                pass
            taken.append(name)
    return taken


def ns_run(ns: str, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout)


def ns_popen(ns: str, argv: list[str], **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], text=True, **kw)  # type: ignore[call-overload]


def ping_rtts(output: str) -> list[float]:
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", output)]


def iperf3(client_ns: str, server_ns: str, server_addr: str, seconds: float = 3, ca: str = "cubic", omit: int = 0,
           extra: tuple[str, ...] = ()) -> dict:
    """One iperf3 TCP run client -> server (a one-off server), its JSON; ``omit`` skips slow start,
    ``extra`` are more client options."""
    port = 20000 + (os.getpid() + next(_count)) % 20000
    server = ns_popen(server_ns, ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if f":{port}" in ns_run(server_ns, ["ss", "-ltn"]).stdout:
                break
            time.sleep(0.05)
        proc = ns_run(client_ns, ["iperf3", "-c", server_addr, "-p", str(port), "-t", str(seconds), "-O", str(omit), "-C", ca, "-J", *extra], timeout=seconds + 30)
        data: dict = json.loads(proc.stdout)
        if "error" in data:
            raise AssertionError(f"iperf3: {data['error']}")
        return data
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def leftovers(name: str) -> list[str]:
    """Anything of testbed ``name`` still on the machine: namespaces, links, processes, state."""
    found = []
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"namespace {ln.split()[0]}" for ln in out.splitlines() if ln.split() and ln.split()[0].startswith(f"{name}-")]
    if subprocess.run(["ip", "link", "show", f"{name}-c"], capture_output=True).returncode == 0:
        found.append(f"link {name}-c")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"/{name}.delayline" in cmdline or f"/{name}.keys/" in cmdline or f"/{name}.data/" in cmdline:
            found.append(f"process {proc.name}: {cmdline[:120]}")
    from netesto.testbed.state import state_dir

    found += [f"state file {p}" for p in state_dir().glob(f"{name}.*")]
    return found


def median_rtt(ns: str, addr: str, *, rounds: int = 3, count: int = 10, interval: float = 0.03) -> float:
    """The lowest of ``rounds`` ping medians ``ns`` -> ``addr`` (ms).

    On a loaded machine a ping now and then waits for a CPU, which only adds
    to an RTT: the lowest median of a few short rounds is the path's own, and
    still shows a missing or doubled delay (every round would).
    """
    medians = []
    for _ in range(rounds):
        rtts = ping_rtts(ns_run(ns, ["ping", "-c", str(count), "-i", str(interval), "-W", "2", addr]).stdout)
        if len(rtts) >= count // 2:
            medians.append(statistics.median(rtts))
    if not medians:
        raise AssertionError(f"ping {addr} from {ns}: no round had replies")
    return min(medians)
