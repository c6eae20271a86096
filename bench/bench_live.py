"""Benchmark: what the notebook's live view costs the flows (target: < 1 % of goodput).

A real kernel (jupyter_client, this interpreter) runs the same ``%%netesto`` cell of
16 sampled stream flows on a namespace testbed (the loopback lab without root),
alternating ``--progress live`` (bokeh plot in a widget, redrawn twice a second) and
``--progress bar`` (the progress bar alone), so both arms share the machine's moods.
The link is fast (10 Gbit/s shaping): the flows are CPU-bound on this 2-vCPU VM, so
CPU the view takes shows as goodput lost. Both arms get the agents' cwnd lookups
(the agent always does them). Prints each pair's ratio live/bar, their median and range,
and, sharper on a shared machine, the kernel's CPU while the flows ran in each arm.

Run: ``python3 -m bench.bench_live [--pairs N] [--dur S] [--flows N]``
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

CELL = """%%netesto -D dur={dur} --workdir {work} --progress {mode} --as res
SOURCE inlib
RUN InlibShortWaits
RUN OneFlowStream server=h1 client=h2 ca=cubic dur=$dur expName=live instances={flows}
"""


def _kernel(where: Path) -> tuple[KernelManager, object]:
    spec = where / "kernels" / "bench"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bench", "language": "python"}))
    km = KernelManager(kernel_name="bench", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    km.start_kernel(cwd=str(where))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def _execute(kc: object, code: str, pid: int = 0) -> tuple[str, int, str, float]:
    """(reply status, iopub messages, stdout, kernel CPU share while flows ran) of ``code``.

    Every message is read, as a front end would. The flows' span is from the progress
    line's first "N flow(s) running" (N > 0) to its "0 flow(s) running"; the kernel's
    CPU seconds over that span per second (0.0 if ``pid`` is 0 or no span was seen).
    """
    msg_id = kc.execute(code)  # type: ignore[attr-defined]
    n, out = 0, []
    span: list[tuple[float, float]] = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=300)  # type: ignore[attr-defined]
        except queue.Empty:
            raise TimeoutError(code) from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        n += 1
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            out.append(msg["content"]["text"])
        if pid and msg["msg_type"] == "comm_msg":
            text = str(msg["content"]["data"].get("state", {}).get("value", ""))
            if text.endswith(" flow(s) running") and len(span) < 2:
                running = text.rsplit(" flow(s)", 1)[0].split()[-1] != "0"
                if running != bool(span):  # the first start, then the first "0 running"
                    span.append((time.monotonic(), _cpu(pid)))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    share = (span[1][1] - span[0][1]) / (span[1][0] - span[0][0]) if len(span) == 2 else 0.0
    while True:
        reply = kc.get_shell_msg(timeout=60)  # type: ignore[attr-defined]
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]["status"], n, "".join(out), share


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    from netesto.testbed.lifecycle import TestbedConfig, down, up

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--dur", type=float, default=5.0)
    parser.add_argument("--flows", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        tb = up(TestbedConfig.parse(name=f"bl{os.getpid() % 100000}", hosts=2, bw="10gbit", rtt="2ms", dir=where))
        km, kc = _kernel(where)
        try:
            status, *_ = _execute(kc, f"%load_ext netesto\n%netesto lab {tb.lab}\n")
            assert status == "ok", status
            _execute(kc, CELL.format(dur=1, work=where / "warm", mode="live", flows=2))  # imports, BokehJS
            pid = km.provisioner.pid  # type: ignore[union-attr]
            ratios: list[float] = []
            rates: dict[str, list[float]] = {"live": [], "bar": []}
            msgs: dict[str, list[float]] = {"live": [], "bar": []}
            cpus: dict[str, list[float]] = {"live": [], "bar": []}
            during: dict[str, list[float]] = {"live": [], "bar": []}
            for i in range(args.pairs):
                got = {}
                for mode in (("live", "bar") if i % 2 == 0 else ("bar", "live")):
                    work = where / f"{mode}{i}"
                    c0 = _cpu(pid)
                    status, n, _, share = _execute(kc, CELL.format(dur=args.dur, work=work, mode=mode,
                                                                   flows=args.flows), pid)
                    cpus[mode].append(_cpu(pid) - c0)
                    during[mode].append(share)
                    if status != "ok":
                        raise SystemExit(f"the {mode} run failed")
                    _, _, out, _ = _execute(kc, "print(float(res[res.exps[0]].dataset.rate.sum()))")
                    got[mode] = float(out)
                    rates[mode].append(got[mode])
                    msgs[mode].append(n / args.dur)
                ratios.append(got["live"] / got["bar"])
                print(f"  pair {i + 1}: live {got['live']:8.1f} Mbit/s  bar {got['bar']:8.1f} Mbit/s  "
                      f"ratio {ratios[-1]:.4f}", flush=True)
        finally:
            kc.stop_channels()  # type: ignore[attr-defined]
            km.shutdown_kernel(now=True)
            down(tb.name)
    med = statistics.median(ratios)
    print(f"{args.flows} flows x {args.dur:g} s on a {tb.mode} testbed (10 Gbit/s, 2 ms), {args.pairs} interleaved pairs")
    print(f"  goodput sum, median: live {statistics.median(rates['live']):.1f} Mbit/s, "
          f"bar {statistics.median(rates['bar']):.1f} Mbit/s")
    print(f"  iopub messages per second of flow: live {statistics.median(msgs['live']):.1f}, "
          f"bar {statistics.median(msgs['bar']):.1f}")
    extra = statistics.median(cpus["live"]) - statistics.median(cpus["bar"])
    print(f"  kernel CPU per cell, median: live {statistics.median(cpus['live']):.2f} s, bar "
          f"{statistics.median(cpus['bar']):.2f} s (the view's set-up, before the run, included): "
          f"{extra / (args.dur * (os.cpu_count() or 1)) * 100:.2f} % of the machine over the flows' {args.dur:g} s")
    ncpu = os.cpu_count() or 1
    cost = statistics.median(during["live"]) - statistics.median(during["bar"])
    print(f"  kernel CPU while the flows ran, median: live {statistics.median(during['live']) * 100:.2f} %, "
          f"bar {statistics.median(during['bar']) * 100:.2f} % of a core: the view takes "
          f"{cost / ncpu * 100:.2f} % of the machine's {ncpu} cores  target < 1 %  {'ok' if cost / ncpu < 0.01 else 'MISSED'}")
    print(f"  goodput ratio live/bar: median {med:.4f} [{min(ratios):.4f}-{max(ratios):.4f}]  "
          f"cost {(1 - med) * 100:+.2f} %  (a spread wider than the target: the CPU line above is the sharper measure)")


if __name__ == "__main__":
    main()
