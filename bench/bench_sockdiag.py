"""The socket watcher's cost per socket-sample beside the built-in sampler's getsockopt, in one run.

``nice -n 10 python3 -m bench.bench_sockdiag [--sizes 1,8,64] [--ticks 300]`` (root, repository root).

In a fresh namespace with its own small established hash (as the testbed
makes them: ``net.ipv4.tcp_child_ehash_entries``), ``N`` idle loopback
connections; ticks 10 ms apart (cold caches, as a sampler's are), thread CPU
per socket and tick of:

* ``watch tick``: the watcher's whole tick (:class:`netesto.collectors.sockwatch.Watcher`:
  one filtered dump, its parsing, a row per socket, the blocks written);
* ``dump``: the dump and its parsing alone (:class:`~netesto.collectors.sockdiag.SockDiag`);
* ``batched lookups``: N exact sock_diag requests in one ``send``, N answers
  (a batched read by 4-tuple, no hash walk), kernel and recv only;
* ``getsockopt``: ``getsockopt(TCP_INFO)`` on each socket from Python, the
  read the built-in sampler makes (in C), cold and back to back (warm);
* ``engine row warm``: the engine's sampler tick per row (C, blocks written),
  ticks back to back as :func:`bench.sampling_cost.sample_cost` runs them.

The target of the engine's sampler (< 1.5 % of the engine's CPU with 64
stream flows) is 2.3 us a row (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.diag_cost import CHILD_EHASH, small_hash_namespace
from bench.sampling_cost import connections

TARGET_US = 2.3


def _per_socket_us(fn: Callable[[], Any], n: int, ticks: int, cold: bool = True) -> float:
    """Thread CPU (us) per socket of ``fn()``, called ``ticks`` times 10 ms apart (the sleeps not
    counted), or back to back (``cold`` False)."""
    spent = 0
    for _ in range(ticks):
        if cold:
            time.sleep(0.01)
        t0 = time.thread_time_ns()
        fn()
        spent += time.thread_time_ns() - t0
    return spent / 1e3 / ticks / n


def _batched(nl: socket.socket, conns: list[socket.socket], buf: bytearray) -> Callable[[], None]:
    """N SOCK_DIAG_BY_FAMILY exact requests (inet_diag_req_v2 with the 4-tuple) sent at once, N answers read."""
    reqs = []
    for seq, c in enumerate(conns, 1):
        (lh, lp), (rh, rp) = c.getsockname(), c.getpeername()
        sid = struct.pack("!HH", lp, rp) + socket.inet_aton(lh).ljust(16, b"\0") + socket.inet_aton(rh).ljust(16, b"\0")
        body = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 1 << 1, 0xFFFFFFFF) + sid + struct.pack(
            "=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)
        reqs.append(struct.pack("=IHHII", 16 + len(body), 20, 1, seq, 0) + body)
    batch = b"".join(reqs)
    view = memoryview(buf)

    def run() -> None:
        nl.send(batch)
        for _ in conns:
            nl.recv_into(view)

    return run


def inside(sizes: list[int], ticks: int) -> dict[str, dict[str, float]]:
    """The costs in this process's namespace, per size."""
    from netesto.collectors.sockdiag import SockDiag, SocketFilter
    from netesto.collectors.sockwatch import Watcher
    from netesto.collectors.watchspec import WatchSpec

    out: dict[str, dict[str, float]] = {}
    work = Path(tempfile.mkdtemp(prefix="bench_sockdiag"))
    try:
        for n in sizes:
            lsock, conns, peers = connections(n, "cubic")
            port = lsock.getsockname()[1]
            row: dict[str, float] = {}
            watcher = Watcher(WatchSpec(exp="1", datadir=str(work), host="b", name=f"n{n}", remote_ports=(port,)))
            row["watch tick"] = _per_socket_us(watcher.tick, n, ticks)
            watcher.close()
            with SockDiag(SocketFilter(remote_ports=(port,))) as diag:
                assert len(diag.dump()) == n
                row["dump"] = _per_socket_us(diag.dump, n, ticks)
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4) as nl:
                nl.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
                row["batched lookups"] = _per_socket_us(_batched(nl, conns, bytearray(1 << 16)), n, ticks)
            row["getsockopt"] = _per_socket_us(lambda: [c.getsockopt(6, 11, 280) for c in conns], n, ticks)
            row["getsockopt warm"] = _per_socket_us(lambda: [c.getsockopt(6, 11, 280) for c in conns], n, ticks,
                                                    cold=False)
            try:
                from bench.sampling_cost import WHOLE_TICK, sample_cost

                costs = sample_cost(n, "cubic", work / f"engine{n}", ticks=ticks)
                row["engine row warm"] = next(v for k, v in costs.items() if k.startswith(WHOLE_TICK))
            except (ImportError, StopIteration, OSError) as exc:  # the engine's layout moved: say so
                print(f"# engine row not measured: {exc}", file=sys.stderr)
            for s in [lsock, *conns, *peers]:
                s.close()
            out[str(n)] = row
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,64", help="idle connections per reading")
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.inside:
        print(json.dumps(inside(sizes, args.ticks)))
        return 0
    if os.geteuid() != 0:
        print("bench_sockdiag needs root (a namespace of its own)")
        return 2
    with small_hash_namespace(f"nbsd{os.getpid()}") as ns:
        proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "bench.bench_sockdiag", "--inside",
                               "--sizes", args.sizes, "--ticks", str(args.ticks)], capture_output=True, text=True,
                              timeout=1800, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
        return 1
    sys.stderr.write(proc.stderr)
    result = json.loads(proc.stdout)
    names = ["watch tick", "dump", "batched lookups", "getsockopt", "getsockopt warm", "engine row warm"]
    print(f"# us of thread CPU per socket-sample, ticks 10 ms apart, in a namespace with its own {CHILD_EHASH}-bucket "
          f"hash; the engine's target: {TARGET_US} us a row")
    print(f"{'sockets':>7} " + " ".join(f"{n:>16}" for n in names) + f" {'watch/getsockopt':>16}")
    for size, row in result.items():
        print(f"{size:>7} " + " ".join(f"{row.get(n, float('nan')):>16.2f}" for n in names)
              + f" {row['watch tick'] / row['getsockopt']:>16.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
