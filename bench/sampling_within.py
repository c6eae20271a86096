"""bench_sampling's within-run readings: the sampler on in one window of each pair of windows of one
run and off in the other (the engine's bench-only ``--sample-duty W``), each sampled window read
against its pair's unsampled one.

- goodput (:func:`within_run_part`): 64 flat-out flows, the client veth's byte counter;
- CPU, the with/without check of the sampler's self-reported time (:func:`within_cpu_part`): flows
  paced so that they do the same work in every window, the engine processes' scheduler run time
  (``/proc/PID/task/TID/schedstat``, ns-exact, every thread of client, server and their workers)
  read 20 times a second. A sampled window's CPU less its pair's unsampled one is what sampling
  cost there, caches, wakeups and the kernel work of ``getsockopt`` included; divided by what the
  sampler's own ticks said they took (the flow summaries' ``sampling_seconds``), 1.0 means the
  self-reported time is the whole cost.

Window pairs share the slow drift and the neighbours' load, so they resolve what whole runs cannot
(a whole run's CPU moves more than the sampler costs).
"""

from __future__ import annotations

import glob
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Engine
from netesto.engine.sampling.sampler import bench_window_sampled
from netesto.raw.nflow import read_flow
from tests import netns

# the goodput of CPU-bound flows on 2 vCPUs cannot resolve 1 %: the CPU share is the target held
NO_GOODPUT_TARGET = "no target: the CPU share below is the one held"

_COUNTER = """
import sys, time
end = time.time() + float(sys.argv[1])
with open("/sys/class/net/veth0/statistics/tx_bytes") as fh:
    while time.time() < end:
        fh.seek(0)
        print(time.time(), fh.read().strip(), flush=True)
        time.sleep(0.05)
"""


def window_rates(points: list[tuple[float, int]], window: float, skip: float) -> list[tuple[int, float]]:
    """(window number, bit/s) of every whole ``window``-second window of the wall clock between
    ``skip`` s after the first point and ``skip`` s before the last: the byte counter interpolated
    0.1 s inside each edge (a tick in flight at an edge counts for neither window)."""
    def at(t: float) -> float | None:
        for (t0, b0), (t1, b1) in zip(points, points[1:]):
            if t0 <= t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b0
        return None

    out = []
    k = int((points[0][0] + skip) / window) + 1
    while (k + 1) * window <= points[-1][0] - skip:
        lo, hi = at(k * window + 0.1), at((k + 1) * window - 0.1)
        if lo is not None and hi is not None:
            out.append((k, (hi - lo) * 8 / (window - 0.2)))
        k += 1
    return out


def duty_pairs(rates: list[tuple[int, float]], window: float) -> list[tuple[float, float, bool]]:
    """(sampled window's rate, unsampled window's rate, whether the sampled one came first) of each pair
    of windows (see ``bench_window_sampled``) with both windows measured. Next to each other, they share
    the slow drift and the neighbours' load; which one is sampled is as often the first as the second, so
    a drift inside a pair and the flows' own once-a-second work cancel out over the pairs."""
    got = dict(rates)
    out = []
    for k in sorted(got):
        if k % 2 == 0 and k + 1 in got:
            first_sampled = bench_window_sampled((k + 0.5) * window, window)
            on, off = (got[k], got[k + 1]) if first_sampled else (got[k + 1], got[k])
            out.append((on, off, first_sampled))
    return out


def duty_ratios(rates: list[tuple[int, float]], window: float) -> list[float]:
    """For each pair of :func:`duty_pairs`: the sampled window's rate over the unsampled one's."""
    return [on / off for on, off, _ in duty_pairs(rates, window)]


def median_ci(values: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """The median of ``values`` and its distribution-free 95 % confidence interval (the order
    statistics n/2 -+ z*sqrt(n)/2): a window pair where the host stalled the flows (a neighbour,
    writeback) moves it no more than any other pair, where it can move a mean by several percent."""
    ranked = sorted(values)
    n = len(ranked)
    half = z * n ** 0.5 / 2
    lo, hi = max(0, math.floor(n / 2 - half) - 1), min(n - 1, math.ceil(n / 2 + half) - 1)
    return statistics.median(ranked), ranked[lo], ranked[hi]


def within_run(dur: float, flows: int, window: float, interval: float) -> list[float]:
    """One run of ``flows`` flows for ``dur`` s on a fresh veth pair, with the engine's sampler
    on in one ``window``-second window of each pair and off in the other (``--sample-duty``);
    the client's veth byte counter read 20 times a second. Returns :func:`duty_ratios`."""
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_duty"))
    try:
        engine = Engine(pair, workdir, options=("--sample-duty", str(window)))
        counter = pair.popen(pair.a, [sys.executable, "-c", _COUNTER, str(dur + 3)], stdout=subprocess.PIPE,
                             text=True)
        engine.run([dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca="cubic", interval=interval)
                    for i in range(flows)])
        out = counter.communicate(timeout=30)[0]
        engine.close()
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    points = [(float(t), int(b)) for t, b in (line.split() for line in out.splitlines())]
    return duty_ratios(window_rates(points, window, 3.0), window)


