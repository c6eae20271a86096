"""What sampling costs: goodput of 64 flows sampled every 10 ms vs (nearly) unsampled, and
the CPU the sampler of 100 flows at 100 Hz uses.

``python3 -m bench.bench_sampling [--dur 3] [--reps 2]`` (root, repository root).

1. 64 TCP_STREAM flows on a veth pair with ``interval=0.01`` vs ``interval=60``
   (one sample at the start and one at the end: the engine's way of "not
   sampling"), alternating runs; ratio of aggregate goodput.
2. 100 real, established TCP connections (loopback) each wrapped in a flow end
   with its ``.nflow`` writer, sampled at 100 Hz by the worker's Sampler on the
   real event loop for a few seconds: process CPU time / wall time.

Shared noisy machine: read the ratio, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_stream import Engine
from netesto.traffic.client import StreamClient
from netesto.traffic.flowend import Worker
from netesto.traffic.loop import Loop
from netesto.traffic.rawformat import read_flow
from netesto.traffic.spec import FlowSpec
from tests import netns


def goodput(engine: Engine, dur: float, interval: float, flows: int) -> float:
    summaries = engine.run([
        dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca="cubic", interval=interval)
        for i in range(flows)
    ])
    return sum(s["bytes_tx"] for s in summaries) * 8 / max(s["duration"] for s in summaries)


def sampler_cpu(flows: int, hz: float, seconds: float, workdir: Path) -> tuple[float, int]:
    """CPU fraction of one core used to sample ``flows`` idle connections at ``hz``."""
    lsock = socket.create_server(("127.0.0.1", 0), backlog=flows)
    peers, conns = [], []
    for _ in range(flows):
        c = socket.create_connection(lsock.getsockname())
        s, _ = lsock.accept()
        c.sendall(b"x" * 1000)
        s.recv(1000)
        peers.append(s)
        conns.append(c)
    loop = Loop()
    worker = Worker(loop, str(workdir), lambda event: None)
    ends = []
    for i, conn in enumerate(conns):
        spec = FlowSpec(flow_id=f"s-{i}", test="TCP_STREAM", server="127.0.0.1", port=1,
                        interval=1.0 / hz, exp=1)
        end = StreamClient(worker, spec)
        end.sock = conn
        ends.append(end)
    for end in ends:
        end.begin()
    stop = time.monotonic() + seconds
    cpu0, t0 = time.process_time(), time.monotonic()
    loop.run(lambda: time.monotonic() >= stop)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    rows = 0
    for end in ends:
        end.finish()
        rows += read_flow(workdir / "1" / "flows" / f"{end.spec.flow_id}.client.nflow").rows
    for s in peers:
        s.close()
    lsock.close()
    return cpu / wall, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dur", type=float, default=3.0)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--flows", type=int, default=64)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench_sampling"))
    pair = netns.make_veth_pair()
    try:
        engine = Engine(pair, workdir / "engine")
        sampled, unsampled = [], []
        print(f"# sampling cost ({args.dur} s runs, {args.reps} alternating pairs; shared noisy 2-vCPU machine)")
        for _ in range(args.reps):
            unsampled.append(goodput(engine, args.dur, 60.0, args.flows))
            sampled.append(goodput(engine, args.dur, 0.01, args.flows))
            print(f"  pair: unsampled {unsampled[-1] / 1e9:.2f} Gbit/s, sampled {sampled[-1] / 1e9:.2f} Gbit/s, "
                  f"ratio {sampled[-1] / unsampled[-1]:.3f}", flush=True)
        engine.close()
        a, b = statistics.median(sampled), statistics.median(unsampled)
        ratios = sorted(x / y for x, y in zip(sampled, unsampled))
        print(f"{args.flows} flows goodput sampled@10ms {a / 1e9:.2f} Gbit/s, unsampled {b / 1e9:.2f} Gbit/s, "
              f"ratio of medians {a / b:.3f}, median pair ratio {statistics.median(ratios):.3f} "
              "(target >= 0.99)", flush=True)
        frac, rows = sampler_cpu(100, 100.0, 3.0, workdir / "sampler")
        print(f"sampler, 100 flows at 100 Hz: {100 * frac:.2f} % of one core ({rows} rows written; "
              "target < 5 %)")
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
