"""The userspace delay line: accuracy of the added delay and the throughput it sustains.

Builds a 2-host testbed (root, namespaces), then measures in the same run:

* accuracy: ping h1 -> h2 every 10 ms with the delay line adding 10 ms each
  way (20 ms in all), against the same ping with the NFQUEUE rules removed;
  the error of each sample is (rtt - idle median) - 20 ms.
* throughput: iperf3 h1 -> h2 (3 s, cubic) with the delay line at 0 ms
  against plain forwarding (rules removed), with a 40 Gbit/s htb so the
  shaper is not what limits.

The peer tool would be netem, which this kernel does not have: the numbers
are compared with plain forwarding instead. The machine is shared and noisy
(10-30 % run to run); compare the ratios of one run.

    python3 -m bench.bench_delayline
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from netesto.testbed import lifecycle
from netesto.testbed.delayline import send_control


def _ns(ns: str, argv: list[str], timeout: float = 60) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout).stdout


def _ping(ns: str, addr: str, count: int) -> list[float]:
    out = _ns(ns, ["ping", "-c", str(count), "-i", "0.01", "-n", addr])
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


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


def _rules(state: dict, action: str) -> None:
    for entry in state["iptables"]:
        _ns(entry["ns"], ["iptables", "-w", action, *entry["rule"]])


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> int:
    ok, why = lifecycle.namespaces_supported()
    if not ok:
        print(f"bench_delayline: skipped: {why}")
        return 0
    name = f"bdl{os.getpid() % 10000}"
    with tempfile.TemporaryDirectory() as tmp:
        cfg = lifecycle.TestbedConfig.parse(name=name, hosts=2, bw="40gbit", rtt="20ms", buffer="4M", dir=tmp, agents=False)
        res = lifecycle.up(cfg)
        try:
            st = res.state
            if st["delay_mode"] != "delayline":
                print("netem is available here: the testbed uses it, not the delay line; nothing to measure")
                return 0
            h1, h2 = st["links"]
            control = st["delayline_control"]
            print("delay line benchmark (peer tool netem: not available on this kernel; compared with plain forwarding)")
            print("machine shared and noisy: 10-30 % run to run\n")

            _rules(st, "-D")
            idle = _ping(h1["ns"], h2["addr"], 300)
            plain = _iperf(h1["ns"], h2["ns"], h2["addr"])
            _rules(st, "-A")
            send_control(control, {"op": "stats", "reset": True})
            added = _ping(h1["ns"], h2["addr"], 300)
            own = send_control(control, {"op": "stats", "reset": True})["stats"]
            base = statistics.median(idle)
            errors = [r - base - 20.0 for r in added]
            abs_err = [abs(e) for e in errors]
            print(f"accuracy at 20 ms (10 ms each way), {len(added)} pings every 10 ms:")
            print(f"  idle rtt median {base:.3f} ms; with delay line median {statistics.median(added):.3f} ms")
            print(f"  added-delay error: median {statistics.median(errors):+.3f} ms, "
                  f"median |err| {statistics.median(abs_err):.3f} ms, p99 |err| {_pct(abs_err, 99):.3f} ms, "
                  f"max {max(abs_err):.3f} ms   (target median < 0.5 ms)")
            print(f"  the loop's own lateness (release time -> verdict sent), {own['late_samples']} packets: "
                  f"median {own['late_p50_ms']:.3f} ms, p99 {own['late_p99_ms']:.3f} ms "
                  "(the rest of the ping error is ping's and the kernel's scheduling)")

            for q in (h1["queue"], h2["queue"]):
                send_control(control, {"queue": q, "delay": 0})
            through0 = _iperf(h1["ns"], h2["ns"], h2["addr"])
            for q in (h1["queue"], h2["queue"]):
                send_control(control, {"queue": q, "delay": 10})
            through20 = _iperf(h1["ns"], h2["ns"], h2["addr"])
            print("\nthroughput, iperf3 cubic 3 s, htb at 40 Gbit/s:")
            print(f"  plain forwarding           {plain:9.1f} Mbit/s")
            print(f"  through delay line, 0 ms   {through0:9.1f} Mbit/s  ratio {through0 / plain:.2f}   (target >= 500 Mbit/s)")
            print(f"  through delay line, 20 ms  {through20:9.1f} Mbit/s  ratio {through20 / plain:.2f}")
            # Without segmentation offloads every 1500-byte packet crosses the loop on its own.
            for q in (h1["queue"], h2["queue"]):
                send_control(control, {"queue": q, "delay": 0})
            _ns(h1["ns"], ["ethtool", "-K", "eth0", "tso", "off", "gso", "off"])
            _ns(h2["ns"], ["ethtool", "-K", "eth0", "tso", "off", "gso", "off"])
            _rules(st, "-D")
            plain_small = _iperf(h1["ns"], h2["ns"], h2["addr"])
            _rules(st, "-A")
            before = send_control(control, {"op": "stats"})["stats"]["packets"]
            small = _iperf(h1["ns"], h2["ns"], h2["addr"])
            after = send_control(control, {"op": "stats"})["stats"]["packets"]
            print(f"  1500-byte packets (TSO/GSO off), plain  {plain_small:9.1f} Mbit/s")
            print(f"  1500-byte packets, delay line at 0 ms   {small:9.1f} Mbit/s  ratio {small / plain_small:.2f}, "
                  f"{(after - before) / 3 / 1000:.0f}k packets/s through the loop")
            stats = send_control(control, {"op": "stats"})["stats"]
            print(f"  delay line handled {stats['packets']} packets (GSO super-packets count once)")
        finally:
            lifecycle.down(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
