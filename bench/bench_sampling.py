"""What sampling costs: the sampler's share of the engine's CPU with 64 stream flows, goodput
sampled vs (nearly) unsampled, RR p99 sampled vs unsampled, the cost of one sample split.

``python3 -m bench.bench_sampling [--dur 10] [--reps 6] [--within-dur 60] [--within-runs 2]
[--within-window 0.5] [--within-cpu-runs 2] [--rr-only] [--no-rr]`` (root, repository root).

0. Within runs: 64 TCP_STREAM flows for 60 s on a
   fresh veth pair, the wall clock cut in pairs of 0.5 s windows and the
   engine's sampler on (10 ms) in one window of each pair and off in the
   other (the engine's bench-only ``--sample-duty W`` option, read by the
   Sampler; which window of a pair follows the Thue-Morse sequence,
   ``sampler.bench_window_sampled``); the client veth's byte counter read
   20 times a second gives each window's goodput, and each sampled window
   is divided by its pair's unsampled one. Drift and the neighbours' load
   change slowly, so this pairs far better than whole runs do. The reading
   is the median of the pair ratios with its distribution-free 95 %
   interval, pooled over ``--within-runs`` runs (0: skip), next to a control
   run sampled in no window. Then the with/without check of the sampler's
   self-reported time, the same way (``--within-cpu-runs``, 2; 0: skip): the
   flows paced to ``--paced`` Mbit/s so that every window has the same work,
   each sampled window's engine CPU (every thread's scheduler run time, read
   20 times a second) less its pair's unsampled one, over what the sampler's
   own ticks said they took (``bench/sampling_within.py``). ``--within-only``
   runs just these two.
1. 64 TCP_STREAM flows on a veth pair, flat out and then each paced to ``--paced`` Mbit/s
   (40), with ``interval=0.01`` vs ``interval=60``
   (one sample at the start and one at the end: the engine's way of "not
   sampling"), pairs of runs in ABBA order after one discarded warm-up run:
   goodput ratio per pair, bytes per engine CPU second, and the sampler's
   share of the engine's CPU in each sampled run: ``cpu.sampling_seconds``
   of the flow summaries over the workers' CPU, i.e. the thread CPU of the
   sweeps and of the rows the flow ends took at their idle points (hot rows:
   RR ends; each hot row at the mean of the probed ones, see
   docs/raw-format.md), the real cost of the rows in the run (a
   getsockopt(TCP_INFO) can run the socket's backlog and pending NET_RX
   softirqs in the sampling thread: receive work the kernel does anyway,
   counted here; measured: small). Printed with it: us per row and the
   share of rows taken hot. The target (< 1.5 %) is held to this share;
   the bytes per engine CPU second (sampled over unsampled) is the all-in
   reading (caches included), as noisy as the neighbours' load. Per run also
   the sampler's share of one core (its ticks over the run's seconds: what a
   user's host gives up at this flow count and interval, however busy the flows
   are) and the with/without check: the engine's CPU sampled less unsampled over
   the sampler's own ticks (paced flows do the same work either way, so there 1.0
   means the ticks are the whole cost).
2. RR p99 sampled vs unsampled (``--rr-only``, ``--no-rr``): 1 TCP_RR flow, then 16
   on one client worker, client and server pinned to different CPUs
   (``--rr-cpus``), runs of ``interval=0.01`` and ``interval=60``
   interleaved (ABBA pairs): p99 of the client histograms, sampled over
   unsampled per pair (target <= 1.05), and the client worker's sampling share. For 16 flows also
   what the rows held the transactions, counted in the engine's C loops (``NETESTO_RR_HOLDS``,
   ``_rrloop.holds``; a host's load hardly moves it): the share of the transactions a row held and
   the hold's 99.9th percentile, clients' (exact) and servers' (an upper bound), and where the rows
   were taken (parked clients' batches, servers' quiet moments, ...).
3. ``--cost``: what one sample costs, us of thread CPU per flow per tick, split into its
   parts (``bench/sampling_cost.py``: getsockopt TCP_INFO and TCP_CC_INFO,
   time.time(), one row, one ``records`` block write, the Sampler's whole tick
   for stream ends, RR client ends' whole tick with their latency parts) on 64
   idle loopback connections (cubic, then bbr), and the alternative, one sock_diag dump
   a tick, here and in a namespace with its own small established hash
   (``bench/diag_cost.py``). ``--cost-only`` runs just this part; ``--cpu-only`` the
   Sampler's CPU on 100 idle flows at 100 Hz next to an idle 100 Hz timer.

Shared noisy machine: read the ratios and shares, not the absolute rates.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Engine, guard, place, placement, where
from bench.sampling_cost import print_cost, print_idle, sampler_part
from bench.sampling_within import NO_GOODPUT_TARGET, sampling_share, within_cpu_part, within_run_part
from tests import netns


def tree_cpu(root: int) -> float:
    """CPU seconds (scheduler run time, ns-exact) of ``root`` and its live descendants."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parent[int(name)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [p for p, pp in parent.items() if pp == pid and p not in tree]
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


