"""Stream goodput of the engine vs iperf3 and netperf, with the same write size and CPU placement.

``nice -n 10 python3 -m bench.bench_stream [--dur 4] [--reps 3] [--cpus 0,1]`` (root, repository root).

1 and 4 flows, cubic and bbr, on one veth pair. Like with like:

- write size: the engine writes ``SEND_CHUNK`` (512 KiB) and reads 256 KiB
  at a time; iperf3 gets ``-l 512K`` (its server reads the same length),
  netperf ``-m 512K -M 256K``.
- placement: every client (engine client and its workers, iperf3 -c,
  netperf) runs under ``taskset -c <client CPU>``, every server (engine
  server, iperf3 -s, netserver and its children) under ``taskset -c
  <server CPU>`` (``--cpus none``: unpinned, all alike).
- 4 flows: 4 engine flows (one client process, its default workers) vs
  ``iperf3 -P 4`` (one process) and 4 netperf processes started together.
- the engine samples every flow every 10 ms (its default; part of its cost),
  the peers sample nothing.

Readings, all the receiver's goodput: engine, sum over flows of the server
end's bytes received / its duration (from its ``.nflow`` summary; the client's
bytes sent must equal them); iperf3, the receiver's ``sum_received``; netperf,
the sum of its THROUGHPUT (the receiver's bytes over the test's time).
One more case, labelled, runs the peers at their default write sizes
(iperf3 128 KiB, netperf the socket buffer's size, 16 KiB here) without a
target. Target: engine / peer >= 1.0 in every case. Shared noisy machine:
read the ratios and their spread, not the absolute numbers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Engine, arguments, pin, ready, rotated, summary_line, table, verdict, where
from netesto.engine.flowend import SEND_CHUNK
from tests import netns

RECV_SIZE = 1 << 18  # the engine worker's receive buffer (Worker.rxbuf)
Cpus = tuple[int | None, int | None]


def iperf3(pair: netns.VethPair, dur: float, ca: str, flows: int, cpus: Cpus, write: int | None) -> float:
    """Receiver goodput (bit/s) of one iperf3 run (``write`` None: its default length)."""
    server = pair.popen(pair.b, [*pin(cpus[1]), "iperf3", "-s", "-1", "-B", pair.addr_b, "-p", "5299"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        argv = [*pin(cpus[0]), "iperf3", "-c", pair.addr_b, "-p", "5299", "-t", str(dur), "-J", "-C", ca,
                "-P", str(flows)]
        if write:
            argv += ["-l", str(write)]
        proc = pair.run(pair.a, argv, timeout=dur + 30)
        return float(json.loads(proc.stdout)["end"]["sum_received"]["bits_per_second"])
    finally:
        server.wait(timeout=10)


def netperf(pair: netns.VethPair, bin_dir: Path, dur: float, ca: str, flows: int, cpus: Cpus,
            write: int | None) -> float:
    """Summed THROUGHPUT (bit/s) of ``flows`` netperf TCP_STREAM processes started together."""
    test = ["-k", "THROUGHPUT,THROUGHPUT_UNITS", "-K", f"{ca},{ca}"]
    if write:
        test += ["-m", str(write), "-M", str(RECV_SIZE)]
    argv = [*pin(cpus[0]), str(bin_dir / "netperf"), "-H", pair.addr_b, "-p", "12865", "-t", "TCP_STREAM",
            "-l", str(int(dur)), "-P", "0", "--", *test]
    procs = [pair.popen(pair.a, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(flows)]
    total = 0.0
    for proc in procs:
        out, err = proc.communicate(timeout=dur + 30)
        keys = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if proc.returncode or keys.get("THROUGHPUT_UNITS") != "10^6bits/s":
            raise RuntimeError(f"netperf failed: {out[-300:]} {err[-300:]}")
        total += float(keys["THROUGHPUT"]) * 1e6
    return total


def engine_stream(engine: Engine, dur: float, ca: str, flows: int, cpus: Cpus) -> float:
    """Receiver goodput (bit/s): the server ends' bytes received over their durations, summed over flows."""
    ids = [f"a-b-0-{i}" for i in range(flows)]
    sent = engine.run([dict(flow_id=fid, test="TCP_STREAM", dur=dur, ca=ca, interval=0.01) for fid in ids],
                      client_prefix=pin(cpus[0]))
    got = engine.server_summaries(ids)
    if sum(s["bytes_tx"] for s in sent) != sum(s["bytes_rx"] for s in got):
        raise RuntimeError("engine: the server received other than the client sent")
    return sum(s["bytes_rx"] * 8 / s["duration"] for s in got)


def main() -> int:
    args = arguments(__doc__, 4.0).parse_args()
    bin_dir = ready("bench_stream", ("iperf3",))
    if bin_dir is None:
        return 1
    cpus = args.cpus
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_stream"))
    results: list[bool | None] = []
    try:
        netserver = pair.popen(pair.b, [*pin(cpus[1]), str(bin_dir / "netserver"), "-D", "-L", pair.addr_b,
                                        "-p", "12865"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        engine = Engine(pair, workdir, server_prefix=pin(cpus[1]))
        time.sleep(0.3)
        if netserver.poll() is not None:
            raise RuntimeError("netserver did not start")
        print(f"# stream goodput (Gbit/s), {args.dur:g} s runs, {args.reps} interleaved reps, veth pair, "
              f"{where(cpus)} for every tool; shared noisy 2-vCPU machine")
        print(f"# engine writes {SEND_CHUNK // 1024} KiB, reads {RECV_SIZE // 1024} KiB; ratio = engine / peer "
              "of the same rep")
        cases = [(f"{n} flow{'s' if n > 1 else ''} {ca}", ca, n, True)
                 for n in (1, 4) for ca in ("cubic", "bbr")]
        cases.append(("1 flow cubic, PEERS AT THEIR DEFAULT WRITE SIZES", "cubic", 1, False))
        for label, ca, n, same in cases:
            write = SEND_CHUNK if same else None
            runs: dict[str, list[float]] = {"engine": [], "iperf3": [], "netperf": []}
            tools = {
                "engine": lambda: engine_stream(engine, args.dur, ca, n, cpus),
                "iperf3": lambda: iperf3(pair, args.dur, ca, n, cpus, write),
                "netperf": lambda: netperf(pair, bin_dir, args.dur, ca, n, cpus, write),
            }
            for rep in range(args.reps):
                for name in rotated(list(tools), rep):
                    runs[name].append(tools[name]())
            peers = (f"iperf3 -P {n} -l 512K, {n} x netperf -m 512K -M 256K" if same
                     else f"iperf3 -P {n} (-l 128K default), {n} x netperf (default -m/-M)")
            table(f"{label}  [vs {peers}]", {k: [v / 1e9 for v in vals] for k, vals in runs.items()}, ".2f")
            for peer in ("iperf3", "netperf"):
                results.append(verdict(f"engine / {peer}", runs["engine"], runs[peer],
                                       ">=", 1.0 if same else None))
        engine.close()
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    summary_line(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
