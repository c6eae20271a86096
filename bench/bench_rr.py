"""Request/response rate of the built-in engine vs sockperf ping-pong on one veth pair.

``python3 -m bench.bench_rr [--dur 3] [--reps 2]`` (root, repository root).
Both tools' ends are pinned the same way with taskset: same CPU (both on
CPU 0) and cross CPU (client CPU 0, server CPU 1); on 2-vCPU machines the
placement changes the rate ~5x. The engine sends 1-byte requests and
replies; sockperf's smallest message is 14 bytes (its header) and it runs
with ``--full-rtt --mps max``. The 1-flow case runs twice: with the C loops
(``netesto.engine._fastloop``, if built) and with ``NETESTO_PURE_PYTHON=1``
on both engine processes; the loop each end really ran is read from the flow
summaries (``rr_loop``, client/server). Also: 16 engine flows on one worker
(aggregate; never solo, so always the Python event loop) vs the sockperf
1-flow figure. Shared noisy machine: read the ratios; the spread is the
lowest and highest of the runs.
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
from netesto.engine import fastloop
from netesto.raw.nflow import read_flow
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


def engine_tps(engine: Engine, dur: float, flows: int, client_prefix: list[str]) -> tuple[float, str]:
    """Aggregate tps and the loops the ends ran (client/server ``rr_loop``; "-" if not solo)."""
    ids = [f"a-b-0-{i}" for i in range(flows)]
    summaries = engine.run([dict(flow_id=fid, test="TCP_RR", dur=dur, ca="cubic") for fid in ids],
                           workers=1, client_prefix=client_prefix)
    server = read_flow(engine.workdir / "srv" / str(engine.runs) / "flows" / f"{ids[0]}.server.nflow").summary or {}
    loops = f"{summaries[0].get('rr_loop', '-')}/{server.get('rr_loop', '-')}" if flows == 1 else "-"
    return sum(s["tps"] for s in summaries), loops


def _spread(values: list[float], fmt: str = ".0f") -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


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
    print(f"# TCP request/response, {args.dur} s runs, median [min-max] of {args.reps} (shared noisy 2-vCPU machine)")
    print(f"# C extension importable here: {fastloop.AVAILABLE}; loop: what client/server ran; "
          "ratio: each run over the sockperf run of its round")
    print(f"{'case':<56}{'loop':>15}{'engine tps':>24}{'sockperf tps':>24}{'ratio':>20}")
    try:
        for label, cpu_c, cpu_s in (("same CPU (0/0)", 0, 0), ("cross CPU (0/1)", 0, 1)):
            engines = {}
            for mode, flag in (("C", "0"), ("python", "1")):
                env = ["env", f"NETESTO_PURE_PYTHON={flag}"]
                engines[mode] = (Engine(pair, workdir / f"{label.split()[0]}-{mode}",
                                        server_prefix=[*env, "taskset", "-c", str(cpu_s)]),
                                 [*env, "taskset", "-c", str(cpu_c)])
            rows: dict[str, tuple[list[float], set[str]]] = {
                name: ([], set()) for name in ("1 flow C", "1 flow python", "16 flows")}
            peer: list[float] = []
            try:
                for _ in range(args.reps):
                    for name, mode, flows in (("1 flow C", "C", 1), ("1 flow python", "python", 1),
                                              ("16 flows", "C", 16)):
                        engine, prefix = engines[mode]
                        tps, loops = engine_tps(engine, args.dur, flows, prefix)
                        rows[name][0].append(tps)
                        rows[name][1].add(loops)
                    peer.append(sockperf_tps(pair, args.dur, cpu_c, cpu_s))
            finally:
                for engine, _ in engines.values():
                    engine.close()
            for name, (runs, seen) in rows.items():
                case = f"{name}, {label}" if name != "16 flows" else f"16 flows 1 worker vs sockperf 1 flow, {label}"
                ratios = [a / b for a, b in zip(runs, peer)]  # each run against the sockperf run next to it
                print(f"{case:<56}{','.join(sorted(seen)):>15}{_spread(runs):>24}{_spread(peer):>24}"
                      f"{_spread(ratios, fmt='.2f'):>20}", flush=True)
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
