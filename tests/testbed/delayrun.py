"""Traffic through a testbed's router with captures on its links: what each packet was held, what ping and TCP saw.

One :func:`measure` is a ping h1 -> h2 (and, with ``load``, an iperf3 TCP flow
h1 -> h2 beside it) while tcpdump runs on both router links;
``bench.bench_delayline`` and ``tests/testbed/test_delayline.py`` use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import tbutil
from .holds import Captures, Hold


@dataclass
class Measured:
    """What one run of traffic met: every matched hold, pings' RTTs, TCP's min_rtt samples."""

    holds: list[Hold]
    unmatched: int
    capture_dropped: int
    ping_rtts: list[float]
    ping_min_ms: float | None
    tcp_min_rtts: list[float]
    goodput_mbit: float | None
    extra: dict[str, Any] = field(default_factory=dict)

    def held_ms(self, proto: int | None = None) -> list[float]:
        return sorted(h.held_ns / 1e6 for h in self.holds if proto is None or h.proto == proto)


def _ping_min(output: str) -> float | None:
    m = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", output)
    return float(m.group(1)) if m else None


def measure(state: dict[str, Any], workdir: Path, *, seconds: float = 2.0, load_mbit: float | None = None,
            tcp: bool = False, ping_interval: float = 0.01, ca: str = "cubic") -> Measured:
    """Ping h1 -> h2 for ``seconds`` (and a TCP flow: paced to ``load_mbit``, or unpaced with ``tcp``),
    tcpdump on both router links."""
    h1, h2 = state["links"][:2]
    links = {h1["router_dev"]: h1["addr"], h2["router_dev"]: h2["addr"]}
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    count = max(5, int(seconds / ping_interval))
    threads = [threading.Thread(target=lambda: out.setdefault("ping", tbutil.ns_run(
        h1["ns"], ["ping", "-c", str(count), "-i", f"{ping_interval}", "-W", "2", h2["addr"]], timeout=seconds + 30).stdout))]
    flow = tcp or load_mbit is not None
    if flow:
        def _ss() -> None:
            # The kernel's own min_rtt of the flow (iperf3's reports srtt), read twice.
            samples = []
            for delay in (seconds * 0.5, seconds * 0.4):
                time.sleep(delay)
                samples.append(tbutil.ns_run(h1["ns"], ["ss", "-tin", "dst", h2["addr"]]).stdout)
            out["ss"] = "\n".join(samples)

        def _iperf() -> None:
            extra = ("-b", f"{load_mbit}M") if load_mbit is not None else ()
            out["iperf"] = tbutil.iperf3(h1["ns"], h2["ns"], h2["addr"], seconds, ca, extra=extra)

        threads += [threading.Thread(target=_ss), threading.Thread(target=_iperf)]
    with Captures(state["router_ns"], links, workdir) as cap:
        time.sleep(0.05)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.1)  # the last packets leave the delay line
    holds, unmatched = cap.holds()
    ping = out.get("ping", "")
    mins = [float(x) for x in re.findall(r"minrtt:([\d.]+)", out.get("ss", ""))]
    goodput = None
    if "iperf" in out:
        goodput = float(out["iperf"]["end"]["sum_received"]["bits_per_second"]) / 1e6
    return Measured(holds, unmatched, cap.dropped(), tbutil.ping_rtts(ping), _ping_min(ping), mins, goodput)


@contextlib.contextmanager
def busy_loops(n: int = 2, cpu: int | None = None) -> Iterator[list[int]]:
    """``n`` busy loops beside whatever runs inside, on CPU ``cpu`` (None: wherever the kernel puts them), each
    its own process group, killed by pid after."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True, preexec_fn=pin)
             for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
