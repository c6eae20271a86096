"""The userspace delay line: the delay it adds beyond its setting, per packet, and the throughput it sustains.

Builds a 2-host testbed (root, namespaces; 10 Gbit/s htb so that the
bottleneck queues nothing and every microsecond measured is the delay
line's), then measures in the same run:

* added delay: tcpdump on both router links (nanosecond kernel stamps),
  every packet matched in and out by its content, its hold minus the
  configured 10 ms one way; pings h1 -> h2 every 10 ms alone (idle), and
  beside an iperf3 TCP flow paced to 50 and 100 Mbit/s; each without and
  with two busy loops beside it. Printed per case: p50/p99/max of the
  added delay over every matched packet (data, ACKs, pings), the packets
  held less than 10 ms (must be 0), what the delay line itself counted for
  the same window, ping's least RTT and TCP's min_rtt against the 20 ms
  path, and the delay line's CPU time.
* throughput: iperf3 h1 -> h2 (3 s, cubic) with the delay line at 0 ms
  against plain forwarding (rules removed).

The peer tool would be netem, which this kernel does not have: the added
delay is measured against the setting, the throughput against plain
forwarding. The machine is shared and noisy (10-30 % run to run).

    python3 -m bench.bench_delayline [--seconds 3] [--no-throughput]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, delayline_testbed
from netesto.testbed.delaycontrol import delayline_stats, send_control
from tests.testbed.delayrun import Measured, busy_loops, measure

ONE_WAY_MS = 10.0
PATH_MS = 2 * ONE_WAY_MS


def _ns(ns: str, argv: list[str], timeout: float = 60) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout).stdout


def _iperf(client: str, server: str, addr: str, seconds: int = 3) -> float:
    srv = subprocess.Popen(["ip", "netns", "exec", server, "iperf3", "-s", "-1", "-p", "5301"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.4)
        out = _ns(client, ["iperf3", "-c", addr, "-p", "5301", "-t", str(seconds), "-C", "cubic", "-J"])
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def _rules(state: dict[str, Any], action: str) -> None:
    for entry in state["iptables"]:
        _ns(entry["ns"], ["iptables", "-w", action, *entry["rule"]])


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(p / 100 * len(s) + 0.999999) - 1))]


def _fmt(x: float | None, spec: str = "7.3f") -> str:
    return f"{x:{spec}}" if x is not None else " " * (int(spec.split(".")[0]) - 1) + "-"


def _line(label: str, m: Measured, own: dict[str, Any], cpu: float, seconds: float) -> str:
    added = [h - ONE_WAY_MS for h in m.held_ms()]
    early = sum(1 for a in added if a < 0)
    tcp_min = min(m.tcp_min_rtts) if m.tcp_min_rtts else None
    cap = f"{len(added):6d} {_pct(added, 50):7.3f} {_pct(added, 99):7.3f} {max(added):7.3f} {early:5d}" if added else "     0"
    mine = (f"{own.get('released', 0):6d} {_fmt(own.get('added_p50_ms'))} {_fmt(own.get('added_p99_ms'))} "
            f"{_fmt(own.get('added_max_ms'))} {own.get('early', '-'):>5}")
    return (f"  {label:<30} {cap} | {mine} | {_fmt(m.ping_min_ms)} {_fmt(tcp_min)} | "
            f"{100 * cpu / seconds:4.0f} %{'' if not (m.capture_dropped or m.unmatched > 20) else f'  (capture: {m.capture_dropped} dropped, {m.unmatched} unmatched)'}")


def added_delay(state: dict[str, Any], tmp: Path, seconds: float) -> None:
    pid = next(p["pid"] for p in state["processes"] if p["kind"] == "delayline")
    print(f"added delay beyond {ONE_WAY_MS:g} ms one way, ms (captures on both router links; every packet matched in/out)")
    print(f"  {'case':<30} {'pkts':>6} {'p50':>7} {'p99':>7} {'max':>7} {'early':>5} | "
          f"{'own: n':>6} {'p50':>7} {'p99':>7} {'max':>7} {'early':>5} | {'ping min':>7} {'tcp min_rtt':>7} | cpu")
    for hog in (False, True):
        with busy_loops(2 if hog else 0):
            for load in (None, 50.0, 100.0):
                label = f"{'idle' if load is None else f'{load:g} Mbit/s TCP'}{' + 2 busy loops' if hog else ''}"
                delayline_stats(state, reset=True)
                cpu0 = cpu_seconds(pid)
                m = measure(state, tmp / label.replace(" ", "_").replace("/", ""), seconds=seconds, load_mbit=load)
                cpu = cpu_seconds(pid) - cpu0
                own = delayline_stats(state, reset=True)
                print(_line(label, m, own, cpu, seconds), flush=True)
    print(f"  (ping min and tcp min_rtt against the {PATH_MS:g} ms path; 'own' is the delay line's own count of "
          "the same window, from its clocks)")


def throughput(state: dict[str, Any]) -> None:
    h1, h2 = state["links"]
    control = state["delayline_control"]
    _rules(state, "-D")
    plain = _iperf(h1["ns"], h2["ns"], h2["addr"])
    _rules(state, "-A")
    for q in (h1["queue"], h2["queue"]):
        send_control(control, {"queue": q, "delay": 0})
    through0 = _iperf(h1["ns"], h2["ns"], h2["addr"])
    for q in (h1["queue"], h2["queue"]):
        send_control(control, {"queue": q, "delay": ONE_WAY_MS})
    through20 = _iperf(h1["ns"], h2["ns"], h2["addr"])
    print("\nthroughput, iperf3 cubic 3 s, htb at 10 Gbit/s:")
    print(f"  plain forwarding           {plain:9.1f} Mbit/s")
    print(f"  through delay line, 0 ms   {through0:9.1f} Mbit/s  ratio {through0 / plain:.2f}   (target >= 500 Mbit/s)")
    print(f"  through delay line, 20 ms  {through20:9.1f} Mbit/s  ratio {through20 / plain:.2f}")
    # Without segmentation offloads every 1500-byte packet crosses the loop on its own.
    for q in (h1["queue"], h2["queue"]):
        send_control(control, {"queue": q, "delay": 0})
    _ns(h1["ns"], ["ethtool", "-K", "eth0", "tso", "off", "gso", "off"])
    _ns(h2["ns"], ["ethtool", "-K", "eth0", "tso", "off", "gso", "off"])
    _rules(state, "-D")
    plain_small = _iperf(h1["ns"], h2["ns"], h2["addr"])
    _rules(state, "-A")
    before = delayline_stats(state)["packets"]
    small = _iperf(h1["ns"], h2["ns"], h2["addr"])
    after = delayline_stats(state)["packets"]
    print(f"  1500-byte packets (TSO/GSO off), plain  {plain_small:9.1f} Mbit/s")
    print(f"  1500-byte packets, delay line at 0 ms   {small:9.1f} Mbit/s  ratio {small / plain_small:.2f}, "
          f"{(after - before) / 3 / 1000:.0f}k packets/s through the loop")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of traffic per added-delay case")
    parser.add_argument("--no-throughput", action="store_true", help="only the added-delay cases")
    args = parser.parse_args(argv)
    with delayline_testbed("bench_delayline", "bdl", bw="10gbit", rtt=f"{PATH_MS:g}ms", buffer="4M",
                           agents=False) as bed:
        if bed is None:
            return 0
        res, tmp = bed
        st = res.state
        log = Path(next(p["log"] for p in st["processes"] if p["kind"] == "delayline")).read_text()
        started = re.findall(r"delayline: queues .*", log)
        print("delay line benchmark (peer tool netem: not available on this kernel)")
        print(f"{started[0] if started else 'delay line'}; machine shared and noisy: 10-30 % run to run\n")
        added_delay(st, tmp, args.seconds)
        if not args.no_throughput:
            throughput(st)
    return 0


if __name__ == "__main__":
    sys.exit(main())
