"""Collectors and drivers against what they replace, on the same machine in the same run.

1. Host-statistics snapshot: :func:`netesto.collectors.hoststats.snapshot` vs the
   original's doServer.sh snapshot (``cat`` of /proc/net files, ``sysctl -a -e``,
   ``top -n 1 -b``, ``ip -s link`` for ifconfig, ``ethtool -S/-a/-c/-k`` on one
   interface), both inside one namespace; median wall time of N rounds.
2. iperf3 driver: goodput of ``run_flow`` (driver=iperf3) vs plain
   ``iperf3 -c`` on the same veth pair, alternating, cubic; the ratio should be ~1
   (the driver only adds JSON parsing after the flow).
3. Ping collector: CPU of this process while a collector records 100 probes/s,
   as percent of one core.

Namespaces are created with this benchmark's own prefix and removed at the end.
The machine is shared (8 engineers, 2 vCPUs): numbers are noisy, compare ratios.

    python3 -m bench.bench_collectors [--rounds 5] [--dur 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netesto.drivers import iperf3
from netesto.collectors.ping import PingCollector
from netesto.raw.nflow import read_flow
from netesto.protocol.flowspec import FlowSpec

PREFIX = f"nbc{os.getpid() % 100000}"
ROOT = Path(__file__).resolve().parents[1]


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def make_pair() -> tuple[str, str, str]:
    a, b = f"{PREFIX}a", f"{PREFIX}b"
    sh("ip", "netns", "add", a)
    sh("ip", "netns", "add", b)
    sh("ip", "link", "add", f"{PREFIX}x", "type", "veth", "peer", "name", f"{PREFIX}y")
    sh("ip", "link", "set", f"{PREFIX}x", "netns", a)
    sh("ip", "link", "set", f"{PREFIX}y", "netns", b)
    for ns, dev, addr in ((a, f"{PREFIX}x", "10.251.7.1"), (b, f"{PREFIX}y", "10.251.7.2")):
        sh("ip", "-n", ns, "link", "set", dev, "name", "veth0")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "veth0")
        sh("ip", "-n", ns, "link", "set", "veth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    return a, b, "10.251.7.2"


def drop_pair() -> None:
    for ns in (f"{PREFIX}a", f"{PREFIX}b"):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def original_snapshot(ns: str, dest: Path) -> None:
    """What doServer.sh did: one process per file."""
    run = ["ip", "netns", "exec", ns]
    jobs = [
        (["cat", "/proc/net/snmp"], "snmp"), (["cat", "/proc/net/snmp6"], "snmp6"),
        (["cat", "/proc/net/netstat"], "netstat"), (["sysctl", "-a", "-e"], "sysctl"),
        (["top", "-n", "1", "-b"], "top"), (["ip", "-s", "link"], "ifconfig"),
        (["ethtool", "-S", "veth0"], "ethtool-S"), (["ethtool", "-a", "veth0"], "ethtool-a"),
        (["ethtool", "-c", "veth0"], "ethtool-c"), (["ethtool", "-k", "veth0"], "ethtool-k"),
    ]
    for argv, suffix in jobs:
        with open(dest / f"h.{suffix}", "w") as fh:
            subprocess.run([*run, *argv], stdout=fh, stderr=subprocess.STDOUT)


def ours_snapshot(ns: str, dest: Path) -> None:
    # One interpreter per snapshot, like an agent request would NOT need (the agent is
    # already running): this includes Python start-up, so it is the pessimistic figure.
    code = "import sys; from netesto.collectors.hoststats import snapshot; snapshot(sys.argv[1], 'h')"
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code, str(dest)],
                   check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def in_process_snapshot(ns: str, dest: Path, rounds: int) -> list[float]:
    code = (
        "import sys, time, json; from netesto.collectors.hoststats import snapshot\n"
        "out = []\n"
        f"for i in range({rounds}):\n"
        "    t = time.perf_counter(); snapshot(sys.argv[1], 'h'); out.append(time.perf_counter() - t)\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code, str(dest)],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return json.loads(res.stdout)


def timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def bench_snapshot(ns: str, tmp: Path, rounds: int) -> None:
    orig, ours = [], []
    for i in range(rounds):
        for name, fn, acc in (("orig", original_snapshot, orig), ("ours", ours_snapshot, ours)):
            d = tmp / f"{name}{i}"
            d.mkdir()
            acc.append(timed(fn, ns, d))
    inproc = in_process_snapshot(ns, tmp / "inproc", rounds)
    mo, mu, mi = (statistics.median(x) * 1000 for x in (orig, ours, inproc))
    print(f"snapshot  original-style {mo:7.1f} ms | netesto (new python) {mu:7.1f} ms "
          f"| netesto in agent {mi:6.1f} ms | speed-up {mo / mu:5.1f}x / {mo / mi:5.1f}x")


def bench_iperf3(a: str, b: str, addr: str, tmp: Path, rounds: int, dur: float) -> None:
    server = iperf3.start_server(5291, argv_prefix=["ip", "netns", "exec", b])
    drv, raw = [], []
    try:
        for i in range(rounds):
            spec = FlowSpec(f"a-b-1-{i}", "TCP_STREAM", addr, 5291, ca="cubic", dur=dur, interval=0.2)
            assert iperf3.run_flow(spec, tmp, argv_prefix=["ip", "netns", "exec", a])
            flow = read_flow(tmp / "0" / "flows" / f"a-b-1-{i}.client.nflow")
            drv.append(flow.summary["rate_tx_bps"])
            out = subprocess.run(["ip", "netns", "exec", a, "iperf3", "-c", addr, "-p", "5291",
                                  "-t", f"{dur:g}", "-J", "-C", "cubic"],
                                 capture_output=True, text=True, check=True)
            raw.append(json.loads(out.stdout)["end"]["sum_sent"]["bits_per_second"])
    finally:
        iperf3.stop_server(server)
    md, mr = statistics.median(drv) / 1e9, statistics.median(raw) / 1e9
    print(f"iperf3    driver {md:6.2f} Gbit/s | plain iperf3 {mr:6.2f} Gbit/s | ratio {md / mr:5.2f} "
          f"(runs: {' '.join(f'{x / 1e9:.1f}' for x in drv)} / {' '.join(f'{x / 1e9:.1f}' for x in raw)})")


def bench_ping(a: str, addr: str, tmp: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    col = PingCollector(addr, tmp / "ping.nflow", interval=0.01, duration=3,
                        argv_prefix=["ip", "netns", "exec", a]).start()
    summary = col.wait(10)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    rows = read_flow(tmp / "ping.nflow").rows
    print(f"ping      {rows} probes at 100/s recorded; collector CPU {100 * cpu / wall:4.1f} % of one core "
          f"(received {summary.received if summary else '?'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dur", type=float, default=2.0)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)")
        return 1
    print("shared 2-vCPU machine: numbers are noisy; compare the ratios")
    try:
        a, b, addr = make_pair()
        with tempfile.TemporaryDirectory() as tmp:
            bench_snapshot(a, Path(tmp), args.rounds)
            bench_iperf3(a, b, addr, Path(tmp), args.rounds, args.dur)
            bench_ping(a, addr, Path(tmp))
    finally:
        drop_pair()
    return 0


if __name__ == "__main__":
    sys.exit(main())
