"""The sampler's alternative to a getsockopt per flow, measured: one NETLINK_SOCK_DIAG dump a tick.

A dump returns every TCP socket of a namespace with its tcp_info in a few syscalls, so it would
share the syscall path the rows pay one by one. The kernel walks the namespace's whole
established hash for it, though: 262,144 buckets in this host's namespace; a namespace created
while ``net.ipv4.tcp_child_ehash_entries`` is set in its parent gets its own, small one. So the
dump is measured in both, next to ``getsockopt(TCP_INFO)`` on the same sockets, on ``flows``
idle loopback connections (both ends in the namespace: the dump returns 2 x ``flows`` sockets),
cold (10 ms between rounds, as the sampler's ticks are) and warm (back to back). The dump's
cost is its kernel part only (send, then ``recv_into`` a buffer until NLMSG_DONE, no parsing):
a lower bound of what the sampler would pay.

``python3 -m bench.bench_sampling --cost-only`` prints it (root: it creates a namespace, named
``nbdiag<pid>``, and removes it); ``python3 -m bench.diag_cost --inside FLOWS`` is the part run
in each namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from bench.sampling_cost import connections

CHILD_EHASH = 1024  # buckets of the small namespace's own established hash
CHILD_SYSCTL = Path("/proc/sys/net/ipv4/tcp_child_ehash_entries")
NLMSG_DONE, NLMSG_ERROR = 3, 2
ROUNDS = 200


def dump_request(seq: int) -> bytes:
    """A SOCK_DIAG_BY_FAMILY dump request of the established IPv4 TCP sockets with INET_DIAG_INFO."""
    req = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 1 << (2 - 1), 1 << 1) + bytes(48)
    return struct.pack("=IHHII", 16 + len(req), 20, 0x301, seq, 0) + req


def dump_raw(nl: socket.socket, buf: bytearray, seq: int) -> int:
    """One dump, received but not parsed beyond finding its end: the sockets it returned."""
    nl.send(dump_request(seq))
    view, sockets = memoryview(buf), 0
    while True:
        n = nl.recv_into(view)
        pos = 0
        while pos < n:
            length, kind = struct.unpack_from("=IH", buf, pos)
            if kind in (NLMSG_DONE, NLMSG_ERROR):
                return sockets
            sockets += 1
            pos += (length + 3) & ~3


def _rounds_us(fn, cold: bool) -> float:
    """Median over 5 sets of ``ROUNDS`` calls of ``fn`` of us of thread CPU per call."""
    sets = []
    for _ in range(5):
        spent = 0
        for _ in range(ROUNDS // 5):
            if cold:
                time.sleep(0.01)
            t0 = time.thread_time_ns()
            fn()
            spent += time.thread_time_ns() - t0
        sets.append(spent / 1e3 / (ROUNDS // 5))
    return statistics.median(sets)


def inside(flows: int) -> dict[str, float]:
    """The costs in the namespace this process runs in (us of thread CPU per flow per tick)."""
    lsock, conns, peers = connections(flows, "cubic")
    out: dict[str, float] = {"ehash": float(Path("/proc/sys/net/ipv4/tcp_ehash_entries").read_text())}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4) as nl:  # NETLINK_SOCK_DIAG
        buf = bytearray(1 << 20)
        out["dumped"] = float(dump_raw(nl, buf, 0))
        for cold in (True, False):
            key = "cold" if cold else "warm"
            out[f"getsockopt {key}"] = _rounds_us(lambda: [c.getsockopt(6, 11, 280) for c in conns], cold) / flows
            out[f"dump {key}"] = _rounds_us(lambda: dump_raw(nl, buf, 1), cold) / flows
    for s in [lsock, *conns, *peers]:
        s.close()
    return out


def _run(prefix: list[str], flows: int) -> dict[str, float]:
    cmd = [*prefix, sys.executable, "-m", "bench.diag_cost", "--inside", str(flows)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


@contextlib.contextmanager
def small_hash_namespace(name: str) -> Iterator[str]:
    """A new namespace ``name`` (loopback up) with its own established hash of ``CHILD_EHASH`` buckets,
    deleted on the way out."""
    before = CHILD_SYSCTL.read_text()
    try:
        CHILD_SYSCTL.write_text(str(CHILD_EHASH))
        try:
            subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        finally:
            CHILD_SYSCTL.write_text(before)
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def child_namespace(flows: int) -> dict[str, float]:
    """:func:`inside` in a new namespace with its own established hash of ``CHILD_EHASH`` buckets."""
    with small_hash_namespace(f"nbdiag{os.getpid()}") as ns:
        return _run(["ip", "netns", "exec", ns], flows)


def print_alternative(flows: int) -> None:
    """The dump against getsockopt, in this namespace and in a child one with a small hash (root)."""
    readings = [("this namespace", _run([], flows))]
    if os.geteuid() == 0 and CHILD_SYSCTL.exists():
        readings.append((f"a namespace with its own {CHILD_EHASH}-bucket hash", child_namespace(flows)))
    print(f"# the alternative: one sock_diag dump a tick instead of a getsockopt(TCP_INFO) per flow, {flows} idle "
          "loopback connections, us of thread CPU per flow (the dump's kernel part only: a lower bound)")
    for where, r in readings:
        per = flows / r["dumped"]
        print(f"  {where} ({int(r['ehash'])} buckets, {int(r['dumped'])} sockets dumped): "
              f"getsockopt {r['getsockopt cold']:.2f} cold / {r['getsockopt warm']:.2f} warm; "
              f"dump {r['dump cold']:.2f} cold / {r['dump warm']:.2f} warm; the dump per socket it returned "
              f"{per * r['dump cold']:.2f} cold / {per * r['dump warm']:.2f} warm (x{per * r['dump cold'] / r['getsockopt cold']:.2f} "
              "cold, were the namespace to hold one end of each flow)", flush=True)


__all__ = ["CHILD_EHASH", "child_namespace", "small_hash_namespace", "dump_raw", "dump_request", "inside", "print_alternative"]

if __name__ == "__main__":
    if sys.argv[1:2] != ["--inside"] or len(sys.argv) != 3:
        sys.exit("usage: python3 -m bench.diag_cost --inside FLOWS")
    print(json.dumps(inside(int(sys.argv[2]))))
