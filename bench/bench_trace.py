"""What a kernel trace costs: tcp_probe events the recorder sustains, its CPU per million events, bytes per
event, the binary ring buffer against the text ``trace_pipe``, in one run.

``nice -n 10 python3 -m bench.bench_trace [--dur 3] [--levels 1,2,4]`` (root, repository root).

In a fresh namespace whose loopback has an Ethernet MTU and no segmentation
offloads (so each 1448-byte segment is a packet of its own), iperf3 sends
``--levels`` parallel streams: the receiving sockets take a segment in per
1448 bytes and the senders an ACK about every second one, each a tcp_probe
event that the port filter keeps. At each level, two runs in turn:

* raw: the recorder as the agent runs it (``python -m netesto.collectors.tcpprobe``:
  ring-buffer pages copied from ``trace_pipe_raw`` to a spool during the run,
  decoded and split into ``.ntrace`` files after it). Its CPU comes from the
  recorder itself (getrusage: while recording, and after the stop);
* text: a reader of the instance's ``trace_pipe`` that parses each line with one
  regular expression (the least a text consumer does), run as a process of its
  own whose CPU is read from /proc.

Each prints events recorded (and per second), events the ring buffer refused
(the CPUs' ``dropped events``), the reader's CPU per million events, bytes
per event (spool and ``.ntrace`` for raw), and iperf3's goodput, which the
kernel's own work per event (the tracepoint, the filter, the copy) slows:
the untraced run of the level says by how much.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from netesto.collectors.tcpprobe import port_filter
from netesto.collectors.tracefs import EventSpec, Instance, tracefs_root
from tests import netns

PORT = 47311
_LINE = re.compile(r"(\d+\.\d+): tcp_probe: .*?snd_cwnd=(\d+) ssthresh=(\d+) .*?srtt=(\d+)")


def _iperf3(ns: str, streams: int, dur: float, write: int) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-c", "127.0.0.1", "-p", str(PORT), "-t",
                             f"{dur:g}", "-P", str(streams), "-l", str(write), "-J"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def _goodput(proc: subprocess.Popen[str]) -> float:
    out, _ = proc.communicate(timeout=120)
    try:
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6
    except (ValueError, KeyError):
        return float("nan")


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_raw(ns: str, streams: int, dur: float, write: int, work: Path, n: int) -> dict[str, Any]:
    """One traced run with the agent's recorder."""
    data = work / f"raw{n}"
    (data / "1").mkdir(parents=True)
    spec = {"exp": "1", "datadir": str(data), "host": "bench", "instance": f"netesto-bench{os.getpid()}-{n}",
            "ports": [PORT], "spool": str(work / f"spool{n}")}
    (work / f"spec{n}.json").write_text(json.dumps(spec))
    rec = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "netesto.collectors.tcpprobe",
                            "--spec", str(work / f"spec{n}.json")], stdout=subprocess.PIPE, text=True)
    assert rec.stdout is not None
    if json.loads(rec.stdout.readline()).get("event") != "ready":
        raise RuntimeError("recorder did not start")
    client = _iperf3(ns, streams, dur, write)
    goodput = _goodput(client)
    rec.send_signal(signal.SIGTERM)
    out, _ = rec.communicate(timeout=600)
    summary = json.loads(out.strip().splitlines()[-1])["summary"]
    events = sum(summary["events"].values())
    files = sum(p.stat().st_size for p in data.rglob("*.ntrace"))
    return {"events": events, "rate": events / dur, "dropped": summary["host_dropped"] + summary["host_missed_in_pages"],
            "cpu_read_per_M": summary["cpu_read_seconds"] / max(1, events) * 1e6,
            "cpu_decode_per_M": summary["cpu_decode_seconds"] / max(1, events) * 1e6,
            "spool_bytes": summary["bytes"] / max(1, events), "ntrace_bytes": files / max(1, events),
            "goodput": goodput}


