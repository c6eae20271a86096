"""The testbed's shape: namespaces, veths, addresses and routes of a star around a router.

Testbed ``NAME`` with N hosts::

    initial ns  NAME-c 10.X.0.1 ──── c0 10.X.0.254  ┐
                                                    │ NAME-r (router, ip_forward=1)
    NAME-h1  eth0 10.X.1.1 ──── r-h1 10.X.1.254    │ bottleneck: htb+bfifo on r-hI egress
    NAME-hI  eth0 10.X.I.1 ──── r-hI 10.X.I.254    ┘ delay: NFQUEUE I (or host netem)

``X`` (100..199) is derived from the name and differs from every other
testbed's, so several coexist. The controller in the initial namespace
reaches every agent through the ``NAME-c`` link; its traffic takes the
router's fast class and skips the delay line, so only host-to-host traffic
crosses the bottleneck.
"""

from __future__ import annotations

import re
import subprocess
import zlib
from dataclasses import dataclass
from typing import Sequence

from netesto.errors import TestbedError, UsageError

_NAME = re.compile(r"^[a-z][a-z0-9]{0,10}$")
SUBNET_RANGE = range(100, 200)  # tests/netns.py uses 10.200-249: stay clear


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(
            f"bad testbed name {name!r}: 1-11 characters, lowercase letters and digits, starting with a letter"
        )
    return name


@dataclass(frozen=True)
class Link:
    """One host's link to the router."""

    host: str  # h1
    ns: str  # NAME-h1
    dev: str  # eth0 (inside the host namespace)
    addr: str  # 10.X.I.1
    router_dev: str  # r-h1 (inside the router namespace)
    router_addr: str  # 10.X.I.254
    queue: int  # the netfilter queue of traffic toward this host


@dataclass(frozen=True)
class Topology:
    """Every name and address of a testbed, computed before anything is created."""

    name: str
    subnet: int
    router_ns: str
    control_dev: str  # in the initial namespace
    control_addr: str  # controller side, 10.X.0.1
    router_control_dev: str  # c0
    router_control_addr: str  # 10.X.0.254
    links: tuple[Link, ...]

    @property
    def control_subnet(self) -> str:
        return f"10.{self.subnet}.0.0/24"

    @property
    def prefix(self) -> str:
        return f"10.{self.subnet}.0.0/16"

    @property
    def namespaces(self) -> list[str]:
        return [self.router_ns, *(lk.ns for lk in self.links)]


def plan_topology(name: str, hosts: int, used_subnets: set[int]) -> Topology:
    """Names and addresses for testbed ``name``; ``used_subnets`` are taken already."""
    check_name(name)
    if not 1 <= hosts <= 250:
        raise UsageError(f"--hosts must be 1..250, got {hosts}")
    start = zlib.crc32(name.encode()) % len(SUBNET_RANGE)
    for k in range(len(SUBNET_RANGE)):
        x = SUBNET_RANGE[(start + k) % len(SUBNET_RANGE)]
        if x not in used_subnets:
            break
    else:
        raise TestbedError("no free 10.X.0.0/16 subnet for another testbed (100 in use?)")
    links = tuple(
        Link(f"h{i}", f"{name}-h{i}", "eth0", f"10.{x}.{i}.1", f"r-h{i}", f"10.{x}.{i}.254", i)
        for i in range(1, hosts + 1)
    )
    return Topology(name, x, f"{name}-r", f"{name}-c", f"10.{x}.0.1", "c0", f"10.{x}.0.254", links)


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestbedError(f"`{' '.join(argv)}` failed: {exc}") from exc
    if check and proc.returncode != 0:
        raise TestbedError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc


def ns_exec(ns: str, argv: Sequence[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return run(["ip", "netns", "exec", ns, *argv], **kw)  # type: ignore[arg-type]


def existing_namespaces() -> set[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def root_subnets_in_use() -> set[int]:
    """Second octets X of 10.X.* addresses and routes in the initial namespace."""
    text = run(["ip", "-4", "route", "show"], check=False).stdout + run(["ip", "-4", "addr", "show"], check=False).stdout
    return {int(x) for x in re.findall(r"\b10\.(\d{1,3})\.", text)}


def add_namespace(ns: str) -> None:
    if ns in existing_namespaces():
        raise TestbedError(f"namespace {ns} exists already (another testbed of that name? `netesto testbed down --name ...`)")
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def add_veth(dev_a: str, ns_a: str | None, dev_b: str, ns_b: str) -> None:
    """A veth pair created directly inside its namespaces (no name clash in the initial one)."""
    argv = ["ip", "link", "add", dev_a]
    if ns_a:
        argv += ["netns", ns_a]
    run([*argv, "type", "veth", "peer", "name", dev_b, "netns", ns_b])


def ip(ns: str | None, args: Sequence[str]) -> None:
    run(["ip", *(["-n", ns] if ns else []), *args])


def set_addr(ns: str | None, dev: str, addr: str, plen: int = 24) -> None:
    ip(ns, ["addr", "add", f"{addr}/{plen}", "dev", dev])
    ip(ns, ["link", "set", dev, "up"])


def sysctl_ns(ns: str, settings: dict[str, str]) -> None:
    args = [f"{k}={v}" for k, v in settings.items()]
    ns_exec(ns, ["sysctl", "-q", "-w", *args])


def build(topo: Topology, record: "Recorder") -> None:
    """Create namespaces, veths, addresses and routes; ``record`` notes each as made."""
    for ns in topo.namespaces:
        add_namespace(ns)
        record.namespace(ns)
    sysctl_ns(topo.router_ns, {"net.ipv4.ip_forward": "1"})
    add_veth(topo.control_dev, None, topo.router_control_dev, topo.router_ns)
    record.root_link(topo.control_dev)
    set_addr(None, topo.control_dev, topo.control_addr)
    set_addr(topo.router_ns, topo.router_control_dev, topo.router_control_addr)
    ip(None, ["route", "add", topo.prefix, "via", topo.router_control_addr, "dev", topo.control_dev])
    for lk in topo.links:
        add_veth(lk.dev, lk.ns, lk.router_dev, topo.router_ns)
        set_addr(lk.ns, lk.dev, lk.addr)
        set_addr(topo.router_ns, lk.router_dev, lk.router_addr)
        ip(lk.ns, ["route", "add", "default", "via", lk.router_addr])


def delete_namespace(ns: str) -> None:
    run(["ip", "netns", "del", ns], check=False)


def delete_root_link(dev: str) -> None:
    if run(["ip", "link", "show", dev], check=False).returncode == 0:
        run(["ip", "link", "del", dev], check=False)


class Recorder:
    """Where :func:`build` reports what it created (the state file, in practice)."""

    def namespace(self, ns: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def root_link(self, dev: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError


__all__ = ["Link", "Recorder", "Topology", "build", "check_name", "plan_topology"]