def within_run_part(dur: float, flows: int, runs: int, window: float) -> None:
    """The sampling cost in goodput, measured inside runs (see the module docstring), and its control."""
    print(f"# within-run: {flows} flows for {dur:.0f} s, sampled at 10 ms in one {window:g} s window of each pair "
          "and not at all in the other; each sampled window's goodput over its pair's unsampled one", flush=True)
    pooled: list[float] = []
    for label, interval, reps in (("control: sampled in no window", 60.0, 1), ("sampled", 0.01, runs)):
        for _ in range(reps):
            ratios = within_run(dur, flows, window, interval)
            pooled += ratios if interval == 0.01 else []
            mid, lo, hi = median_ci(ratios)
            se = statistics.stdev(ratios) / len(ratios) ** 0.5
            print(f"  {label}: pair ratio median {mid:.4f} [{lo:.4f}-{hi:.4f}] (95 % interval), mean "
                  f"{statistics.mean(ratios):.4f} +- {se:.4f}, {len(ratios)} pairs"
                  + (" (should be 1 within its interval)" if interval != 0.01 else ""), flush=True)
    # runs differ by more than their intervals (the neighbours' load, where the flows' work lands): pool them
    mid, lo, hi = median_ci(pooled)
    print(f"within-run goodput, sampled / unsampled windows: median of the {len(pooled)} pairs of {runs} runs "
          f"{mid:.4f} [{lo:.4f}-{hi:.4f}] (95 % interval; {NO_GOODPUT_TARGET})", flush=True)


class ProcessCpu(threading.Thread):
    """Reads, every ``step`` s, the scheduler run time (ns) of every thread of the processes whose command
    line holds ``mark`` (an engine's data directory: its client, its server and the workers they fork),
    into ``points`` as (wall time, ns). The process list is read again every second; a process that
    ends takes its CPU with it, so only the windows inside a run are read."""

    def __init__(self, mark: str, step: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.mark = mark.encode()
        self.step = step
        self.points: list[tuple[float, int]] = []
        self.done = threading.Event()

    def pids(self) -> list[int]:
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as fh:
                        if self.mark in fh.read():
                            found.append(int(name))
                except OSError:
                    pass
        return found

    @staticmethod
    def run_ns(pids: list[int]) -> int:
        """Scheduler run time (ns) of every thread of ``pids`` (gone ones: none)."""
        total = 0
        for path in (p for pid in pids for p in glob.glob(f"/proc/{pid}/task/*/schedstat")):
            try:
                with open(path) as fh:
                    total += int(fh.read().split()[0])
            except (OSError, IndexError, ValueError):
                pass
        return total

    def run(self) -> None:
        pids, listed = self.pids(), time.monotonic()
        while not self.done.is_set():
            if time.monotonic() - listed >= 1.0:
                pids, listed = self.pids(), time.monotonic()
            self.points.append((time.time(), self.run_ns(pids)))
            self.done.wait(self.step)


def cpu_pairs(points: list[tuple[float, int]], window: float, skip: float = 3.0) -> list[tuple[float, bool]]:
    """(share of one core that the sampled window of a pair used more than its unsampled one, whether the
    sampled one came first) of each pair, from (wall time, cumulative CPU ns) points (:func:`window_rates`
    on a CPU counter)."""
    rates = [(k, r / 8e9) for k, r in window_rates(points, window, skip)]
    return [(on - off, first) for on, off, first in duty_pairs(rates, window)]


def balanced_median(extra: list[tuple[float, bool]]) -> tuple[float, float, float]:
    """What sampling added, with its 95 % interval, from :func:`cpu_pairs`: the mean of the medians (and of
    the intervals' ends) of the pairs sampled first and of those sampled second. Work the engine does at a
    fixed phase of each second (its progress events) lands in the same window of every pair and adds to
    one group what it takes from the other; a median over both groups would fall on either side of it."""
    groups = [[x for x, first in extra if first == side] for side in (True, False)]
    if not all(groups):
        return median_ci([x for x, _ in extra])
    (m1, lo1, hi1), (m2, lo2, hi2) = (median_ci(g) for g in groups)
    return (m1 + m2) / 2, (lo1 + lo2) / 2, (hi1 + hi2) / 2


def sampling_share(engine: Engine) -> tuple[float, float, int, int]:
    """(sampling CPU seconds, the workers' CPU seconds, rows written, rows taken hot) of the last run, from
    both ends' flow summaries: per worker process (a file header's pid), the largest ``sampling_seconds``,
    ``seconds`` and ``sampling_hot_rows`` of its flows (they ran side by side), summed over the workers;
    rows of every flow end."""
    workers: dict[tuple[str, int], tuple[float, float, int]] = {}
    rows = 0
    for side in ("cli", "srv"):
        for path in (engine.workdir / side / str(engine.runs) / "flows").glob("*.nflow"):
            flow = read_flow(path)
            cpu = (flow.summary or {})["cpu"]
            key = (side, flow.header["pid"])
            had = workers.get(key, (0.0, 0.0, 0))
            workers[key] = (max(had[0], cpu["sampling_seconds"]), max(had[1], cpu["seconds"]),
                            max(had[2], cpu.get("sampling_hot_rows", 0)))
            rows += flow.rows
    return (sum(w[0] for w in workers.values()), sum(w[1] for w in workers.values()), rows,
            sum(w[2] for w in workers.values()))


def within_cpu_run(dur: float, flows: int, window: float, interval: float,
                   pacing: int) -> tuple[list[tuple[float, bool]], float]:
    """One duty-cycled run of ``flows`` paced stream flows on a fresh veth pair: the :func:`cpu_pairs` of the
    engine's processes and the sampler's own ticks as a share of one core while it samples (its
    ``sampling_seconds``, client and server workers summed, over the sampled half of the run)."""
    pair = netns.make_veth_pair()
    workdir = Path(tempfile.mkdtemp(prefix="bench_dutycpu"))
    try:
        engine = Engine(pair, workdir, options=("--sample-duty", str(window)))
        reader = ProcessCpu(str(workdir))
        reader.start()
        try:
            engine.run([dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca="cubic", interval=interval,
                             pacing=pacing) for i in range(flows)])
        finally:
            reader.done.set()
            reader.join()
        ticks = sampling_share(engine)[0]
        engine.close()
    finally:
        pair.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return cpu_pairs(reader.points, window), ticks / (dur / 2)


