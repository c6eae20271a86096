"""Request/response rate of the built-in engine vs sockperf ping-pong on one veth pair.

``python3 -m bench.bench_rr [--dur 3] [--reps 2]`` (root, repository root).
Both tools' ends are pinned the same way with taskset: same CPU (both on
CPU 0) and cross CPU (client CPU 0, server CPU 1); on 2-vCPU machines the
placement changes the rate ~5x. The engine sends 1-byte requests and
replies; sockperf's smallest message is 14 bytes (its header) and it runs
with ``--full-rtt --mps max``. Also: 16 engine flows on one worker (aggregate)
vs the sockperf 1-flow figure. Shared noisy machine: read the ratios.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_stream import Engine
from tests import netns

_VALID = re.compile(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=\d+; ReceivedMessages=(\d+)")


def sockperf_tps(pair: netns.VethPair, dur: float, cpu_client: int, cpu_server: int) -> float:
    server = pair.popen(pair.b, ["taskset", "-c", str(cpu_server), "sockperf", "server", "-i", pair.addr_b,
                                 "-p", "11311", "--tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.4)
        proc = pair.run(pair.a, ["taskset", "-c", str(cpu_client), "sockperf", "ping-pong", "-i", pair.addr_b,
                                 "-p", "11311", "--tcp", "-m", "14", "-t", str(int(dur)), "--full-rtt",
                                 "--mps", "max"], timeout=dur + 30)
        m = _VALID.search(proc.stdout + proc.stderr)
        if not m:
            raise RuntimeError(f"no sockperf result: {proc.stdout[-500:]} {proc.stderr[-500:]}")
        return int(m.group(2)) / float(m.group(1))
    finally:
        server.terminate()
        server.wait(timeout=5)


def engine_tps(engine: Engine, dur: float, flows: int, cpu_client: int) -> float:
    summaries = engine.run(
        [dict(flow_id=f"a-b-0-{i}", test="TCP_RR", dur=dur, ca="cubic") for i in range(flows)],
        workers=1,
        client_prefix=["taskset", "-c", str(cpu_client)],
    )
    return sum(s["tps"] for s in summaries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dur", type=float, default=3.0)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("sockperf") is None or shutil.which("taskset") is None:
        print("needs sockperf and taskset")
        return 1
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_rr"))
    print(f"# TCP request/response, {args.dur} s runs, median of {args.reps} (shared noisy 2-vCPU machine)")
    print(f"{'case':<40}{'engine tps':>12}{'sockperf tps':>14}{'ratio':>8}")
    try:
        for label, cpu_c, cpu_s in (("same CPU (0/0)", 0, 0), ("cross CPU (0/1)", 0, 1)):
            engine = Engine(pair, workdir / label.split()[0], server_prefix=["taskset", "-c", str(cpu_s)])
            try:
                one, peer, many = [], [], []
                for _ in range(args.reps):
                    one.append(engine_tps(engine, args.dur, 1, cpu_c))
                    peer.append(sockperf_tps(pair, args.dur, cpu_c, cpu_s))
                    many.append(engine_tps(engine, args.dur, 16, cpu_c))
            finally:
                engine.close()
            a, b, c = statistics.median(one), statistics.median(peer), statistics.median(many)
            print(f"{'1 flow, ' + label:<40}{a:>12.0f}{b:>14.0f}{a / b:>8.2f}")
            print(f"{'16 flows 1 worker vs sockperf 1 flow, ' + label.split()[0]:<40}{c:>12.0f}{b:>14.0f}{c / b:>8.2f}",
                  flush=True)
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
