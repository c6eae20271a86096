"""Test helpers: network namespaces with a unique per-run prefix, always removed.

Every namespace a test creates is named ``<RUN_PREFIX><n><suffix>``, so
concurrent test runs never collide and leftovers are attributable. The prefix
comes from the pid, so each pytest-xdist worker (a process of its own) has its
own, and a worker's :func:`remove_stale` at its start never takes a live one's.
:func:`cleanup_all` removes every namespace of this run (and kills the
processes inside them) at session end, even after failures.
:func:`remove_stale` removes those of runs that died without their
cleanup (SIGKILL, a lost machine session): it runs when a test session or
a bench starts.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field

RUN_PREFIX = f"nt{os.getpid() % 100000:05d}"
_NAMED = re.compile(r"nt(\d{5})(?:\d+[abp]|probe)")  # what RUN_PREFIX, make_veth_pair, private_ns, the probe name
_counter = itertools.count(1)


def netns_available() -> bool:
    """Root, ``ip`` present and namespaces creatable."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"{RUN_PREFIX}probe"
    ok = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ok


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc


def ns_pids(ns: str) -> list[int]:
    out = sh("ip", "netns", "pids", ns, check=False).stdout.split()
    return [int(p) for p in out if p.isdigit()]


def delete_ns(ns: str) -> None:
    for pid in ns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 2
    while ns_pids(ns) and time.monotonic() < deadline:
        time.sleep(0.02)
    sh("ip", "netns", "del", ns, check=False)


def cleanup_all() -> None:
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(RUN_PREFIX):
            delete_ns(name)


def stale_namespaces() -> list[str]:
    """The namespaces named as this module names them whose run is gone: no live process has a pid
    ending in their run's five digits (a run that is alive keeps all of its own)."""
    alive = {int(p) % 100000 for p in os.listdir("/proc") if p.isdigit()}
    names = [line.split()[0] for line in sh("ip", "netns", "list", check=False).stdout.splitlines() if line.split()]
    return [name for name in names if (m := _NAMED.fullmatch(name)) and int(m.group(1)) not in alive]


def remove_stale() -> list[str]:
    """Remove :func:`stale_namespaces` (their processes killed, as :func:`delete_ns` does); their names."""
    stale = stale_namespaces()
    for name in stale:
        delete_ns(name)
    return stale


@dataclass
class VethPair:
    """Two namespaces joined by one veth: ``a`` (10.x.y.1) and ``b`` (10.x.y.2)."""

    a: str
    b: str
    addr_a: str
    addr_b: str
    dev_a: str
    dev_b: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    def popen(self, ns: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start ``argv`` inside namespace ``ns``; killed at teardown."""
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kw)
        self.procs.append(proc)
        return proc

    def run(self, ns: str, argv: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(["ip", "netns", "exec", ns, *argv], timeout=timeout, **kw)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        delete_ns(self.a)
        delete_ns(self.b)


@dataclass
class PrivateLink:
    """A namespace of this run whose one link leads to the initial namespace: ``dev`` there (``addr``),
    ``eth0`` inside (``peer_addr``). No address another test adds or takes away elsewhere is seen inside."""

    ns: str
    dev: str
    addr: str
    peer_addr: str


def private_link() -> PrivateLink:
    """A :class:`PrivateLink`, on a /30 of 10.200-249 that only this process uses in the initial
    namespace (testbeds keep to 10.100-199 there, :func:`make_veth_pair` to namespaces of its own).
    Removing the namespace (:func:`delete_ns`, :func:`cleanup_all`) removes the link."""
    n = next(_counter)
    pid, host = os.getpid(), 4 * (n % 63)  # host: the /30's network address
    base = f"10.{200 + pid % 50}.{pid // 50 % 256}"
    link = PrivateLink(f"{RUN_PREFIX}{n}p", f"v{RUN_PREFIX}{n}p"[-15:], f"{base}.{host + 1}", f"{base}.{host + 2}")
    sh("ip", "netns", "add", link.ns)
    try:
        sh("ip", "link", "add", link.dev, "type", "veth", "peer", "name", "eth0", "netns", link.ns)
        sh("ip", "addr", "add", f"{link.addr}/30", "dev", link.dev)
        sh("ip", "link", "set", link.dev, "up")
        sh("ip", "-n", link.ns, "addr", "add", f"{link.peer_addr}/30", "dev", "eth0")
        sh("ip", "-n", link.ns, "link", "set", "eth0", "up")
        sh("ip", "-n", link.ns, "link", "set", "lo", "up")
    except Exception:
        delete_ns(link.ns)
        sh("ip", "link", "del", link.dev, check=False)
        raise
    return link


def make_veth_pair() -> VethPair:
    n = next(_counter)
    a, b = f"{RUN_PREFIX}{n}a", f"{RUN_PREFIX}{n}b"
    subnet = f"10.{200 + (os.getpid() % 50)}.{n % 250}"
    pair = VethPair(a, b, f"{subnet}.1", f"{subnet}.2", "veth0", "veth0")
    try:
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        tmp_a, tmp_b = f"v{RUN_PREFIX}{n}a"[-15:], f"v{RUN_PREFIX}{n}b"[-15:]
        sh("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        sh("ip", "link", "set", tmp_a, "netns", a)
        sh("ip", "link", "set", tmp_b, "netns", b)
        for ns, tmp, addr in ((a, tmp_a, pair.addr_a), (b, tmp_b, pair.addr_b)):
            sh("ip", "-n", ns, "link", "set", tmp, "name", "veth0")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "veth0")
            sh("ip", "-n", ns, "link", "set", "veth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
    except Exception:
        pair.close()
        raise
    return pair