SHARE_TARGET = 1.5  # %: the sampler's ticks within the engine's CPU (issue 14)


def goodput(engine: Engine, dur: float, interval: float, flows: int, pacing: int = 0) -> tuple[float, float, float]:
    """Aggregate goodput (bit/s), bytes per CPU second of the engine's processes (client and server) and
    those CPU seconds; ``pacing``: each flow's rate (bit/s, 0 flat out)."""
    server0 = tree_cpu(engine.proc.pid)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    summaries = engine.run([
        dict(flow_id=f"a-b-0-{i}", test="TCP_STREAM", dur=dur, ca="cubic", interval=interval, pacing=pacing)
        for i in range(flows)
    ])
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = tree_cpu(engine.proc.pid) - server0 + (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    total = sum(s["bytes_tx"] for s in summaries)
    return total * 8 / max(s["duration"] for s in summaries), total / cpu, cpu


def stream_part(dur: float, reps: int, flows: int, workdir: Path, pacing: int = 0) -> None:
    """Part 1: 64 stream flows (flat out, or each paced to ``pacing`` bit/s), sampled and unsampled runs in
    ABBA pairs; the sampler's share of the engine's CPU and of one core, and the engine's CPU with the
    sampler over without it (the with/without check of the self-reported ticks)."""
    pair = netns.make_veth_pair()
    how = f"each paced to {pacing / 1e6:g} Mbit/s" if pacing else "flat out"
    try:
        engine = Engine(pair, workdir / "engine")
        print(f"# sampling cost, {flows} flows {how} ({dur} s runs, {reps} pairs in ABBA order after a discarded "
              "warm-up run; shared noisy 2-vCPU machine)", flush=True)
        goodput(engine, dur, 0.01, flows, pacing)  # warm-up: the first run after the server starts is slower
        sampled, unsampled, eff, share, per_row, hot, core, extra = [], [], [], [], [], [], [], []
        for k in range(reps):
            # ABBA: which run of a pair goes first alternates, so a drift or an
            # order effect does not favour one side
            order = (60.0, 0.01) if k % 2 == 0 else (0.01, 60.0)
            got = {}
            for interval in order:
                got[interval] = goodput(engine, dur, interval, flows, pacing)
                if interval == 0.01:
                    ticks, cpu, rows, hot_rows = sampling_share(engine)
                    share.append(ticks / cpu)
                    per_row.append(ticks / rows * 1e6)
                    hot.append(hot_rows / rows)
                    core.append(ticks / dur)
            unsampled.append(got[60.0][0])
            sampled.append(got[0.01][0])
            eff.append(got[0.01][1] / got[60.0][1])
            # what sampling added to the engine's CPU, per second of the run, over what the sampler said it spent
            # (meaningful where the work is fixed: paced flows move the same bytes either way)
            extra.append((got[0.01][2] - got[60.0][2]) / dur / core[-1] if core[-1] > 0 else math.nan)
            print(f"  pair {k + 1} ({'unsampled first' if k % 2 == 0 else 'sampled first'}): unsampled "
                  f"{unsampled[-1] / 1e9:.2f} Gbit/s, sampled {sampled[-1] / 1e9:.2f} Gbit/s, "
                  f"ratio {sampled[-1] / unsampled[-1]:.3f}; bytes per engine CPU second ratio {eff[-1]:.3f}; "
                  f"sampler {100 * share[-1]:.2f} % of the engine's CPU, {100 * core[-1]:.2f} % of a core "
                  f"({per_row[-1]:.2f} us per row, {100 * hot[-1]:.0f} % of the rows taken hot); engine CPU with "
                  f"- without sampling = {extra[-1]:.2f} x the sampler's own", flush=True)
        engine.close()
    finally:
        pair.close()
    a, b = statistics.median(sampled), statistics.median(unsampled)
    ratios = sorted(x / y for x, y in zip(sampled, unsampled))
    print(f"{flows} flows goodput sampled@10ms {a / 1e9:.2f} Gbit/s, unsampled {b / 1e9:.2f} Gbit/s, "
          f"ratio of medians {a / b:.3f}, median pair ratio {statistics.median(ratios):.3f} "
          f"[{ratios[0]:.3f}-{ratios[-1]:.3f}] ({NO_GOODPUT_TARGET})", flush=True)
    eff.sort()
    print(f"bytes moved per CPU second of the engine (client + server processes), sampled / unsampled: "
          f"median {statistics.median(eff):.3f} [{eff[0]:.3f}-{eff[-1]:.3f}] (all effects of sampling, caches "
          "included, but as noisy as the neighbours' load; kernel work done in ksoftirqd is not in it)", flush=True)
    for values in (share, per_row, hot, core, extra):
        values.sort()
    print(f"{flows} flows {how}, sampled at 10 ms: the sampler took {100 * statistics.median(core):.2f} % of one core "
          f"[{100 * core[0]:.2f}-{100 * core[-1]:.2f}], {statistics.median(per_row):.2f} us per row; with/without: the "
          f"engine's CPU grew by {statistics.median(extra):.2f} [{extra[0]:.2f}-{extra[-1]:.2f}] x what the sampler "
          "reported (1: its ticks are all it costs; flat-out flows move more bytes unsampled, so there it "
          "reads low; a spread far wider than 0-2 says the runs' own CPU moved more than sampling costs)",
          flush=True)
    print(f"the sampler's share of the engine's CPU: {100 * statistics.median(share):.2f} % [{100 * share[0]:.2f}-"
          f"{100 * share[-1]:.2f}] (the thread CPU of its sweeps and of the rows its flow ends took at their idle "
          f"points, from the flow summaries' sampling_seconds, over the workers' CPU; {statistics.median(per_row):.2f} "
          f"us per row [{per_row[0]:.2f}-{per_row[-1]:.2f}], {100 * statistics.median(hot):.0f} % of the rows hot); "
          f"target < {SHARE_TARGET:g} %: {'ok' if 100 * statistics.median(share) < SHARE_TARGET else 'MISSED'}",
          flush=True)


RR_P99_TARGET = 1.05  # p99 sampled / unsampled (issue 14)


def summed(a: list[int], b: list[int]) -> list[int]:
    """``a`` + ``b`` element by element (``b`` alone while ``a`` is empty)."""
    return [x + y for x, y in zip(a, b)] if a else list(b)


def read_holds(where: Path) -> tuple[list[int], list[int], dict[str, list[int]]]:
    """The clients' and servers' hold counts and the places of the rows (``_rrloop.holds``) the engine's C loops
    of RR flow ends wrote to ``where`` (NETESTO_RR_HOLDS) since the last call; the files are removed."""
    roles: list[list[int]] = [[], []]
    places: dict[str, list[int]] = {}
    for path in where.glob("holds-*.json"):
        got = json.loads(path.read_text())
        path.unlink()
        for r in (0, 1):
            roles[r] = summed(roles[r], got["counts"][r])
        for place, n_ns in got["places"].items():
            places[place] = summed(places.get(place, [0, 0]), n_ns)
    return roles[0], roles[1], places


def held(counts: list[int], width_us: float = 2.0) -> tuple[float, float]:
    """(% of the transactions a row held, the 99.9th percentile of the hold, us) of one role's counts."""
    total = sum(counts)
    if not total:
        return 0.0, 0.0
    acc = 0
    for k, n in enumerate(counts):
        acc += n
        if acc >= 0.999 * total:
            return 100 * (total - counts[0]) / total, k * width_us
    return 100 * (total - counts[0]) / total, len(counts) * width_us


def rr_part(dur: float, reps: int, cpus: tuple[int | None, int | None], workdir: Path) -> None:
    """Part 2: RR p99 with the sampler ticking every 10 ms over p99 without it (interval 60 s)."""
    print(f"# RR p99 sampled (10 ms) / unsampled (60 s), {dur:g} s runs, {reps} ABBA pairs, {where(cpus)}; "
          "client flows on one worker, one server worker", flush=True)
    pair = netns.make_veth_pair()
    holds = workdir / "holds"
    holds.mkdir(parents=True, exist_ok=True)
    env = ["env", f"NETESTO_RR_HOLDS={holds}"]
    try:
        engine = Engine(pair, workdir / "rr", server_prefix=[*env, *place(cpus[1])], options=())
        for flows in (1, 16):
            ids = [f"a-b-0-{i}" for i in range(flows)]
            ratios: list[float] = []
            shares: list[float] = []
            p99s: dict[float, list[float]] = {0.01: [], 60.0: []}
            cli: list[int] = []
            srv: list[int] = []
            places: dict[str, list[int]] = {}
            for k in range(reps):
                order = (60.0, 0.01) if k % 2 == 0 else (0.01, 60.0)
                got = {}
                for interval in order:
                    summaries = engine.run([dict(flow_id=fid, test="TCP_RR", dur=dur, ca="cubic", interval=interval)
                                            for fid in ids], workers=1, client_prefix=[*env, *place(cpus[0])])
                    got[interval] = engine.p99_us(ids)
                    p99s[interval].append(got[interval])
                    engine.server_summaries(ids)
                    for _ in range(20):  # (both ends' groups have emptied: their holds are written)
                        if flows == 1 or len(list(holds.glob("holds-*.json"))) >= 2:
                            break
                        time.sleep(0.05)
                    c, s_, pl = read_holds(holds)
                    if interval == 0.01:
                        shares.append(max(s["cpu"]["sampling_percent"] for s in summaries))
                        cli, srv = summed(cli, c), summed(srv, s_)
                        for place, n_ns in pl.items():
                            places[place] = summed(places.get(place, [0, 0]), n_ns)
                ratios.append(got[0.01] / got[60.0])
            ratios.sort()
            mid = statistics.median(ratios)
            print(f"  {flows} RR flow{'s' if flows > 1 else ''}: p99 sampled {statistics.median(p99s[0.01]):.1f} us, "
                  f"unsampled {statistics.median(p99s[60.0]):.1f} us; pair ratio median {mid:.3f} "
                  f"[{ratios[0]:.3f}-{ratios[-1]:.3f}] (target <= {RR_P99_TARGET:g}: "
                  f"{'ok' if mid <= RR_P99_TARGET else 'MISSED'}); the client worker's sampling share "
                  f"{statistics.median(shares):.2f} % [{min(shares):.2f}-{max(shares):.2f}]", flush=True)
            if flows > 1 and cli:  # (the lone loops of 1 flow are not counted)
                (c_pct, c_999), (s_pct, s_999) = held(cli), held(srv)
                rows = ", ".join(f"{k} {n} at {ns / max(1, n) / 1e3:.1f} us" for k, (n, ns) in places.items()
                                 if n and k != "park")
                parks, park_ns = places.get("park", [0, 0])
                print(f"    the rows' hold on the sampled runs' transactions (in the C loops; load-insensitive): "
                      f"clients {c_pct:.2f} % held, p99.9 of the hold {c_999:.0f} us; servers (an upper bound) "
                      f"{s_pct:.2f} %, p99.9 {s_999:.0f} us; rows taken: {rows} (elapsed per row); the clients' "
                      f"parks: {parks}, {park_ns / max(1, parks) / 1e3:.0f} us each (first parked to requests out)",
                      flush=True)
        engine.close()
    finally:
        pair.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dur", type=float, default=10.0,
                        help="seconds per run (3 s runs swing by +-10 %%: a start transient and the neighbours)")
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--flows", type=int, default=64)
    parser.add_argument("--paced", type=float, default=40.0, metavar="MBIT",
                        help="part 1 again with each flow paced to MBIT Mbit/s (default 40; 0: skip)")
    parser.add_argument("--cost", action="store_true", help="also print the per-sample cost split")
    parser.add_argument("--cost-only", action="store_true", help="only print the per-sample cost split")
    parser.add_argument("--idle-only", action="store_true",
                        help="only the idle row's cost, ticks 10 ms apart and back to back (quick: for A/B of builds)")
    parser.add_argument("--idle-rounds", type=int, default=5, help="rounds of --idle-only")
    parser.add_argument("--cpu-only", action="store_true", help="only measure the sampler's CPU (idle flows)")
    parser.add_argument("--within-dur", type=float, default=60.0, help="seconds of each within-run run")
    parser.add_argument("--within-runs", type=int, default=2, help="within-run runs sampled (0: none)")
    parser.add_argument("--within-window", type=float, default=0.5, help="seconds of each within-run window")
    parser.add_argument("--within-only", action="store_true", help="only the within-run measurements")
    parser.add_argument("--within-cpu-runs", type=int, default=2,
                        help="within-run runs of the CPU with/without check, flows paced to --paced (0: none)")
    parser.add_argument("--rr-only", action="store_true", help="only RR p99 sampled vs unsampled")
    parser.add_argument("--no-rr", action="store_true", help="skip RR p99 sampled vs unsampled")
    parser.add_argument("--rr-cpus", type=placement, default=(0, 1),
                        help="client,server CPUs of the RR part ('none': unpinned); default 0,1 (cross CPU)")
    args = parser.parse_args()
    guard()
    workdir = Path(tempfile.mkdtemp(prefix="bench_sampling"))
    try:
        if args.idle_only:
            print_idle(args.flows, workdir, args.idle_rounds)
            return 0
        if args.cost or args.cost_only:
            print_cost(args.flows, workdir)
            if args.cost_only:
                return 0
        if args.cpu_only:
            sampler_part(workdir)
            return 0
        if args.rr_only:
            rr_part(args.dur, args.reps, args.rr_cpus, workdir)
            return 0
        if args.within_runs:
            within_run_part(args.within_dur, args.flows, args.within_runs, args.within_window)
        if args.within_cpu_runs and args.paced:
            within_cpu_part(args.within_dur, args.flows, args.within_cpu_runs, args.within_window,
                            int(args.paced * 1e6))
        if args.within_only:
            return 0
        stream_part(args.dur, args.reps, args.flows, workdir)
        if args.paced:  # the same rows where the engine has little else to do: their share of its CPU grows
            stream_part(args.dur, args.reps, args.flows, workdir, pacing=int(args.paced * 1e6))
        if not args.no_rr:
            rr_part(args.dur, args.reps, args.rr_cpus, workdir)
        sampler_part(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
