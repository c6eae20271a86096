"""Stream goodput of the built-in engine vs iperf3 on one veth pair (1 and 4 flows, cubic and bbr).

Run as root from the repository root: ``python3 -m bench.bench_stream [--dur 4] [--reps 5]``.
Both tools run in the same run on the same pair of namespaces (alternating),
unpinned; the machine is shared, so read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests import netns

ENGINE = [sys.executable, "-m", "netesto.engine"]


class Engine:
    """The engine's server in namespace b; clients run from namespace a."""

    def __init__(self, pair: netns.VethPair, workdir: Path, server_prefix: list[str] = ()) -> None:
        self.pair = pair
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc = pair.popen(pair.b, [*server_prefix, *ENGINE, "server", "--bind", pair.addr_b, "--port", "0",
                                        "--datadir", str(workdir / "srv")],
                               stdout=subprocess.PIPE, text=True)
        self.port = json.loads(self.proc.stdout.readline())["port"]
        self.runs = 0

    def run(self, flows: list[dict[str, Any]], workers: int | None = None,
            client_prefix: list[str] = ()) -> list[dict[str, Any]]:
        """Run flows (dicts without server/port); returns the client summaries."""
        self.runs += 1
        specs = [dict(f, server=self.pair.addr_b, port=self.port, exp=self.runs) for f in flows]
        path = self.workdir / f"specs{self.runs}.json"
        path.write_text(json.dumps(specs))
        argv = [*client_prefix, *ENGINE, "client", "--specs", str(path), "--datadir", str(self.workdir / "cli")]
        if workers:
            argv += ["--workers", str(workers)]
        proc = self.pair.run(self.pair.a, argv, timeout=120)
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        ends = [e for e in events if e["event"] in ("done", "error")]
        bad = [e for e in ends if e["event"] == "error"]
        if bad or proc.returncode:
            raise RuntimeError(f"engine flows failed: {bad or proc.stderr}")
        return [e["summary"] for e in ends]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def iperf3(pair: netns.VethPair, dur: float, ca: str, parallel: int = 1) -> float:
    """Receiver goodput (bit/s) of one iperf3 run."""
    server = pair.popen(pair.b, ["iperf3", "-s", "-1", "-B", pair.addr_b, "-p", "5299"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        argv = ["iperf3", "-c", pair.addr_b, "-p", "5299", "-t", str(dur), "-J", "-C", ca]
        if parallel > 1:
            argv += ["-P", str(parallel)]
        proc = pair.run(pair.a, argv, timeout=dur + 30)
        data = json.loads(proc.stdout)
        return float(data["end"]["sum_received"]["bits_per_second"])
    finally:
        server.wait(timeout=10)


def engine_stream(engine: Engine, dur: float, ca: str, flows: int = 1, interval: float = 0.01) -> float:
    summaries = engine.run([
        dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca=ca, interval=interval)
        for i in range(flows)
    ])
    # goodput over the flows' common duration, like iperf3's sum
    return sum(s["bytes_tx"] * 8 / s["duration"] for s in summaries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dur", type=float, default=4.0)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("iperf3") is None:
        print("iperf3 is not installed")
        return 1
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_stream"))
    try:
        engine = Engine(pair, workdir)
        print(f"# stream goodput, {args.dur} s runs, median of {args.reps}, veth pair {pair.a}/{pair.b} "
              "(shared noisy 2-vCPU machine)")
        print(f"{'case':<28}{'engine Gbit/s':>15}{'iperf3 Gbit/s':>15}{'ratio':>8}   (of medians; each run pair's ratio)")
        for label, ca, n in (("1 flow cubic", "cubic", 1), ("1 flow bbr", "bbr", 1),
                             ("4 flows cubic (-P 4)", "cubic", 4), ("4 flows bbr (-P 4)", "bbr", 4)):
            ours, theirs = [], []
            for _ in range(args.reps):
                ours.append(engine_stream(engine, args.dur, ca, n))
                theirs.append(iperf3(pair, args.dur, ca, n))
            a, b = statistics.median(ours), statistics.median(theirs)
            pairs = sorted(x / y for x, y in zip(ours, theirs))
            print(f"{label:<28}{a / 1e9:>15.2f}{b / 1e9:>15.2f}{a / b:>8.2f}"
                  f"   [pairs {pairs[0]:.2f}-{pairs[-1]:.2f}]", flush=True)
        engine.close()
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