TEXT_READER = """
import os, re, sys, resource, signal
path, out = sys.argv[1], sys.argv[2]
line_re = re.compile(r"{pat}")
stop = [False]
signal.signal(signal.SIGTERM, lambda *a: stop.__setitem__(0, True))
fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
n = 0
buf = b""
while True:
    try:
        data = os.read(fd, 1 << 16)
    except BlockingIOError:
        if stop[0]:
            break
        import time; time.sleep(0.01)
        continue
    buf += data
    *lines, buf = buf.split(b"\\n")
    for line in lines:
        if line_re.search(line.decode()):
            n += 1
ru = resource.getrusage(resource.RUSAGE_SELF)
open(out, "w").write(f"{{n}} {{ru.ru_utime + ru.ru_stime}}")
"""


def run_text(ns: str, streams: int, dur: float, write: int, work: Path, n: int) -> dict[str, Any]:
    """One traced run read as text from ``trace_pipe``."""
    inst = Instance(f"netesto-bench{os.getpid()}-t{n}", tracefs_root()).create()
    try:
        inst.configure(clock="mono", buffer_kb=4096)
        (work / "reader.py").write_text(TEXT_READER.format(pat=_LINE.pattern))
        result = work / f"text{n}.out"
        reader = subprocess.Popen([sys.executable, str(work / "reader.py"), str(inst.path / "trace_pipe"),
                                   str(result)])
        for name in ("tcp_probe", "tcp_retransmit_skb", "tcp_cong_state_set"):
            inst.enable(EventSpec("tcp", name, port_filter([PORT])))
        goodput = _goodput(_iperf3(ns, streams, dur, write))
        inst.disable()
        time.sleep(0.3)
        reader.send_signal(signal.SIGTERM)
        reader.wait(timeout=120)
        dropped = sum(int(inst.stats(c).get("dropped events", 0) + inst.stats(c).get("overrun", 0))
                      for c in inst.cpus())
    finally:
        inst.remove()
    events, cpu = result.read_text().split()
    count = int(events)
    return {"events": count, "rate": count / dur, "dropped": dropped, "cpu_read_per_M": float(cpu) / max(1, count) * 1e6,
            "cpu_decode_per_M": 0.0, "spool_bytes": float("nan"), "ntrace_bytes": float("nan"), "goodput": goodput}


def run_none(ns: str, streams: int, dur: float, write: int) -> dict[str, Any]:
    return {"goodput": _goodput(_iperf3(ns, streams, dur, write))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dur", type=float, default=3.0)
    parser.add_argument("--levels", default="1,2,4", help="parallel iperf3 streams, one run set each")
    parser.add_argument("--write", type=int, default=131072, help="bytes per write")
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or shutil.which("iperf3") is None:
        print("bench_trace needs root and iperf3")
        return 2
    netns.remove_stale()
    ns = f"{netns.RUN_PREFIX}tr"
    netns.sh("ip", "netns", "add", ns)
    work = Path(tempfile.mkdtemp(prefix="bench_trace"))
    server = subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-p", str(PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        netns.sh("ip", "-n", ns, "link", "set", "lo", "up")
        # segments of an Ethernet MTU, each its own packet: loopback would otherwise carry 64 KB ones
        netns.sh("ip", "-n", ns, "link", "set", "lo", "mtu", "1500")
        netns.sh("ip", "netns", "exec", ns, "ethtool", "-K", "lo", "tso", "off", "gso", "off", "gro", "off")
        time.sleep(0.5)
        print(f"{'streams':>7} {'reader':>6} {'events':>9} {'events/s':>9} {'dropped':>8} {'CPU s/M read':>12} "
              f"{'+decode':>8} {'B/ev spool':>10} {'B/ev ntrace':>11} {'goodput':>8} {'untraced':>8}")
        n = 0
        for level in (int(x) for x in args.levels.split(",")):
            base = run_none(ns, level, args.dur, args.write)["goodput"]
            for kind, run in (("raw", run_raw), ("text", run_text)):
                n += 1
                r = run(ns, level, args.dur, args.write, work, n)
                print(f"{level:>7} {kind:>6} {r['events']:>9} {r['rate']:>9.0f} {r['dropped']:>8} "
                      f"{r['cpu_read_per_M']:>12.2f} {r['cpu_decode_per_M']:>8.2f} {r['spool_bytes']:>10.1f} "
                      f"{r['ntrace_bytes']:>11.1f} {r['goodput']:>7.0f}M {base:>7.0f}M", flush=True)
    finally:
        server.kill()
        server.wait()
        netns.delete_ns(ns)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