def within_cpu_part(dur: float, flows: int, runs: int, window: float, pacing: int) -> None:
    """The with/without check of the sampler's self-reported time, inside runs, and its control."""
    print(f"# with/without within runs: {flows} flows each paced to {pacing / 1e6:g} Mbit/s for {dur:.0f} s, "
          f"sampled at 10 ms in one {window:g} s window of each pair and not at all in the other; the engine's CPU "
          "(every thread of client, server and workers) in each sampled window less its pair's unsampled one",
          flush=True)
    pooled: list[tuple[float, bool]] = []
    own: list[float] = []
    for label, interval, reps in (("control: sampled in no window", 60.0, 1), ("sampled", 0.01, runs)):
        for _ in range(reps):
            extra, ticks = within_cpu_run(dur, flows, window, interval, pacing)
            if interval == 0.01:
                pooled += extra
                own.append(ticks)
            mid, lo, hi = balanced_median(extra)
            print(f"  {label}: extra CPU {100 * mid:.2f} % of a core [{100 * lo:.2f}-{100 * hi:.2f}] (95 % interval, "
                  f"{len(extra)} pairs); the sampler's own ticks {100 * ticks:.2f} % of a core while sampling"
                  + (" (extra should be 0 within its interval)" if interval != 0.01 else ""), flush=True)
    mid, lo, hi = balanced_median(pooled)
    ticks = statistics.median(own)
    print(f"with/without, within runs: sampling added {100 * mid:.2f} % of a core [{100 * lo:.2f}-{100 * hi:.2f}] "
          f"(median of {len(pooled)} pairs of {runs} runs, 95 % interval) where its own ticks said "
          f"{100 * ticks:.2f} %: {mid / ticks:.2f} [{lo / ticks:.2f}-{hi / ticks:.2f}] x the self-reported time "
          "(1: the ticks are the whole cost)", flush=True)


__all__ = ["NO_GOODPUT_TARGET", "ProcessCpu", "balanced_median", "cpu_pairs", "duty_pairs", "duty_ratios", "median_ci",
           "sampling_share", "window_rates", "within_cpu_part", "within_cpu_run", "within_run", "within_run_part"]
