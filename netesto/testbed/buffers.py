"""The hosts' socket-buffer ceilings, sized for the bottleneck the testbed builds.

TCP's buffer autotuning stops at ``net.ipv4.tcp_wmem``/``tcp_rmem``'s third
value, and an explicit SO_SNDBUF/SO_RCVBUF at ``net.core.wmem_max``/
``rmem_max``. Kernel defaults (4 MB of send buffer here) hold a flow below
the link once bandwidth x (RTT + queue) grows past a fraction of them: at
10 Gbit/s x 20 ms flows reached 1.3 Gbit/s, and at 50 Mbit/s x 40 ms with a
16-BDP queue the send buffer was the queue. So every host namespace gets
ceilings of :data:`HEADROOM` x bandwidth x (RTT + the queue's delay), never
below what the kernel had. (A send buffer holds the data in flight plus the
kernel's per-segment overhead, about twice the payload, and autotuning asks
for twice the window it wants: 4x is what lets a window of the path's whole
BDP plus queue open.)
"""

from __future__ import annotations

from netesto.testbed import topology

HEADROOM = 4
CEILING = 1 << 30  # 1 GiB: the sysctls are ints; beyond this the machine's memory is the limit anyway
TCP_MEM = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
CORE_MAX = ("net.core.rmem_max", "net.core.wmem_max")


def ceiling(bw_bps: int, rtt_ms: float, buffer_bytes: int) -> int:
    """Bytes a socket buffer may grow to: HEADROOM x bandwidth x (RTT + queue delay).

    >>> ceiling(50_000_000, 40.0, 4_000_000)  # 50 Mbit/s, 40 ms, a 16-BDP queue: 4 x 4.25 MB
    17000000
    """
    path_bytes = bw_bps / 8 * rtt_ms / 1e3 + buffer_bytes
    return min(CEILING, int(HEADROOM * path_bytes))


def sized(current: dict[str, str], limit: int) -> dict[str, str]:
    """The sysctls of one namespace: ``current``'s (its own values) with their maxima raised to ``limit``.

    >>> sized({"net.ipv4.tcp_wmem": "4096 16384 4194304", "net.core.wmem_max": "4194304"}, 17_000_000)
    {'net.ipv4.tcp_wmem': '4096 16384 17000000', 'net.core.wmem_max': '17000000'}
    >>> sized({"net.ipv4.tcp_rmem": "4096 131072 33554432"}, 1_000_000)  # never lowered
    {'net.ipv4.tcp_rmem': '4096 131072 33554432'}
    """
    out = {}
    for key, value in current.items():
        parts = value.split()
        if key in TCP_MEM and len(parts) == 3:
            out[key] = " ".join(parts[:2] + [str(max(int(parts[2]), limit))])
        elif key in CORE_MAX and len(parts) == 1:
            out[key] = str(max(int(parts[0]), limit))
    return out


def size_buffers(ns: str, bw_bps: int, rtt_ms: float, buffer_bytes: int) -> dict[str, str]:
    """Raise ``ns``'s socket-buffer ceilings (see the module); the values now in force there. The
    ``net.core`` maxima are left as they are where the kernel keeps them machine-wide (it refuses
    them inside a namespace): autotuning goes by the ``tcp_*mem`` ones, which every namespace has."""
    keys = TCP_MEM + CORE_MAX
    got = topology.ns_exec(ns, ["sysctl", "-n", *keys], check=False).stdout.splitlines()
    current = {k: v for k, v in zip(keys, got) if v.strip()}
    want = sized(current, ceiling(bw_bps, rtt_ms, buffer_bytes))
    topology.sysctl_ns(ns, {k: v for k, v in want.items() if k in TCP_MEM})
    for key in CORE_MAX:
        if key in want:
            topology.ns_exec(ns, ["sysctl", "-q", "-w", f"{key}={want[key]}"], check=False)
    got = topology.ns_exec(ns, ["sysctl", "-n", *keys], check=False).stdout.splitlines()
    return {k: " ".join(v.split()) for k, v in zip(keys, got) if v.strip()}


__all__ = ["CEILING", "HEADROOM", "ceiling", "size_buffers", "sized"]
