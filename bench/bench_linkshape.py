"""Changing links: up to what rate a trace, and a bandwidth schedule, are followed, and at what CPU cost.

Builds a 2-host testbed (root, namespaces; the delay line, since this kernel
has no netem), then in the same run:

* traces: the link toward h2 becomes trace-driven (the delay line's
  control socket, as the router agent's backend does it) with a constant
  trace of R Mbit/s, and with the shipped ``cellular`` trace; iperf3 floods
  it with UDP at 1.25 x the trace's peak for ``--seconds``; tcpdump on the
  router's egress counts the bytes that left in each 100 ms from the
  trace's start against what the trace offers (:func:`netesto.linktrace.bytes_between`).
  A window is followed when within 3 packets or 3 % (the tolerance
  ``tests/testbed/test_linkshape.py`` holds the lab to); R is followed when
  every window from 0.5 s on is. A second capture, on the router's link
  from h1, says what the sender offered: a window into which it sent less
  than the link was to deliver is the sender's shortfall, not the link's,
  and is counted apart ("short"), not judged.
* schedules: ``netesto run`` of ``SET_LINK host=h2 rate=step(R,R/2,at=1.5)``
  with an iperf3 UDP flood at 1.25 R (the router agent applies the step);
  each 100 ms window's bytes against the rate in force (htb counts each
  packet's Ethernet header too), the windows next to the step left out; the
  step's lateness from the router's record.

Per case: windows followed, the worst window's error, what the delay line
used of one CPU, and how busy the machine was (all CPUs, from /proc/stat).
The peer would be Mahimahi, which is not installed here: the reference is
the trace itself (and, for schedules, the rate asked for). The machine is
shared and noisy.

    python3 -m bench.bench_linkshape [--seconds 3] [--rates 12,24,48,96,192,384] [--step-rates 50,100,200,400,800]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from bench.common import cpu_seconds, delayline_testbed
from netesto.linktrace import MTU, Trace, bytes_between, find_trace, read_trace
from netesto.testbed import shaping
from netesto.testbed.delaycontrol import send_control
from netesto.testbed.tracegen import opportunities, text
from tests.testbed.holds import read_pcap

WINDOW = 0.1  # s
SKIP = 0.5  # s of each case left out at its start


def _machine() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


class Meter:
    """The delay line's CPU seconds and the machine's busy share over a case."""

    def __init__(self, pid: int) -> None:
        self.pid, self.t, self.cpu, self.m = pid, time.monotonic(), cpu_seconds(pid), _machine()

    def read(self) -> tuple[float, float]:
        busy, total = _machine()
        seconds = time.monotonic() - self.t
        return (100 * (cpu_seconds(self.pid) - self.cpu) / seconds,
                100 * (busy - self.m[0]) / max(1, total - self.m[1]))


class Captures:
    """tcpdump of the UDP flood where it enters the router (from h1) and where it leaves (toward h2)."""

    def __init__(self, st: dict[str, Any], tmp: Path, tag: str) -> None:
        h1, h2 = st["links"][:2]
        self.paths = {"in": tmp / f"{tag}.in.pcap", "out": tmp / f"{tag}.out.pcap"}
        self.procs = []
        for side, dev in (("in", h1["router_dev"]), ("out", h2["router_dev"])):
            proc = subprocess.Popen(["ip", "netns", "exec", st["router_ns"], "tcpdump", "-i", dev, "-n", "-s", "64",
                                     "-B", "16384", "-w", str(self.paths[side]), "udp and dst", h2["addr"]],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
            assert proc.stderr is not None
            proc.stderr.readline()  # listening
            self.procs.append(proc)

    def stop(self) -> None:
        for proc in self.procs:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=20)


def _left(path: Path, t0: float) -> list[tuple[float, int]]:
    """(seconds after ``t0``, IP bytes) of every captured packet."""
    return [(ts / 1e9 - t0, int.from_bytes(f[16:18], "big")) for ts, f in read_pcap(path) if len(f) > 18]


def _windows(left: list[tuple[float, int]], seconds: float) -> list[float]:
    n = int(seconds / WINDOW)
    out = [0.0] * n
    for t, size in left:
        k = int(t // WINDOW)
        if 0 <= k < n:
            out[k] += size
    return out


def _judge(sent: Sequence[float], want: Sequence[float], offered: Sequence[float],
           keep: list[int]) -> tuple[int, int, int, float]:
    """(windows followed, windows judged, windows the sender left short, worst error in % of a window's bytes).
    A window is the sender's shortfall when it sent less into the router over it and the window before
    than the link was to deliver over the window."""
    ok, n, short, worst = 0, 0, 0, 0.0
    for k in keep:
        if offered[k] + offered[k - 1] < want[k]:
            short += 1
            continue
        err = abs(sent[k] - want[k])
        ok += err <= max(3 * MTU, 0.03 * want[k])
        n += 1
        worst = max(worst, 100 * err / max(want[k], MTU))
    return ok, n, short, worst


def _iperf_udp(st: dict[str, Any], rate_bps: float, seconds: float) -> None:
    h1, h2 = st["links"][:2]
    srv = subprocess.Popen(["ip", "netns", "exec", h2["ns"], "iperf3", "-s", "-1", "-p", "5311"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.4)
        subprocess.run(["ip", "netns", "exec", h1["ns"], "iperf3", "-c", h2["addr"], "-p", "5311", "-u", "-l", "1472",
                        "-b", str(int(rate_bps)), "-t", str(seconds)], capture_output=True, timeout=seconds + 30)
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def trace_case(st: dict[str, Any], tmp: Path, trace: Trace, path: Path, seconds: float,
               pid: int) -> tuple[str, bool]:
    """One trace's line of the table, and whether every window was followed."""
    h2 = st["links"][1]
    shaping.change_rate(st["router_ns"], h2["router_dev"], 10_000_000_000)
    epoch = time.monotonic_ns() + 300_000_000
    reply = send_control(st["delayline_control"], {"op": "trace", "queue": h2["queue"], "file": str(path),
                                                   "name": trace.name, "epoch_ns": epoch, "limit_packets": 1000})
    hold = float(reply["settings"]["delay_ms"]) / 1000  # type: ignore[index]  # packets leave after it
    t0 = time.time() + (epoch - time.monotonic_ns()) / 1e9
    cap = Captures(st, tmp, path.stem)
    meter = Meter(pid)
    try:
        _iperf_udp(st, 1.25 * trace.peak_bps(), seconds)
    finally:
        cpu, machine = meter.read()
        cap.stop()
        send_control(st["delayline_control"], {"op": "trace", "queue": h2["queue"], "file": None})
    sent = _windows(_left(cap.paths["out"], t0 + hold), seconds)
    offered = _windows(_left(cap.paths["in"], t0), seconds)
    want = [bytes_between(trace, k * 100, (k + 1) * 100) for k in range(len(sent))]
    skip = int(SKIP / WINDOW)
    ok, n, short, worst = _judge(sent, want, offered, list(range(skip, len(sent) - 2)))
    got = sum(sent[skip:-2]) / max(1, sum(want[skip:-2]))
    return (f"  {trace.name:<16} {trace.mean_bps / 1e6:7.1f} {trace.peak_bps() / 1e6:7.1f}   {ok:3d}/{n:<3d} {short:5d} "
            f"{worst:7.1f} %  {got:6.3f}   {cpu:5.1f} %   {machine:5.1f} %"), ok == n and n > 0


def traces(st: dict[str, Any], tmp: Path, rates: list[float], seconds: float, pid: int) -> None:
    print(f"traces: UDP at 1.25 x the peak into a trace link; bytes per {WINDOW * 1000:g} ms on the router's egress")
    print(f"  {'trace':<16} {'mean':>7} {'peak':>7}   {'windows':>7} {'short':>5} {'worst':>9}  {'sent/':>6}   "
          f"{'delay line':>9}  {'machine':>7}")
    print(f"  {'':<16} {'Mbit/s':>7} {'Mbit/s':>7}   {'followed':>7} {'':>5} {'error':>9}  {'trace':>6}   {'CPU':>9}   "
          f"{'busy':>7}")
    followed = 0.0
    for rate in rates:
        path = tmp / f"const{rate:g}.trace"
        path.write_text(text(opportunities(lambda ms: rate * 1e6, 1000)))
        trace = read_trace(path)
        trace = Trace(f"const {rate:g}", trace.times, trace.sha256)
        line, all_ok = trace_case(st, tmp, trace, path, seconds, pid)
        print(line, flush=True)
        if all_ok and rate > followed:
            followed = rate
    cell = find_trace("cellular", [])
    print(trace_case(st, tmp, read_trace(cell), cell, seconds, pid)[0], flush=True)
    print(f"  followed (every window within 3 packets or 3 %) up to {followed:g} Mbit/s of the constant traces")


def schedules(st: dict[str, Any], lab: Path, tmp: Path, rates: list[float], seconds: float, pid: int) -> None:
    from netesto.controller import run

    print(f"\nschedules: netesto run, SET_LINK host=h2 rate=step(R,R/2,at=1.5), iperf3 UDP at 1.25 R, "
          f"bytes per {WINDOW * 1000:g} ms on the router's egress")
    print(f"  {'R Mbit/s':>9} {'windows':>8} {'short':>5} {'worst':>8}  {'step late':>9}  {'delay line':>10}  "
          f"{'machine':>7}")
    followed = 0.0
    dev = st["links"][1]["router_dev"]
    for rate in rates:
        work = tmp / f"step{rate:g}"
        script = (f"SET_LINK host=h2 rate=step({rate:g}mbit,{rate / 2:g}mbit,at=1.5)\n"
                  "DO_SERVER host=h2 exp=COUNTER start=1\n"
                  f"DO_CLIENT host=h1 server=h2 test=UDP_STREAM driver=iperf3 rate={rate * 1.25:g}mbit dur={seconds:g}\n"
                  "GET_DATA host=h1\nGET_DATA host=h2\n")
        cap = Captures(st, tmp, f"step{rate:g}")
        meter = Meter(pid)
        try:
            result = run(script, lab=lab, workdir=work)
        finally:
            cpu, machine = meter.read()
            cap.stop()
        record = json.loads(next(work.glob(f"*/links/{dev}.json")).read_text())
        t0 = record["t0"]
        steps = {s["at"]: s for s in record["steps"]}
        late_ms = (steps[1.5]["applied"] - t0 - 1.5) * 1000
        left = _left(cap.paths["out"], t0)  # htb's rate at an instant is what leaves then
        size = statistics.median(b for _, b in left) if left else 1500
        sent = _windows(left, seconds)
        hold = float(record["base"]["delay"]) / 1000  # the delay line holds them before htb
        offered = _windows(_left(cap.paths["in"], t0 - hold), seconds)
        want = [(rate if k * WINDOW < 1.5 else rate / 2) * 1e6 / 8 * WINDOW * size / (size + 14) for k in range(len(sent))]
        keep = [k for k in range(int(SKIP / WINDOW), len(sent) - 2) if abs(k * WINDOW - 1.5) > 0.15]
        ok, n, short, worst = _judge(sent, want, offered, keep)
        print(f"  {rate:9g} {ok:4d}/{n:<3d} {short:5d} {worst:7.1f} %  {late_ms:7.2f} ms  {cpu:8.1f} %  {machine:6.1f} %"
              f"{'' if result.ok else '  run errors: ' + '; '.join(result.errors)}", flush=True)
        if ok == n and n > 0 and rate > followed:
            followed = rate
    print(f"  followed (every window within 3 packets or 3 %) up to {followed:g} Mbit/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of traffic per case")
    parser.add_argument("--rates", default="12,24,48,96,192,384", help="constant traces, Mbit/s")
    parser.add_argument("--step-rates", default="50,100,200,400,800", help="schedule steps from R to R/2, Mbit/s")
    args = parser.parse_args(argv)
    with delayline_testbed("bench_linkshape", "bls", bw="10gbit", rtt="20ms", buffer="1M") as bed:
        if bed is None:
            return 0
        res, tmp = bed
        st = res.state
        pid = next(p["pid"] for p in st["processes"] if p["kind"] == "delayline")
        print(f"link shape benchmark (peer Mahimahi: not installed; the reference is the trace / the schedule); "
              f"{os.cpu_count()} CPUs, load {Path('/proc/loadavg').read_text().split()[0]} at start\n")
        traces(st, tmp, [float(r) for r in args.rates.split(",")], args.seconds, pid)
        schedules(st, res.lab, tmp, [float(r) for r in args.step_rates.split(",")], args.seconds, pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
