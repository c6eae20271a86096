"""Benchmark: ``netesto plan``'s run estimates against real runs of the inlib macros (target: within 10 %).

Brings up a 3-host namespace testbed (100mbit, 10 ms) and runs each script below twice in a
fresh Python process, as ``netesto run`` and a notebook's kernel do: the first run with nothing
imported or learned (what ``netesto plan`` estimates), the second with processing's modules
imported and the hosts' start leads learned (what a notebook's next cell or a sweep's next point
estimates, ``run_estimate()`` as the process stands). Prints per script and run the estimate, the
wall time and the error, then the largest error against the target. There is no peer tool that
estimates run times; the machine is shared: run it with ``nice -n 10`` on a quiet machine.

Run: ``python3 -m bench.bench_estimate`` (root).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 0.10
PREFIX = "SOURCE inlib\nRUN InlibShortWaits\n"
SCRIPTS = [
    "RUN OneFlowStream server=h1 client=h2 ca=cubic dur=2",
    "RUN TwoFlowBaseStream server=h1 client1=h2 client2=h3 ca1=cubic ca2=reno dur1=3 dur2=2 delay2=1",
    "RUN MServerRR servers=h1 clients=h2,h3 ca=cubic reqs=1K,10K dur=2",
    "RUN MServerStream servers=h1 clients=h2,h3 ca=cubic,reno dur=1",
    "SET settleWait=2\nSET statsWait=1\nSET dataWait=1\nSET expWait=1\n"
    "RUN OneFlowStream server=h1 client=h2 ca=cubic dur=3 instances=4",
]

_CHILD = """
import json, sys, time
from netesto.controller.plan import make_plan
import netesto
script, lab, work = sys.argv[1], sys.argv[2], sys.argv[3]
out = []
for run in (1, 2):
    plan = make_plan(script, counter=0)
    estimate = plan.run_estimate()
    t0 = time.monotonic()
    netesto.run(script, lab, f"{work}/{run}")
    out.append({"estimate": estimate, "real": time.monotonic() - t0})
print(json.dumps(out))
"""


def main() -> int:
    from netesto.testbed import lifecycle

    ok, why = lifecycle.namespaces_supported()
    if not ok:
        print(f"bench_estimate: skipped: {why}")
        return 0
    name = f"bes{os.getpid() % 10000}"
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        up = lifecycle.up(lifecycle.TestbedConfig.parse(name=name, hosts=3, dir=tmp / "tb", bw="100mbit", rtt="10ms"))
        try:
            print("# script | run | estimate s | real s | error (estimate / real - 1)")
            for i, text in enumerate(SCRIPTS):
                script = PREFIX + text
                proc = subprocess.run([sys.executable, "-c", _CHILD, script, str(up.lab), str(tmp / f"w{i}")],
                                      capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    print(f"{text.splitlines()[-1]}: failed: {proc.stderr[-1500:]}")
                    return 1
                for n, got in enumerate(json.loads(proc.stdout.splitlines()[-1]), 1):
                    err = got["estimate"] / got["real"] - 1
                    worst = max(worst, abs(err))
                    label = "first (netesto plan)" if n == 1 else "second (imports done, leads learned)"
                    print(f"{text.splitlines()[-1]} | {label} | {got['estimate']:.1f} | {got['real']:.1f} | "
                          f"{100 * err:+.0f} %", flush=True)
        finally:
            lifecycle.down(name)
    print(f"largest error {100 * worst:.0f} %; target within {100 * TARGET:.0f} %: "
          f"{'met' if worst <= TARGET else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
