"""What drawn sizes cost: one TCP_RR (and TCP_CRR) flow whose sizes are drawn per transaction, against the same
flow with constant sizes (the engine's C loops, and its Python loops) and netperf.

``nice -n 10 python3 -m bench.bench_workload [--dur 3] [--reps 3]`` (root, repository root).

A drawn flow's transactions run in Python on the worker's epoll loop (the C loops
take one request and reply size per flow; netesto/engine/kinds/client_wrr.py,
client_wcrr.py). Like with like: requests and replies of 1 or 2 bytes
(``uniform(min=1,max=2)``, rounded to whole bytes) against 1-byte constant ones and
``netperf -t TCP_RR -- -r 1,1`` (TCP_CRR likewise), one flow, client on CPU 0 and
server on CPU 1, the namespaces' default congestion control. Printed per case:
transactions/s and the client worker's CPU per transaction (us), every repetition,
then the ratios drawn / constant (C), drawn / constant (Python) and drawn / netperf
(medians of the per-repetition ratios, no target: this measures a cost, docs/workloads.md
states it).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.bench_rr import default_cc, netperf_rr
from bench.common import Engine, arguments, place, ready, rotated, table, verdict
from netesto.engine.native import fastloop
from tests import netns

DRAWN = {"req_dist": "uniform(min=1,max=2)", "reply_dist": "uniform(min=1,max=2)", "seed": 1}
Result = tuple[float, float]  # transactions/s, client CPU us per transaction


def engine_flow(engine: Engine, test: str, dur: float, prefix: list[str], extra: dict[str, Any]) -> Result:
    (s,) = engine.run([dict(flow_id="a-b-0-0", test=test, dur=dur, ca="", **extra)], workers=1, client_prefix=prefix)
    return s["tps"], s["cpu"]["seconds"] / max(1, s["transactions"]) * 1e6


def peer(pair: netns.VethPair, bin_dir: Path, test: str, dur: float) -> Result:
    tps, _, _, cpu, *_ = netperf_rr(pair, bin_dir, test, dur, (0, 1))
    return tps, cpu


def main() -> int:
    args = arguments(__doc__, 3.0, cpus=False).parse_args()
    bin_dir = ready("bench_workload")
    if bin_dir is None:
        return 1
    cpus = (0, 1)
    workdir = Path(tempfile.mkdtemp(prefix="bench_workload"))
    print(f"# 1-flow TCP_RR and TCP_CRR, drawn 1-2 byte sizes vs constant 1 byte, {args.dur:g} s runs, {args.reps} "
          f"interleaved reps, client CPU 0, server CPU 1; C extension importable: {fastloop.AVAILABLE}")
    print(f"# every tool on the namespaces' default congestion control: {default_cc()}; shared noisy 2-vCPU machine")
    pair = netns.make_veth_pair()
    try:
        netserver = pair.popen(pair.b, [*place(cpus[1]), str(bin_dir / "netserver"), "-D", "-L", pair.addr_b,
                                        "-p", "12865"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        native = Engine(pair, workdir / "c", server_prefix=["env", "NETESTO_PURE_PYTHON=0", *place(cpus[1])])
        python = Engine(pair, workdir / "py", server_prefix=["env", "NETESTO_PURE_PYTHON=1", *place(cpus[1])])
        c_prefix = ["env", "NETESTO_PURE_PYTHON=0", *place(cpus[0])]
        py_prefix = ["env", "NETESTO_PURE_PYTHON=1", *place(cpus[0])]
        time.sleep(0.3)
        for test in ("TCP_RR", "TCP_CRR"):
            tools: dict[str, Callable[[], Result]] = {
                "constant C": lambda: engine_flow(native, test, args.dur, c_prefix, {}),
                "constant Python": lambda: engine_flow(python, test, args.dur, py_prefix, {}),
                "drawn": lambda: engine_flow(native, test, args.dur, c_prefix, DRAWN),
                "netperf": lambda: peer(pair, bin_dir, test, args.dur),
            }
            got: dict[str, list[Result]] = {name: [] for name in tools}
            for rep in range(args.reps):
                for name in rotated(list(tools), rep):
                    got[name].append(tools[name]())
            cols = {f"{name} {what}": [r[k] for r in got[name]] for k, what in ((0, "tps"), (1, "cpu us/t"))
                    for name in tools}
            table(f"{test}, 1 flow", cols, ".1f")
            for base in ("constant C", "constant Python", "netperf"):
                verdict(f"{test} tps drawn / {base}", [r[0] for r in got["drawn"]], [r[0] for r in got[base]],
                        target=None)
                verdict(f"{test} cpu/t drawn / {base}", [r[1] for r in got["drawn"]], [r[1] for r in got[base]],
                        target=None)
        native.close()
        python.close()
    finally:
        pair.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
